// The fast contraction's contract (reference/contraction/fast_contraction.hpp), checked on one
// generated product against an oracle X: the generator, the oracle and the check, shared by
// fast_contraction_props.cpp (X: 256-bit cpp_bin_float) and fast_contraction_mpfr_props.cpp
// (X: Boost's MPFR type at 203 bits).
//
// A case: a [m, k]·b [k, n] (m, n in 0..9, k in 0..300, 1..8 parts with empty ones), entries of a
// storage type T in one of product_gen.hpp's mixes; each operand either doubles (storage values)
// or values computed in R (Valued): each entry v becomes hp(v)/3, 113 significant bits, and
// sometimes one entry is moved outside double's exponent range (2^±1150: the plain fallback of
// its line).
// Oracles, per element and part:
//   exact  Σ a·b and Σ|a·b| in X: a product of two hp values has at most 226 bits (exact in the
//          256-bit type; rounded once, relative 2^(1−digits), in MPFR's), the sums of k ≤ 300 err
//          by < (k + 1)·2^(1−digits)·Σ|a·b| (the `slack` added to every tolerance);
//   plain  contract_parts (dot.hpp) in hp, the 113-bit path the fast one replaces.
// Asserted (each tolerance is the header's claim, plus the oracle's slack):
//   (1) every finite term: |partial − exact| and |abs_sum − exact Σ|ab|| ≤ gamma_c(2^-113)·Σ|ab|
//       with c = k_r − 1 for two double operands (dot.hpp's contract, which bounds.hpp's
//       reference term relies on) and c = k_r with an R operand (the plain path's products then
//       round once too);
//   (2) when no term went to the plain path (FastStats::hp_elements == 0), the sharper
//       gamma_rho(2^-113)·Σ|ab| with rho the largest count of roundings in R (max_roundings);
//   (2') when moreover no rest product was added and rho ≤ 1: |partial − exact| ≤ 2^-113·|exact|
//       and likewise abs_sum (one rounding of the exact sum: correctly rounded);
//   (3) non-finite plain terms: the fast term is the same (NaN for NaN, the same infinity).
// With AbsSums::upper_bound (drawn per case; the default of fast_contraction) (1), (2) and (2')
// hold for partial, and abs_sum instead lies in the header's bracket
//   Σ|ab|·(1 − c) ≤ abs_sum ≤ (1 + 2^-52)^q·(1 + 4·gamma_{k_r}(2^-53))·Σ|ab|
//                             + 4·k_r·max|a|·max|b|·2^-1016
// (q: the operands holding R values, whose magnitudes magnitude_up rounds up to doubles)
// (the lower end is the plain path's, for terms computed by contract_parts; 2^(E_i + F_j) ≤
// 4·max|a[i, ·]|·max|b[·, j]| over the part), plus the oracle's slack.
#pragma once

#include "reference/product_gen.hpp"
#include "testing/reference_gen.hpp"

#include "reference/contraction/fast_contraction.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace shardcheck::props::ref {

using reference::FastOptions;
using reference::FastStats;
using reference::hp;
using reference::PartTerms;

// Which operands hold values computed in R rather than doubles.
enum class Valued { doubles, a_in_r, b_in_r, both_in_r };

inline const char* valued_name(Valued v) {
  const char* names[] = {"doubles", "a in R", "b in R", "a and b in R"};
  return names[static_cast<int>(v)];
}

