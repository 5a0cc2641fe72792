// A-priori elementwise error bounds for contractions computed under lib/ops/linear/linear.hpp's
// arithmetic contract, and the verdict that applies them. The derivation is written out in
// docs/tolerances.md ("Linear layers"); each term below names the step it covers.
//
// The contract (lib/ops/linear/linear.hpp), for storage type T with accumulator A = acc_t<T>
// (float64 for float64, float32 for float32, bfloat16 and float16):
//   1. each part r of the contracted axis (one per rank holding a shard of it; one part when
//      the axis is not split) is a dot of k_r products accumulated in A, in ANY order (any
//      summation tree, with or without fused multiply-add);
//   2. the part's result is rounded once to T (nothing to do when T = A);
//   3. the p parts are summed in T in any order (a ring or sequential reduction), each step one
//      rounding to T (runtime/reduce_op.hpp);
//   4. the bias, if any, is added once in T, after the sum.
// Rounding is IEEE round-to-nearest-even with gradual underflow. bfloat16/float16 additions
// compute in float then round to T; that double rounding equals one rounding because
// float's 24 ≥ 2p+2 bits (Figueroa, "When is double rounding innocuous?", SIGNUM Newsl. 1995;
// checked on this toolchain by properties/reference/contract_props.cpp).
//
// Per part, with s_r = exact partial, a_r = Σ|a_i b_i|, u_A, eta_A, u_T, eta_T (format.hpp):
//   (a) accumulation  e_A,r = gamma_n(u_A)·a_r + [k_r·eta_A/2·(1 + gamma_{k_r−1}(u_A))]
//        n = k_r − 1 when every product is exact in A (2·p_T ≤ p_A: bfloat16, float16 in float;
//        or Operands::unit), else n = k_r (Higham, ASNA 2nd ed., §3.1, (3.4)–(3.5)).
//        The bracket is gradual underflow: a product may lose up to eta_A/2 (or an fma up to
//        eta_A/2 when its result is subnormal), later roundings scale it by ≤ 1 + gamma_{k_r−1};
//        additions whose result is subnormal are exact (Hauser, ACM TOPLAS 18(2), 1996), so
//        nothing else underflows. Zero for Operands::unit (products a_i·1 are exact).
//   (b) rounding to T  e_r = e_A,r + max(u'_T·(|s_r| + e_A,r), eta_T/2)  (0 extra when T = A),
//        u'_T = u_T/(1 + u_T): RN's error is ≤ u'·|v| for v in the normal range (Jeannerod &
//        Rump, SIAM J. Matrix Anal. Appl. 39(3), 2018) and ≤ eta_T/2 below it; |v| ≤ |s_r| + e_A,r.
//   (d) parts summed in T (q = number of non-empty parts; sums with an exact +0 are exact):
//        e = Σ_r e_r + gamma_{q−1}(u_T)·Σ_r (|s_r| + e_r)
//   (c) bias in T     e_y = e + u'_T·(|s + b| + e)        (an addition: no underflow term)
//   (e) sums over tokens (db) are (a)–(b) with Operands::unit.
// Plus the reference's own rounding in R (dot.hpp) and a margin for evaluating this formula in R
// (see reference_term below). Without a bias and with one part this is the issue's
// "gamma_k(u_acc)·|x|ᵀ|y| + u_out·|result|", made rigorous for underflow.
//
// Overflow: the derivation assumes no step overflows. Once a step overflows, the result is ±inf
// or NaN (no later step turns inf finite), so a FINITE computed result always satisfies the
// bound; a non-finite result is correct only when an overflow was possible (may_overflow).
#pragma once

