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
//   (f) BiasPlacement::fused, instead of (c): the bias is one more term of ONE part's
//        accumulation in A, and that part's sum (products and bias) is rounded once to T
//        (cuBLASLt's bias epilogue; vLLM's RowParallelLinear hands the bias to rank 0's matmul
//        only). The bias is a T value, exact in A. In a summation tree of k_j + 1 terms every
//        term passes through at most k_j additions, so for the part j holding the bias
//          e_A,j = gamma_{n+1}(u_A)·(a_j + |b|) + [k_j·eta_A/2·(1 + gamma_{k_j}(u_A))]
//        (n as in (a); the bias itself only needs gamma_{k_j} ≤ gamma_{n+1}; Higham (3.4) with
//        the bias as the term b·1), rounded by (b) with |s_j + b| for |s_r|; an empty part j
//        holding the bias computes b exactly (e_j = 0, |t_j| = |b|) and is one more part in (d).
//        Then (d) over the parts, and no (c). Which part holds the bias is the kernel's choice
//        (any one), so the bound is the largest over j of
//          E(j) = Σ_{r≠j} e_r + e_j^b + gamma_{q_j−1}(u_T)·(Σ_{r≠j} (|s_r| + e_r) + |t_j|^b),
//        q_j the non-empty parts with j counted. Neither (c) nor (f) contains the other: (f)
//        lacks (c)'s u_T·|s| (the product's own rounding before the bias) and has
//        gamma·|b| more (the bias inside the accumulation); BiasPlacement::either takes the
//        larger of the two, element by element.
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
#include <exception>
#include <span>
#include <stdexcept>
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

// Where the implementation adds y's bias: (c), (f) above, or either (the larger bound).
enum class BiasPlacement : unsigned char { after_sum, fused, either };

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

// What element_bound takes from the parts' lengths and the formats alone: the same for every
// element of a contraction, so bounds() computes it once. Each value is the very expression
// element_bound evaluates (same operations, same order), so hoisting changes no bit.
template <class R = hp>
struct BoundConstants {
  struct Part {
    R gamma_acc{0};   // gamma_n(u_A), n = k_r − 1 with exact products, else k_r
    R underflow{0};   // k_r·eta_A/2·(1 + gamma_{k_r−1}(u_A)), 0 for Operands::unit
    R half_eta_k{0};  // k_r·eta_A/2
    R growth{0};      // 1 + gamma_{k_r}(u_A)
    // (f), the part holding the bias: gamma_{n+1}(u_A), k_r·eta_A/2·(1 + gamma_{k_r}(u_A)) (0
    // for Operands::unit) and 1 + gamma_{k_r+1}(u_A)
    R gamma_acc_bias{0}, underflow_bias{0}, growth_bias{0};
  };
  std::vector<Part> parts;  // one per part (zeros for empty parts)
  R u_r{0}, g{0}, raise{0}, u_t1{0}, half_eta_t{0}, omega_a{0}, omega_t{0};
  R reduction_gamma{0};       // gamma_{q−1}(u_T) for q ≥ 2 non-empty parts, else 0
  R reduction_gamma_plus{0};  // gamma_q(u_T) for q ≥ 1: (f) with the bias in an empty part
  R margin{0};
  std::size_t q = 0;  // non-empty parts
  bool same = false;
  std::exception_ptr error;       // gamma's domain_error: thrown for the first finite element
  std::exception_ptr bias_error;  // the same for (f)'s constants: thrown only under (f)
};

