// Which evaluation the reference's contractions use (docs/fast-reference.md):
//   fast   contraction/fast_contraction.hpp: Ozaki slicing into exact double GEMMs, every term
//          within gamma_rho(u_R)·Σ|ab| (rho ≤ k_r − 1: never worse than plain), the default
//   plain  dot.hpp's contract_parts element by element in R: the 113-bit loops, kept for
//          cross-checks (properties/reference/fast_linear_props.cpp runs both on the same cases)
// Both give the terms bounds.hpp needs with the same per-part lengths; their values differ by at
// most the reference's own rounding, which the bounds already cover.
//
// The process-wide default comes from the environment variable SHARDCHECK_REFERENCE, read once
// (the first time a reference op asks): unset or "fast" → fast, "plain" → plain. Every reference
// op that contracts also takes a ContractionPath argument, which overrides it for that call.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

namespace shardcheck::reference {

enum class ContractionPath { fast, plain };

inline const char* path_name(ContractionPath p) {
  return p == ContractionPath::fast ? "fast" : "plain";
}

// The value of SHARDCHECK_REFERENCE (nullptr: unset) as a path.
// @throws std::invalid_argument for any other value than "fast", "plain" or empty.
inline ContractionPath parse_contraction_path(const char* value) {
  if (value == nullptr) return ContractionPath::fast;
  const std::string_view v(value);
  if (v.empty() || v == "fast") return ContractionPath::fast;
  if (v == "plain") return ContractionPath::plain;
  throw std::invalid_argument("SHARDCHECK_REFERENCE=\"" + std::string(v) +
                              "\": the reference's contraction path must be \"fast\" (the "
                              "default: exact double GEMMs, docs/fast-reference.md) or \"plain\" "
                              "(the 113-bit loops); unset it or set one of those");
}

// The process-wide default: SHARDCHECK_REFERENCE, read on the first call (thread-safe static).
// @throws std::invalid_argument (every call) when the variable holds an unknown value.
inline ContractionPath default_contraction_path() {
  struct Read {
    ContractionPath path = ContractionPath::fast;
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