#include "reference/dot.hpp"
#include "reference/format.hpp"
#include "reference/precision.hpp"

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace shardcheck::reference {

// The formats an implementation computes in: storage T and accumulator A.
struct Arithmetic {
  Format storage;
  Format accumulate;
  friend constexpr bool operator==(const Arithmetic&, const Arithmetic&) = default;
};

// Storage T and its accumulator acc_t<T> (runtime/dtype.hpp, the one definition lib/ops uses).
template <StorageFloat T>
constexpr Arithmetic arithmetic_of() {
  return {format_of<T>(), format_of<acc_t<T>>()};
}

inline Arithmetic arithmetic_of(DType t) { return {format_of(t), format_of(acc_dtype(t))}; }

enum class BoundStatus : unsigned char {
  holds,            // no step can overflow: |computed − reference| ≤ bound
  may_overflow,     // some step may reach Omega: a finite result still obeys the bound, and a
                    // non-finite result is acceptable
  nonfinite_input,  // an operand is ±inf or NaN: compare the classes (NaN where the reference
                    // is NaN, the same infinity where it is infinite); bound is +inf
};

// The bound split into its sources, for reports. Their sum is `bound`.
template <class R = hp>
struct BoundTerms {
  R accumulation{0};      // (a): the parts' dots in the accumulator
  R storage_rounding{0};  // (b): each part's result rounded to T
  R reduction{0};         // (d): the cross-part sum in T
  R bias_rounding{0};     // (c): the bias add in T
  R reference{0};         // the reference's rounding in R and the evaluation margin
};

template <class R = hp>
struct ElementBound {
  R bound{0};
  BoundStatus status = BoundStatus::holds;
  BoundTerms<R> terms;
};

namespace detail {
template <class R>
R max_of(const R& a, const R& b) {
  return a < b ? b : a;
}
}  // namespace detail

// The bound for one element. `parts`: the element's per-part terms in rank order (dot.hpp);
// `bias`: the bias added to it, or nullptr; `operands`: Operands::unit for plain sums (db).
// @throws std::domain_error (gamma) when a part is too long for the accumulator.
template <class R = hp>
ElementBound<R> element_bound(std::span<const PartTerms<R>> parts, const R* bias,
                              const Arithmetic& arith, Operands operands = Operands::general) {
  using std::abs;
  using std::isfinite;
  ElementBound<R> out;
  const Format& st = arith.storage;
  const Format& ac = arith.accumulate;

  // Operands: non-finite ⇒ compare classes, not magnitudes.
  bool finite = bias == nullptr || isfinite(*bias);
  for (const auto& pt : parts) finite = finite && isfinite(pt.partial) && isfinite(pt.abs_sum);
  if (!finite) {
    out.bound = std::numeric_limits<R>::infinity();
    out.status = BoundStatus::nonfinite_input;
    return out;
  }

  // Reference term and margin. The reference's partials and Σ|ab| carry R roundings: each
  // product passes through ≤ k + p roundings (product, sums in the part, sum of parts, bias), so
  // |ŝ − s| ≤ g·(Σ a_r + |b|) and â_r ≥ a_r·(1 − g) with g = gamma_{k+p+1}(u_R) (Higham (3.4)).
  // The model below is nondecreasing in a_r, |s_r|, |s + b|; it is evaluated at inputs raised by
  // 2g (≥ the true ones, Lemma 3.3), and the result is raised by gamma_m(u_R) for the m ≤
  // 24·(p+1) roundings of the evaluation itself and of |computed − reference| (sums and products
  // of nonnegative numbers only, so each contributes a factor ≤ 1 + u_R).
  // Terms from the fast path (contraction/fast_contraction.hpp) are covered by the same g: their
  // GEMMs and integer sums are exact, and each product then passes through at most
  // rho ≤ k_r − 1 roundings in R inside its part (partial and abs_sum alike), as here.
  const R u_r = unit_roundoff_of<R>();
  std::size_t k = 0;
  R abs_total(0);
  R s(0);
  for (const auto& pt : parts) {
    k += pt.length;
    abs_total += pt.abs_sum;
    s += pt.partial;
  }
  const R abs_bias = bias != nullptr ? R(abs(*bias)) : R(0);
  const R g = gamma<R>(k + parts.size() + 1, u_r);
  const R raise = 2 * g;

  const R u_a = unit_roundoff<R>(ac), eta_a = smallest_subnormal<R>(ac);
  const R u_t = unit_roundoff<R>(st), eta_t = smallest_subnormal<R>(st);
  const R u_t1 = u_t / (1 + u_t);  // one rounding's relative error bound (Jeannerod–Rump)
  const bool same = st == ac;
  const bool exact_products = operands == Operands::unit || 2 * st.precision <= ac.precision;
  const R omega_a = overflow_threshold<R>(ac), omega_t = overflow_threshold<R>(st);

  R sum_e(0);         // Σ e_r
  R sum_mag(0);       // Σ (|s_r| + e_r): bound on Σ |t_r|
  std::size_t q = 0;  // non-empty parts
  bool may_overflow = false;
  for (const auto& pt : parts) {
    if (pt.length == 0) continue;
    ++q;
    const R a_r = pt.abs_sum * (1 + raise);
    const R s_r = abs(pt.partial) + raise * pt.abs_sum;
    const std::size_t n = exact_products ? pt.length - 1 : pt.length;
    const R underflow = operands == Operands::unit
                            ? R(0)
                            : R(pt.length) * eta_a / 2 * (1 + gamma<R>(pt.length - 1, u_a));
    const R e_acc = gamma<R>(n, u_a) * a_r + underflow;
    const R e_round = same ? R(0) : detail::max_of<R>(u_t1 * (s_r + e_acc), eta_t / 2);
    out.terms.accumulation += e_acc;
    out.terms.storage_rounding += e_round;
    sum_e += e_acc + e_round;
    sum_mag += s_r + e_acc + e_round;
    // Every accumulator value (a computed sum over a subset of the part) is at most
    // (a_r + k_r·eta_A/2)·(1 + gamma_{k_r}(u_A)).
    if ((a_r + R(pt.length) * eta_a / 2) * (1 + gamma<R>(pt.length, u_a)) >= omega_a) {
      may_overflow = true;
    }
  }
  const R reduction = q >= 2 ? R(gamma<R>(q - 1, u_t) * sum_mag) : R(0);
  out.terms.reduction = reduction;
  const R e = sum_e + reduction;
  // Every value in the cross-part sum is at most Σ|t_r|·(1 + gamma_{q−1}(u_T)).
  R largest_t = sum_mag + reduction;
  if (bias != nullptr) {
    const R sb = abs(s + *bias) + raise * (abs_total + abs_bias);
    out.terms.bias_rounding = u_t1 * (sb + e);
    largest_t = detail::max_of<R>(largest_t, sb + e);
  }
  if (largest_t >= omega_t) may_overflow = true;

  const R model = e + out.terms.bias_rounding;
  const R reference = g * (abs_total + abs_bias);
  const R margin = gamma<R>(24 * (parts.size() + 1), u_r);
  out.bound = (model + reference) * (1 + margin);
  out.terms.reference = out.bound - model;
  out.status = may_overflow ? BoundStatus::may_overflow : BoundStatus::holds;
  return out;
}

template <class R = hp>
struct Bounds {
  Tensor<R> bound;                  // shape of the contraction's value
  std::vector<BoundStatus> status;  // one per element
};

// The bound of every element of a reference contraction (linear.hpp) under `arith`.
template <class R = hp>
Bounds<R> bounds(const Contraction<R>& c, const Arithmetic& arith) {
  Bounds<R> out{Tensor<R>(c.value.shape()), std::vector<BoundStatus>(c.value.size())};
  for (std::size_t e = 0; e < c.value.size(); ++e) {
    const auto parts = c.parts_of(e);
    const auto b = element_bound<R>(parts, c.bias_of(e), arith, c.operands);
    out.bound[e] = b.bound;
    out.status[e] = b.status;
  }
  return out;
}

// ---------------------------------------------------------------- the verdict

template <class R = hp>
struct ElementVerdict {
  bool pass = false;
  R error{0};  // |computed − reference| (NaN/inf when either is non-finite)
  R ratio{0};  // error / bound: pass needs ≤ 1 (0/0 = 0; x/0 = inf)
};

// One element: `computed` (in T) against the reference value and its bound.
//   finite reference, finite computed        pass iff |computed − reference| ≤ bound
//   finite reference, non-finite computed    pass iff status is may_overflow
//   non-finite reference (nonfinite_input)   pass iff the same class: NaN for NaN, the same
//                                            infinity for an infinity
template <class R = hp, StorageFloat T>
ElementVerdict<R> judge(T computed, const R& reference, const ElementBound<R>& b) {
  using std::abs;
  using std::isfinite;
  using std::isnan;
  ElementVerdict<R> v;
  const R c = to_hp<R>(computed);
  v.error = abs(c - reference);
  if (!isfinite(reference)) {
    v.pass = isnan(reference) ? isnan(c) : c == reference;
    v.ratio = v.pass ? R(0) : std::numeric_limits<R>::infinity();
    return v;
  }
  if (!isfinite(c)) {
    v.pass = b.status == BoundStatus::may_overflow;
    v.ratio = v.pass ? R(0) : std::numeric_limits<R>::infinity();
    return v;
  }
  v.ratio = v.error == 0   ? R(0)
            : b.bound == 0 ? std::numeric_limits<R>::infinity()
                           : R(v.error / b.bound);
  v.pass = v.error <= b.bound;
  return v;
}

}  // namespace shardcheck::reference