// The constants of elements whose parts have `parts`' lengths (their values are not read).
template <class R = hp>
BoundConstants<R> bound_constants(std::span<const PartTerms<R>> parts, const Arithmetic& arith,
                                  Operands operands = Operands::general) {
  BoundConstants<R> c;
  const Format& st = arith.storage;
  const Format& ac = arith.accumulate;
  c.parts.resize(parts.size());
  try {
    c.u_r = unit_roundoff_of<R>();
    std::size_t k = 0;
    for (const auto& pt : parts) k += pt.length;
    c.g = gamma<R>(k + parts.size() + 1, c.u_r);
    c.raise = 2 * c.g;
    const R u_a = unit_roundoff<R>(ac), eta_a = smallest_subnormal<R>(ac);
    const R u_t = unit_roundoff<R>(st), eta_t = smallest_subnormal<R>(st);
    c.u_t1 = u_t / (1 + u_t);  // one rounding's relative error bound (Jeannerod–Rump)
    c.half_eta_t = eta_t / 2;
    c.same = st == ac;
    const bool exact_products = operands == Operands::unit || 2 * st.precision <= ac.precision;
    c.omega_a = overflow_threshold<R>(ac);
    c.omega_t = overflow_threshold<R>(st);
    for (std::size_t r = 0; r < parts.size(); ++r) {
      const std::size_t len = parts[r].length;
      if (len == 0) continue;
      ++c.q;
      auto& cp = c.parts[r];
      const std::size_t n = exact_products ? len - 1 : len;
      cp.underflow =
          operands == Operands::unit ? R(0) : R(len) * eta_a / 2 * (1 + gamma<R>(len - 1, u_a));
      cp.gamma_acc = gamma<R>(n, u_a);
      cp.half_eta_k = R(len) * eta_a / 2;
      cp.growth = 1 + gamma<R>(len, u_a);
    }
    if (c.q >= 2) c.reduction_gamma = gamma<R>(c.q - 1, u_t);
    c.margin = gamma<R>(24 * (parts.size() + 1), c.u_r);
  } catch (const std::domain_error&) {
    c.error = std::current_exception();
    return c;
  }
  try {  // (f): one more term in the part holding the bias
    const R u_a = unit_roundoff<R>(ac), eta_a = smallest_subnormal<R>(ac);
    const bool exact_products = operands == Operands::unit || 2 * st.precision <= ac.precision;
    for (std::size_t r = 0; r < parts.size(); ++r) {
      const std::size_t len = parts[r].length;
      if (len == 0) continue;
      auto& cp = c.parts[r];
      cp.gamma_acc_bias = gamma<R>((exact_products ? len - 1 : len) + 1, u_a);
      cp.underflow_bias =
          operands == Operands::unit ? R(0) : R(len) * eta_a / 2 * (1 + gamma<R>(len, u_a));
      cp.growth_bias = 1 + gamma<R>(len + 1, u_a);
    }
    if (c.q >= 1) c.reduction_gamma_plus = gamma<R>(c.q, unit_roundoff<R>(st));
  } catch (const std::domain_error&) {
    c.bias_error = std::current_exception();
  }
  return c;
}

namespace detail {
// Part r's error e_r and magnitude bound |s_r| + e_r under (a)–(b), with the bias `b` in its
// accumulation when `b` is given ((f)); the model's inputs raised by c.raise, as element_bound.
template <class R>
struct PartError {
  R accumulation{0}, rounding{0}, magnitude{0};
  bool may_overflow = false;
};
template <class R>
PartError<R> part_error(const BoundConstants<R>& c, std::size_t r, const PartTerms<R>& pt,
                        const R* b) {
  using std::abs;
  PartError<R> o;
  const auto& cp = c.parts[r];
  const R abs_b = b != nullptr ? R(abs(*b)) : R(0);
  if (pt.length == 0) {  // b alone (f): exact in A and in T
    o.magnitude = abs_b;
    return o;
  }
  const R a_r = pt.abs_sum * (1 + c.raise);
  const R s_r =
      abs(b != nullptr ? R(pt.partial + *b) : pt.partial) + c.raise * (pt.abs_sum + abs_b);
  o.accumulation = b != nullptr ? R(cp.gamma_acc_bias * (a_r + abs_b) + cp.underflow_bias)
                                : R(cp.gamma_acc * a_r + cp.underflow);
  o.rounding = c.same ? R(0) : max_of<R>(c.u_t1 * (s_r + o.accumulation), c.half_eta_t);
  o.magnitude = s_r + o.accumulation + o.rounding;
  const R growth = b != nullptr ? cp.growth_bias : cp.growth;
  o.may_overflow = (a_r + abs_b + cp.half_eta_k) * growth >= c.omega_a;
  return o;
}
}  // namespace detail

