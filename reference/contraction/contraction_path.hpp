// Which evaluation the reference's contractions use (docs/fast-reference.md):
//   automatic  per product, fast where fast_path_pays (below) says it is cheaper, else plain:
//              the default
//   fast       contraction/fast_contraction.hpp: Ozaki slicing into exact double GEMMs, every term
//              within gamma_rho(u_R)·Σ|ab| (rho ≤ k_r − 1: never worse than plain), for every
//              product whatever its size (the cross-checks use it so)
//   plain      dot.hpp's contract_parts element by element in R: the 113-bit loops, kept for
//              cross-checks (properties/reference/fast_linear_props.cpp runs both on the same
//              cases)
// Both give the terms bounds.hpp needs with the same per-part lengths; their values differ by at
// most the reference's own rounding, which the bounds already cover; so the choice changes the
// time a product takes, never what the bounds claim.
//
// The process-wide default comes from the environment variable SHARDCHECK_REFERENCE, read once
// (the first time a reference op asks): unset, empty or "auto" → automatic, "fast" → fast,
// "plain" → plain. Every reference op that contracts also takes a ContractionPath argument, which
// overrides it for that call.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

namespace shardcheck::reference {

enum class ContractionPath { automatic, fast, plain };

inline const char* path_name(ContractionPath p) {
  switch (p) {
    case ContractionPath::automatic: return "auto";
    case ContractionPath::fast: return "fast";
    case ContractionPath::plain: return "plain";
  }
  return "?";
}

// Whether the fast path is expected to beat the loops on an [m, k]·[k, n] product, by a cost
// model fitted to one run on the 2-core machine (docs/fast-reference.md, "Small products"), in
// units of one multiply-add of the loops (about 50 ns in hp): the loops m·n·k; the fast path 200
// for the call, per operand element 1.6 when the operand is doubles or 16 when it holds R values
// (their slicing), and per result element 3, or 20 with an R operand (the diagonals' sums in R).
// Products with every dimension of 16 or more pay; the suites' products of a few elements a
// side mostly do not.
inline bool fast_path_pays(std::size_t m, std::size_t n, std::size_t k, bool a_doubles,
                           bool b_doubles) {
  const auto dm = static_cast<double>(m), dn = static_cast<double>(n), dk = static_cast<double>(k);
  const double fast = 200 + dm * dk * (a_doubles ? 1.6 : 16) + dk * dn * (b_doubles ? 1.6 : 16) +
                      dm * dn * (a_doubles && b_doubles ? 3 : 20);
  return fast < dm * dn * dk;
}

// `path` for one [m, k]·[k, n] product: automatic becomes fast or plain by fast_path_pays; fast
// and plain stay as they are.
inline ContractionPath resolve_path(ContractionPath path, std::size_t m, std::size_t n,
                                    std::size_t k, bool a_doubles, bool b_doubles) {
  if (path != ContractionPath::automatic) return path;
  return fast_path_pays(m, n, k, a_doubles, b_doubles) ? ContractionPath::fast
                                                       : ContractionPath::plain;
}

// The value of SHARDCHECK_REFERENCE (nullptr: unset) as a path.
// @throws std::invalid_argument for any other value than "auto", "fast", "plain" or empty.
inline ContractionPath parse_contraction_path(const char* value) {
  if (value == nullptr) return ContractionPath::automatic;
  const std::string_view v(value);
  if (v.empty() || v == "auto") return ContractionPath::automatic;
  if (v == "fast") return ContractionPath::fast;
  if (v == "plain") return ContractionPath::plain;
  throw std::invalid_argument("SHARDCHECK_REFERENCE=\"" + std::string(v) +
                              "\": the reference's contraction path must be \"auto\" (the "
                              "default: the fast path where it pays), \"fast\" (exact double "
                              "GEMMs for every product, docs/fast-reference.md) or \"plain\" "
                              "(the 113-bit loops); unset it or set one of those");
}

// The process-wide default: SHARDCHECK_REFERENCE, read on the first call (thread-safe static).
// @throws std::invalid_argument (every call) when the variable holds an unknown value.
inline ContractionPath default_contraction_path() {
  struct Read {
    ContractionPath path = ContractionPath::automatic;
    std::string error;
  };
  static const Read read = [] {
    Read r;
    try {
      // NOLINTNEXTLINE(concurrency-mt-unsafe): read once, under the static's initialization
      r.path = parse_contraction_path(std::getenv("SHARDCHECK_REFERENCE"));
    } catch (const std::invalid_argument& e) {
      r.error = e.what();
    }
    return r;
  }();
  if (!read.error.empty()) throw std::invalid_argument(read.error);
  return read.path;
}

}  // namespace shardcheck::reference