// a [m, k] and b [k, n], row-major, in hp (exactly doubles for a double-valued operand), with
// the parts of k.
struct ProductCase {
  std::size_t m = 0, k = 0, n = 0;
  std::vector<hp> a, b;
  bool a_in_r = false, b_in_r = false;
  std::vector<std::size_t> parts;
  std::string describe() const {
    std::string s = "a [" + std::to_string(m) + ", " + std::to_string(k) + "]" +
                    (a_in_r ? " in R" : "") + ", b [" + std::to_string(k) + ", " +
                    std::to_string(n) + "]" + (b_in_r ? " in R" : "") + ", parts [";
    for (std::size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + std::to_string(parts[i]);
    return s + "]";
  }
};

// An operand's values made R values: v/3 rounded to hp (113 significant bits for every finite
// nonzero v), and with probability 1/4 one of them moved to 2^±1150 (outside double's range).
inline void make_r_valued(std::vector<hp>& values) {
  for (hp& v : values) v /= 3;
  if (values.empty() || *uniform(0, 3) != 0) return;
  hp& v = values[*uniform<std::size_t>(0, values.size() - 1)];
  using std::ldexp;
  if (v != 0 && boost::multiprecision::isfinite(v)) {
    v = ldexp(v, (*uniform(0, 1) == 0 ? -1150 : 1150) - reference::detail::exponent_of(v));
  }
}

template <class T>
rc::Gen<ProductCase> genProductCase(Mix mix, Valued valued = Valued::doubles) {
  return rc::gen::exec([mix, valued] {
    ProductCase c;
    c.m = *uniform<std::size_t>(0, 9);
    c.n = *uniform<std::size_t>(0, 9);
    c.k = *genInnerLength();
    auto draw = [&](std::size_t count) {
      std::vector<hp> out;
      for (T v : *rc::gen::container<std::vector<T>>(count, genEntry<T>(mix)))
        out.emplace_back(static_cast<double>(v));
      return out;
    };
    c.a = draw(c.m * c.k);
    c.b = draw(c.k * c.n);
    if (mix == Mix::cancellation && c.k >= 2) {
      // The second half of the axis repeats the first with a's sign flipped, and one product
      // of it is perturbed: each element's exact sum is a residue far below Σ|ab|.
      const std::size_t h = c.k / 2;
      for (std::size_t i = 0; i < c.m; ++i) {
        for (std::size_t q = 0; q < h; ++q) c.a[i * c.k + h + q] = -c.a[i * c.k + q];
      }
      for (std::size_t q = 0; q < h; ++q) {
        for (std::size_t j = 0; j < c.n; ++j) c.b[(h + q) * c.n + j] = c.b[q * c.n + j];
      }
      if (c.m > 0) c.a[c.k - 1] = hp(static_cast<double>(*genLogUniform<T>(-30, -10)));
    }
    if (mix == Mix::special && !c.a.empty()) {
      const T inf = std::numeric_limits<T>::infinity();
      const std::size_t count = *uniform<std::size_t>(1, 2);
      for (std::size_t s = 0; s < count; ++s) {
        std::vector<hp>& v = (c.b.empty() || *uniform(0, 1) == 0) ? c.a : c.b;
        v[*uniform<std::size_t>(0, v.size() - 1)] = hp(
            static_cast<double>(*rc::gen::element(inf, -inf, std::numeric_limits<T>::quiet_NaN())));
      }
    }
    c.a_in_r = valued == Valued::a_in_r || valued == Valued::both_in_r;
    c.b_in_r = valued == Valued::b_in_r || valued == Valued::both_in_r;
    if (c.a_in_r) make_r_valued(c.a);
    if (c.b_in_r) make_r_valued(c.b);
    c.parts =
        draw_parts(c.k, *rc::gen::weightedOneOf<int>({{2, rc::gen::just(1)}, {5, uniform(2, 8)}}));
    return c;
  });
}

inline std::vector<double> as_doubles(const std::vector<hp>& v) {
  std::vector<double> out;
  out.reserve(v.size());
  for (const hp& x : v) out.push_back(static_cast<double>(x));
  return out;
}

// The fast path on the case, each operand viewed as doubles or as R values.
inline reference::Contraction<hp> fast_of(const ProductCase& c, const FastOptions& o) {
  const std::vector<double> da = c.a_in_r ? std::vector<double>{} : as_doubles(c.a);
  const std::vector<double> db = c.b_in_r ? std::vector<double>{} : as_doubles(c.b);
  auto run = [&](const auto& va, const auto& vb) {
    return reference::fast_contraction<hp>(va, vb, c.parts, o);
  };
  const auto ra = reference::row_major_view(c.a.data(), c.m, c.k);
  const auto rb = reference::row_major_view(c.b.data(), c.k, c.n);
  const auto xa = reference::row_major_view(da.data(), c.m, c.k);
  const auto xb = reference::row_major_view(db.data(), c.k, c.n);
  if (c.a_in_r) return c.b_in_r ? run(ra, rb) : run(ra, xb);
  return c.b_in_r ? run(xa, rb) : run(xa, xb);
}

// v exactly in X (≥ 113 bits): its 113-bit integer significand in three 38-bit pieces, each exact
// as a double, scaled by powers of two. Non-finite values through double.
template <class X>
X exactly(const hp& v) {
  using boost::multiprecision::isfinite;
  if (!isfinite(v) || v == 0) return X(static_cast<double>(v));
  using std::frexp;
  using std::ldexp;
  using std::trunc;
  int e = 0;
  hp m = ldexp(hp(frexp(v, &e)), 114);  // |m| < 2^114, an integer
  X out(0);
  for (int piece = 0; piece < 3; ++piece) {
    const hp high = trunc(hp(ldexp(m, -38)));
    out += ldexp(X(static_cast<double>(hp(m - ldexp(high, 38)))), 38 * piece);
    m = high;
  }
  return ldexp(out, e - 114);
}

// The plain 113-bit terms and the exact ones of element (i, j), part r starting at k0.
template <class X>
struct Oracle {
  PartTerms<hp> plain;
  X partial{0}, abs_sum{0};
  X max_a{0}, max_b{0};  // max |a[i, c]| and max |b[c, j]| over the part
};
template <class X>
Oracle<X> oracle(const ProductCase& c, std::size_t i, std::size_t j, std::size_t k0,
                 std::size_t kr) {
  Oracle<X> o;
  std::vector<hp> x(kr), y(kr);
  for (std::size_t q = 0; q < kr; ++q) {
    x[q] = c.a[i * c.k + k0 + q];
    y[q] = c.b[(k0 + q) * c.n + j];
    const X p = exactly<X>(x[q]) * exactly<X>(y[q]);
    o.partial += p;
    o.abs_sum += abs(p);
    o.max_a = std::max(o.max_a, X(abs(exactly<X>(x[q]))));
    o.max_b = std::max(o.max_b, X(abs(exactly<X>(y[q]))));
  }
  const std::size_t one[] = {kr};
  reference::contract_parts<hp>(x.data(), 1, y.data(), 1, one, &o.plain);
  return o;
}

template <class X>
X gamma_113(std::size_t n) {
  return n == 0 ? X(0) : reference::gamma<X>(n, reference::pow2<X>(-113));
}

template <class X>
std::string show_exact(const X& v) {
  return v.str(20, std::ios_base::scientific);
}

// (1)-(3) for every element and part; the first violation, or "".
template <class X>
std::string violation(const ProductCase& c, const reference::Contraction<hp>& got,
                      const FastStats& stats,
                      reference::AbsSums abs_sums = reference::AbsSums::exact) {
  const bool exact_abs = abs_sums == reference::AbsSums::exact;
  const std::size_t mn = c.m * c.n;
  const bool all_fast = stats.hp_elements == 0;
  const bool rounded_once = all_fast && stats.rest_products == 0 && stats.max_roundings <= 1;
  const bool products_round = c.a_in_r || c.b_in_r;
  const X oracle_unit = reference::pow2<X>(1 - std::numeric_limits<X>::digits);
  std::size_t k0 = 0;
  for (std::size_t r = 0; r < c.parts.size(); ++r) {
    const std::size_t kr = c.parts[r];
    const X claim = gamma_113<X>(kr == 0 ? 0 : (products_round ? kr : kr - 1));
    const X sharp = gamma_113<X>(stats.max_roundings);
    for (std::size_t i = 0; i < c.m; ++i) {
      for (std::size_t j = 0; j < c.n; ++j) {
        const PartTerms<hp>& f = got.terms[r * mn + i * c.n + j];
        const Oracle<X> o = oracle<X>(c, i, j, k0, kr);
        const std::string where = c.describe() + ", element (" + std::to_string(i) + ", " +
                                  std::to_string(j) + "), part " + std::to_string(r) + ": ";
        if (f.length != kr) return where + "length " + std::to_string(f.length);
        using boost::multiprecision::isfinite;
        using boost::multiprecision::isnan;
        if (!isfinite(o.plain.partial) || !isfinite(o.plain.abs_sum)) {
          const bool same =
              (isnan(o.plain.partial) ? isnan(f.partial) : f.partial == o.plain.partial) &&
              (isnan(o.plain.abs_sum) ? isnan(f.abs_sum) : f.abs_sum == o.plain.abs_sum);
          if (!same) return where + "non-finite plain terms differ from the fast ones";
          continue;
        }
        if (!isfinite(f.partial) || !isfinite(f.abs_sum)) {
          return where + "non-finite fast terms where the plain ones are finite";
        }
        const X ep = abs(exactly<X>(f.partial) - o.partial);
        const X ea = abs(exactly<X>(f.abs_sum) - o.abs_sum);
        const X slack = X(kr + 1) * oracle_unit * o.abs_sum;
        const X allowed = (all_fast ? std::min(claim, sharp) : claim) * o.abs_sum + slack;
        // With no rest product and at most one rounding, the slices' exact sum was rounded once
        // to 113 bits: the terms are correctly rounded, relative to the exact values themselves.
        const auto u = reference::pow2<X>(-113);
        if (rounded_once &&
            (ep > u * abs(o.partial) + slack || (exact_abs && ea > u * o.abs_sum + slack))) {
          return where + "not correctly rounded: |partial err| " + show_exact(ep) + ", exact " +
                 show_exact(o.partial);
        }
        if (!exact_abs) {
          const X fa = exactly<X>(f.abs_sum);
          const X g53 = kr == 0 ? X(0) : reference::gamma<X>(kr, reference::pow2<X>(-53));
          const X low = o.abs_sum * (1 - claim) - slack;
          const X r_up = pow(1 + reference::pow2<X>(-52),
                             static_cast<int>(c.a_in_r) + static_cast<int>(c.b_in_r));
          const X high = r_up * (1 + 4 * g53) * o.abs_sum +
                         4 * X(kr) * o.max_a * o.max_b * reference::pow2<X>(-1016) + slack;
          if (fa < low || fa > high) {
            return where + "abs_sum " + show_exact(fa) + " outside the upper-bound bracket [" +
                   show_exact(low) + ", " + show_exact(high) + "] (Σ|ab| " + show_exact(o.abs_sum) +
                   ")";
          }
        }
        if (ep > allowed || (exact_abs && ea > allowed)) {
          return where + "|partial err| " + show_exact(ep) + ", |abs_sum err| " + show_exact(ea) +
                 " > " + show_exact(allowed) + " (Σ|ab| " + show_exact(o.abs_sum) + ", rho " +
                 std::to_string(stats.max_roundings) + (all_fast ? ", all fast)" : ")");
        }
      }
    }
    k0 += kr;
  }
  return {};
}

// One case of the property: T's values in a drawn mix, `valued` operands, oracle X; `mutant`
// drops a's last slice, `karatsuba_mutant` forgets one square in Karatsuba's cross terms (the
// self-tests).
template <class T, class X>
void fast_meets_its_claim(bool mutant, Valued valued, bool karatsuba_mutant = false) {
  const Mix mix = draw_mix();
  const ProductCase c = *genProductCase<T>(mix, valued);
  FastStats stats;
  FastOptions o;
  o.stats = &stats;
  o.mutant_drop_last_slice = mutant;
  o.abs_sums = *rc::gen::element(reference::AbsSums::upper_bound, reference::AbsSums::exact);
  o.karatsuba = karatsuba_mutant || *rc::gen::arbitrary<bool>();
  o.mutant_karatsuba_keeps_a_square = karatsuba_mutant;
  RC_TAG(type_name(T{}), mix_name(mix), valued_name(valued),
         o.abs_sums == reference::AbsSums::exact ? "exact abs sums" : "upper-bound abs sums",
         o.karatsuba ? "Karatsuba allowed" : "pairwise");
  const auto got = fast_of(c, o);
  RC_CLASSIFY(stats.rest_products > 0, "with rest products");
  RC_CLASSIFY(stats.hp_elements > 0, "with plain-path terms");
  RC_CLASSIFY(stats.max_pairs > 1, "more than one slice pair");
  RC_CLASSIFY(stats.karatsuba_parts > 0, "Karatsuba's products");
  RC_CLASSIFY(stats.fast_elements == 0, "no term from the slices");
  const std::string v = violation<X>(c, got, stats, o.abs_sums);
  if (!v.empty()) RC_FAIL(std::string(type_name(T{})) + " " + mix_name(mix) + ": " + v);
}

// An R-valued configuration, drawn.
inline Valued draw_r_valued() {
  return *rc::gen::element(Valued::a_in_r, Valued::b_in_r, Valued::both_in_r);
}

}  // namespace shardcheck::props::ref