// (f): the largest over the parts j of E(j) (the header), with its terms (bias_rounding 0).
// Sums of nonnegative numbers only, a few roundings per part: within element_bound's margin.
template <class R>
struct FusedBiasModel {
  R model{0};
  BoundTerms<R> terms;
};
template <class R>
FusedBiasModel<R> fused_bias_model(const BoundConstants<R>& c, std::span<const PartTerms<R>> parts,
                                   const R& bias, bool& may_overflow) {
  FusedBiasModel<R> best;
  bool first = true;
  for (std::size_t j = 0; j < parts.size(); ++j) {
    BoundTerms<R> t;
    R mag(0);
    for (std::size_t r = 0; r < parts.size(); ++r) {
      if (r != j && parts[r].length == 0) continue;
      const auto pe = detail::part_error<R>(c, r, parts[r], r == j ? &bias : nullptr);
      t.accumulation += pe.accumulation;
      t.storage_rounding += pe.rounding;
      mag += pe.magnitude;
      may_overflow = may_overflow || pe.may_overflow;
    }
    const R g = parts[j].length == 0 ? c.reduction_gamma_plus : c.reduction_gamma;
    t.reduction = g * mag;
    if (mag + t.reduction >= c.omega_t) may_overflow = true;
    const R model = t.accumulation + t.storage_rounding + t.reduction;
    if (first || best.model < model) {
      best.model = model;
      best.terms = t;
      first = false;
    }
  }
  return best;
}

// The bound for one element whose parts have the lengths `c` was computed for. `parts`: the
// element's per-part terms in rank order (dot.hpp); `bias`: the bias added to it, or nullptr.
// @throws std::domain_error (gamma) when a part is too long for the accumulator.
template <class R = hp>
ElementBound<R> element_bound(const BoundConstants<R>& c, std::span<const PartTerms<R>> parts,
                              const R* bias, BiasPlacement placement = BiasPlacement::after_sum) {
  using std::abs;
  using std::isfinite;
  ElementBound<R> out;

  // Operands: non-finite ⇒ compare classes, not magnitudes.
  bool finite = bias == nullptr || isfinite(*bias);
  for (const auto& pt : parts) finite = finite && isfinite(pt.partial) && isfinite(pt.abs_sum);
  if (!finite) {
    out.bound = std::numeric_limits<R>::infinity();
    out.status = BoundStatus::nonfinite_input;
    return out;
  }
  if (c.error) std::rethrow_exception(c.error);

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
  R abs_total(0);
  R s(0);
  for (const auto& pt : parts) {
    abs_total += pt.abs_sum;
    s += pt.partial;
  }
  const R abs_bias = bias != nullptr ? R(abs(*bias)) : R(0);
  const R& raise = c.raise;

  R sum_e(0);    // Σ e_r
  R sum_mag(0);  // Σ (|s_r| + e_r): bound on Σ |t_r|
  bool may_overflow = false;
  for (std::size_t r = 0; r < parts.size(); ++r) {
    const auto& pt = parts[r];
    if (pt.length == 0) continue;
    const auto& cp = c.parts[r];
    const R a_r = pt.abs_sum * (1 + raise);
    const R s_r = abs(pt.partial) + raise * pt.abs_sum;
    const R e_acc = cp.gamma_acc * a_r + cp.underflow;
    const R e_round = c.same ? R(0) : detail::max_of<R>(c.u_t1 * (s_r + e_acc), c.half_eta_t);
    out.terms.accumulation += e_acc;
    out.terms.storage_rounding += e_round;
    sum_e += e_acc + e_round;
    sum_mag += s_r + e_acc + e_round;
    // Every accumulator value (a computed sum over a subset of the part) is at most
    // (a_r + k_r·eta_A/2)·(1 + gamma_{k_r}(u_A)).
    if ((a_r + cp.half_eta_k) * cp.growth >= c.omega_a) may_overflow = true;
  }
  const R reduction = c.q >= 2 ? R(c.reduction_gamma * sum_mag) : R(0);
  out.terms.reduction = reduction;
  const R e = sum_e + reduction;
  // Every value in the cross-part sum is at most Σ|t_r|·(1 + gamma_{q−1}(u_T)).
  R largest_t = sum_mag + reduction;
  if (bias != nullptr) {
    const R sb = abs(s + *bias) + raise * (abs_total + abs_bias);
    out.terms.bias_rounding = c.u_t1 * (sb + e);
    largest_t = detail::max_of<R>(largest_t, sb + e);
  }
  if (largest_t >= c.omega_t) may_overflow = true;

  R model = e + out.terms.bias_rounding;
  if (bias != nullptr && placement != BiasPlacement::after_sum) {
    if (c.bias_error) std::rethrow_exception(c.bias_error);
    const auto fused = fused_bias_model<R>(c, parts, *bias, may_overflow);
    if (placement == BiasPlacement::fused || model < fused.model) {
      model = fused.model;
      out.terms = fused.terms;
    }
  }
  const R reference = c.g * (abs_total + abs_bias);
  out.bound = (model + reference) * (1 + c.margin);
  out.terms.reference = out.bound - model;
  out.status = may_overflow ? BoundStatus::may_overflow : BoundStatus::holds;
  return out;
}

// The bound for one element. `parts`: the element's per-part terms in rank order (dot.hpp);
// `bias`: the bias added to it, or nullptr; `operands`: Operands::unit for plain sums (db).
// @throws std::domain_error (gamma) when a part is too long for the accumulator.
template <class R = hp>
ElementBound<R> element_bound(std::span<const PartTerms<R>> parts, const R* bias,
                              const Arithmetic& arith, Operands operands = Operands::general,
                              BiasPlacement placement = BiasPlacement::after_sum) {
  return element_bound<R>(bound_constants<R>(parts, arith, operands), parts, bias, placement);
}

template <class R = hp>
struct Bounds {
  Tensor<R> bound;                  // shape of the contraction's value
  std::vector<BoundStatus> status;  // one per element
};

// The bound of every element of a reference contraction (linear.hpp) under `arith`. Elements
// are independent, so large contractions share them among OpenMP threads (static schedule; the
// result is the same for any thread count); an exception of an element (gamma's domain_error)
// is rethrown after the loop, the lowest element's.
template <class R = hp>
Bounds<R> bounds(const Contraction<R>& c, const Arithmetic& arith,
                 BiasPlacement placement = BiasPlacement::after_sum) {
  const std::size_t n = c.value.size(), p = c.parts();
  Bounds<R> out{Tensor<R>(c.value.shape()), std::vector<BoundStatus>(n)};
  std::exception_ptr error;
  std::size_t first_error = n;
  constexpr std::size_t parallel_elements = 4096;
  const BoundConstants<R> constants =
      n == 0 ? BoundConstants<R>{} : bound_constants<R>(c.parts_of(0), arith, c.operands);
#pragma omp parallel if (n >= parallel_elements)
  {
    std::vector<PartTerms<R>> parts(p);
#pragma omp for schedule(static)
    for (std::ptrdiff_t se = 0; se < static_cast<std::ptrdiff_t>(n); ++se) {
      const auto e = static_cast<std::size_t>(se);
      try {
        for (std::size_t r = 0; r < p; ++r) parts[r] = c.terms[r * n + e];
        const auto b = element_bound<R>(constants, parts, c.bias_of(e), placement);
        out.bound[e] = b.bound;
        out.status[e] = b.status;
      } catch (...) {
#pragma omp critical(shardcheck_reference_bounds)
        if (e < first_error) {
          first_error = e;
          error = std::current_exception();
        }
      }
    }
  }
  if (error) std::rethrow_exception(error);
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
