// The a-priori elementwise error bound of LayerNorm and RMSNorm, forward and backward, for an
// implementation that follows lib/ops/norm/norm.hpp's arithmetic contract (every step one IEEE
// operation in the accumulator A, y/dx rounded once to T, the parameter gradients rounded to T
// per rank and summed in T over the ranks). The definition in plain loops is norm_definition.hpp;
// norm.hpp includes both. docs/norm.md has the derivation in prose; each rule below names its
// step, and the propagation through the norm is one function per step of the op:
//   normalize_row        mean, d = x − mean, var (or ms), rstd = 1/sqrt(· + eps), xhat
//   scale_and_shift_row  y = xhat·gamma (+ beta), rounded to T
//   input_gradient_row   g = dy·gamma, c1, c2, dx = ((g − c1) − xhat·c2)·rstd, rounded to T
//   parameter_gradients  dgamma, dbeta: per part a sum over its tokens in A rounded to T, the
//                        parts summed in T (the all_reduce)
// propagate_norm_forward and propagate_norm_backward chain them. They carry the values in R too
// (the bound needs them): the same operations in the same order as norm_definition.hpp.
//
// Method: forward error propagation with rigorous per-operation bounds (Higham, ASNA 2nd ed.,
// §2.2 and §3.1; the "running error analysis" of §3.3 done a priori, from the exact operands).
// Every intermediate quantity q is carried as Tracked{v, e, r}:
//   v  the value computed in R (the reference's value),
//   e  a bound on |q̂ − q|, q̂ the implementation's value, q the exact value,
//   r  a bound on |v − q| (R's own roundings; ~2^-113 relative, kept so nothing assumes the
//      reference is exact).
// An element's bound is e + r (|q̂ − v| ≤ |q̂ − q| + |q − v|), raised by gamma_{64}(u_R) for
// the bound's own evaluation in R (sums and products of nonnegative numbers).
// Rules, with u, eta the unit roundoff and smallest subnormal of the format the step rounds to
// (IEEE round to nearest: |fl(z) − z| ≤ u·|z| + eta/2, and additions are exact when the result
// is subnormal, Hauser 1996), and M_a = |a.v| + a.r ≥ |a| (the exact magnitude):
//   a ± b      e = e_a + e_b + u·(|v| + r + e_a + e_b)
//   a · b      p = M_a·e_b + M_b·e_a + e_a·e_b;          e = p + u·(|v| + r + p) + eta/2
//   a / b      m_b = |b.v| − b.r − e_b > 0 (else the bound is +inf: b̂ may be 0)
//              p = (M_b·e_a + M_a·e_b) / ((|b.v| − b.r)·m_b); e = p + u·(|v| + r + p) + eta/2
//   sqrt(a)    a ≥ 0 exactly; p = min(e_a / sqrt(|a.v| − a.r), sqrt(e_a))
//              (|√â − √a| = |â − a|/(√â + √a) ≤ e_a/√a, and ≤ √|â − a| always);
//              e = p + u·(|v| + r + p) + eta/2
//   Σ_k a_k    n terms, any order: e = Σ e_k + gamma_{n−1}(u)·Σ (M_k + e_k)   (Higham (3.4);
//              no underflow term: additions are exact when subnormal)
//   round to T e = e_a + u_T·(|v| + r + e_a) + eta_T/2   (nothing when T = A)
// and r follows the same rules with u_R, eta_R = 0 (R's exponent range is far wider than every
// value here). The rules are sound whatever the magnitudes, including catastrophic cancellation
// in x − mean and in the backward's g − c1 − xhat·c2: the bound then grows as the condition
// number does, which is the point.
// fma: an implementation may contract a·b + c; one rounding of the exact a·b + c is within the
// bound of the two-rounding evaluation (each rule's rounding term is ≥ u·|result|).
// xhat (layer_norm) in one of two evaluation orders (NormXhat): lib/ops/norm's (x − mean)·rstd,
// or PyTorch's CPU kernel's fma(x, rstd, −rstd·mean), bounded as x·rstd − fl(rstd·mean) with two
// roundings. The two differ most where x − mean cancels: at hidden = 1, xhat is exactly 0 and
// the first order gives 0 exactly, the second an error of about u·rstd·|x| (measured: torch
// 1.13's float64 y 160× and dgamma 1.3e17× the first order's bound).
// The variance (layer_norm) in one of two orders (NormVariance), a second axis beside xhat's:
//   two_pass  var = Σ (x − mean)²/n, the definition's order (lib/ops/norm);
//   one_pass  var = fl(fl(Σ x²)/n) − fl(mean·mean), Σx (for the mean) and Σx² each accumulated
//             in A in any order, the subtraction one rounding (an fma(−mean, mean, ms) is within
//             it), the result optionally clamped, max(var, 0), as most such kernels do.
// one_pass is bounded by the rules above applied to its own steps: ms = Σx²/n (the Σ and divide
// rules, each term x·x a product), mean² (the product rule with mean's error), then the
// subtraction rule. The catastrophic cancellation of ms − mean² is what the rules were made for:
// e_var ≈ (n + 2)·u·(ms + mean²), so relative to var the bound grows as (ms + mean²)/var, the
// condition number of the one-pass formula (Higham, ASNA 2nd ed., §1.9 and Problem 1.10; Chan,
// Golub, LeVeque, "Algorithms for computing the sample variance", Amer. Statist. 37(3), 1983).
// The clamp adds nothing: the exact var is ≥ 0, so |max(v̂, 0) − var| ≤ |v̂ − var|. Without the
// clamp v̂ + eps may round below 0 and sqrt gives NaN: the rules hold for every result that is
// not NaN (the sqrt rule needs â ≥ 0, which a finite rstd implies), and a NaN where the reference
// is finite fails the verdict's NaN rule, as it should (a kernel that can return NaN for finite
// input is the reason the clamp exists). The propagation carries var's value v and R-error r
// from the two-pass evaluation (the definition's value: every later v stays the definition's)
// and the implementation's error e from the one-pass steps: e bounds |v̂ − var| whatever v is,
// since every rule reads only M = |v| + r ≥ |exact| from the operands.
//   welford   the mean and M2 = Σ(x − mean)² of Welford states merged in any binary tree the
//             launch shape decides (PyTorch's CPU RowwiseMoments and CUDA WelfordOps, Apex's
//             cuWelfordOnlineSum/cuChanOnlineSum), var = M2/n: welford_errors below.
// Underflow is covered by the eta/2 terms. Overflow in A is excluded by the suite's value ranges
// (docs/norm.md);
// a final rounding to T that overflows gives ±inf, which properties/engine/tensor_check accepts
// exactly when |exact| + bound reaches T's overflow threshold.
#pragma once

#include "ops/norm/norm_config.hpp"
#include "reference/bounds.hpp"
#include "reference/norm/norm_definition.hpp"
#include "reference/precision.hpp"

#include <cmath>
#include <limits>
#include <span>
#include <vector>

namespace shardcheck::reference {

template <class R = hp>
struct Tracked {
  R v{0};  // the value in R
  R e{0};  // |implementation − exact| ≤ e
  R r{0};  // |v − exact| ≤ r
  R magnitude() const {
    using std::abs;
    return abs(v) + r;
  }
  R bound() const { return e + r; }
};

// The values of one arithmetic's T (storage) and A (accumulator) a step rounds to: the
// Propagator's, and the model bound's own rules' (reference/model/model_bound.hpp).
template <class R>
struct Units {
  R u_a, eta_a, u_t, eta_t, u_r;
  bool round_t;
  explicit Units(const Arithmetic& ar)
      : u_a(unit_roundoff<R>(ar.accumulate)),
        eta_a(smallest_subnormal<R>(ar.accumulate)),
        u_t(unit_roundoff<R>(ar.storage)),
        eta_t(smallest_subnormal<R>(ar.storage)),
        u_r(unit_roundoff_of<R>()),
        round_t(!(ar.storage == ar.accumulate)) {}
  // One rounding to T of a value of magnitude ≤ m (nothing when T = A).
  R to_t(const R& m) const { return round_t ? R(u_t * m + eta_t / 2) : R(0); }
};

// The propagation rules above for one arithmetic (storage T, accumulator A).
template <class R = hp>
class Propagator {
 public:
  explicit Propagator(const Arithmetic& arith) : units_(arith) {}

  static Tracked<R> exact(const R& v) { return {v, R(0), R(0)}; }

  Tracked<R> add(const Tracked<R>& a, const Tracked<R>& b) const { return addsub(a, b, a.v + b.v); }
  Tracked<R> sub(const Tracked<R>& a, const Tracked<R>& b) const { return addsub(a, b, a.v - b.v); }

  Tracked<R> mul(const Tracked<R>& a, const Tracked<R>& b) const {
    using std::abs;
    Tracked<R> o;
    o.v = a.v * b.v;
    const R pr = times(abs(a.v), b.r) + times(abs(b.v), a.r) + times(a.r, b.r);
    o.r = pr + 2 * units_.u_r * abs(o.v);
    const R p = times(a.magnitude(), b.e) + times(b.magnitude(), a.e) + times(a.e, b.e);
    o.e = p + units_.u_a * (abs(o.v) + o.r + p) + units_.eta_a / 2;
    return o;
  }

  Tracked<R> div(const Tracked<R>& a, const Tracked<R>& b) const {
    using std::abs;
    Tracked<R> o;
    o.v = a.v / b.v;
    const R bl = abs(b.v) - b.r;  // ≤ |b|
    if (!(bl > 0)) {
      // R's own value of the divisor is too uncertain to exclude 0 (an ill-conditioned row:
      // var far below u_R·mean²): the reference cannot decide this element, so neither its
      // value nor the implementation's is bounded. Both bounds become +inf (accepted, and
      // counted by the suite's statistics as ratio 0); docs/norm.md says how rare this is.
      o.r = std::numeric_limits<R>::infinity();
      o.e = std::numeric_limits<R>::infinity();
      return o;
    }
    o.r = (abs(b.v) * a.r + abs(a.v) * b.r) / (abs(b.v) * bl) + 2 * units_.u_r * abs(o.v);
    const R mb = bl - b.e;  // ≤ |b̂|
    if (!(mb > 0)) {
      o.e = std::numeric_limits<R>::infinity();
      return o;
    }
    const R p = (times(b.magnitude(), a.e) + times(a.magnitude(), b.e)) / (bl * mb);
    // Division by an exact power of two (the hidden size 1, 2, 4, ...) only rounds when the
    // quotient is subnormal.
    const bool exact_pow2 = b.e == 0 && b.r == 0 && is_pow2(abs(b.v));
    o.e = p + (exact_pow2 ? R(0) : R(units_.u_a * (abs(o.v) + o.r + p))) + units_.eta_a / 2;
    return o;
  }

  Tracked<R> sqrt(const Tracked<R>& a) const {
    using std::sqrt;
    Tracked<R> o;
    o.v = sqrt(a.v);
    const R lo = a.v - a.r;
    o.r = (lo > 0 ? R(a.r / sqrt(lo)) : R(sqrt(a.r))) + 2 * units_.u_r * o.v;
    const R via_root = lo > 0 ? R(a.e / sqrt(lo)) : std::numeric_limits<R>::infinity();
    const R direct = sqrt(a.e);
    const R p = via_root < direct ? via_root : direct;
    o.e = p + units_.u_a * (o.v + o.r + p) + units_.eta_a / 2;
    return o;
  }

  // Σ terms in A, any order.
  Tracked<R> sum(std::span<const Tracked<R>> terms) const { return sum_in(terms, units_.u_a); }

  // Rounded once from A to T.
  Tracked<R> to_storage(const Tracked<R>& a) const {
    using std::abs;
    if (!units_.round_t) return a;
    Tracked<R> o = a;
    o.e = a.e + units_.u_t * (abs(a.v) + a.r + a.e) + units_.eta_t / 2;
    return o;
  }

  // Σ parts in T (a reduction across ranks, any order); empty parts are exact zeros and do not
  // count (a sum with an exact +0 is exact).
  Tracked<R> sum_in_storage(std::span<const Tracked<R>> parts) const {
    return sum_in(parts, units_.u_t);
  }

  // The bound of a final value: e + r, raised for its evaluation in R.
  R final_bound(const Tracked<R>& a) const { return a.bound() * (1 + gamma<R>(64, units_.u_r)); }

  const Units<R>& units() const { return units_; }

 private:
  // m·e for bounds, with 0·inf = 0: a term whose magnitude is exactly 0 contributes nothing
  // however large the other factor's error bound (an infinite bound means "no bound").
  static R times(const R& m, const R& e) { return m == 0 || e == 0 ? R(0) : R(m * e); }
  static bool is_pow2(const R& v) {
    using std::frexp;
    if (!(v > 0)) return false;
    int ex = 0;
    return frexp(v, &ex) == R(0.5);
  }

  Tracked<R> addsub(const Tracked<R>& a, const Tracked<R>& b, const R& v) const {
    using std::abs;
    Tracked<R> o;
    o.v = v;
    o.r = a.r + b.r + 2 * units_.u_r * abs(v);
    const R p = a.e + b.e;
    o.e = p + units_.u_a * (abs(v) + o.r + p);
    return o;
  }

  Tracked<R> sum_in(std::span<const Tracked<R>> terms, const R& u) const {
    using std::abs;
    Tracked<R> o;
    R mag(0), e(0), r(0), absv(0);
    for (const auto& t : terms) {
      o.v += t.v;
      mag += t.magnitude() + t.e;
      e += t.e;
      r += t.r;
      absv += abs(t.v);
    }
    const std::size_t n = terms.size();
    o.e = e + (n >= 2 ? gamma<R>(n - 1, u) * mag : R(0));
    o.r = r + (n >= 2 ? R(2 * gamma<R>(n - 1, units_.u_r) * absv) : R(0));
    return o;
  }

  Units<R> units_;
};

// A tensor of tracked values, row-major.
template <class R = hp>
struct TrackedTensor {
  Shape shape;
  std::vector<Tracked<R>> data;
  TrackedTensor() = default;
  explicit TrackedTensor(Shape s) : shape(std::move(s)), data(numel(shape)) {}
  static TrackedTensor exact(const Tensor<R>& t) {
    TrackedTensor o(t.shape());
    for (std::size_t i = 0; i < t.size(); ++i) o.data[i] = Propagator<R>::exact(t[i]);
    return o;
  }
  Tracked<R>& operator()(std::size_t i, std::size_t j) { return data[i * shape[1] + j]; }
  const Tracked<R>& operator()(std::size_t i, std::size_t j) const {
    return data[i * shape[1] + j];
  }
  bool empty() const { return data.empty(); }
  Tensor<R> values() const {
    std::vector<R> v;
    for (const auto& t : data) v.push_back(t.v);
    return Tensor<R>(shape, std::move(v));
  }
  Tensor<R> bounds(const Propagator<R>& p) const {
    std::vector<R> v;
    for (const auto& t : data) v.push_back(p.final_bound(t));
    return Tensor<R>(shape, std::move(v));
  }
  // The reference's own error bound r per element (for the finite-difference checks).
  Tensor<R> reference_errors() const {
    std::vector<R> v;
    for (const auto& t : data) v.push_back(t.r);
    return Tensor<R>(shape, std::move(v));
  }
};

template <class R = hp>
struct NormForwardTracked {
  TrackedTensor<R> y;            // [tokens, hidden], rounded to T
  TrackedTensor<R> xhat;         // [tokens, hidden], in A
  std::vector<Tracked<R>> rstd;  // [tokens], in A
  std::vector<Tracked<R>> mean;  // [tokens], in A (exact 0 for rms_norm)
};

template <class R = hp>
struct NormBackwardTracked {
  TrackedTensor<R> dx;      // [tokens, hidden], rounded to T
  TrackedTensor<R> dgamma;  // [hidden]: per-part partial sums rounded to T, summed in T
  TrackedTensor<R> dbeta;   // [hidden], empty without beta
};

// ---- the steps ----

// Token t's statistics and normalized values: layer_norm mean = Σx/n, d = x − mean,
// var = Σd²/n; rms_norm d = x, ms = Σx²/n; rstd = 1/sqrt(var (or ms) + eps); xhat = d·rstd, all
// in A. Writes out.xhat's row t and returns rstd.
// How an implementation forms layer_norm's xhat (rms_norm's is x·rstd in both):
//   difference  (x − mean)·rstd (lib/ops/norm: d = x − mean, then d·rstd)
//   fused       x·rstd − rstd·mean (PyTorch's CPU LayerNorm: fma(x, rstd, −rstd·mean))
enum class NormXhat { difference, fused };
// How it forms layer_norm's variance (rms_norm's ms = Σx²/n is one pass in both): the header.
enum class NormVariance { two_pass, one_pass, welford };
// How it forms layer_norm's dx (rms_norm's is the centered form in both):
//   centered  ((g − c1) − xhat·c2)·rstd, c1 = Σg/n, c2 = Σg·xhat/n (lib/ops/norm, PyTorch's
//             CUDA kernel, Apex)
//   affine    a·g + b·x + c with a = rstd, ds = Σ g·x, db = Σ g,
//             b = (db·mean − ds)·a·a·a·fl(1/n), c = −b·mean − db·a·fl(1/n), the three terms of
//             dx added in any order (PyTorch's CPU LayerNormBackwardKernelImplInternal). The
//             same value in R; in floating point b·x + c cancels where |x − mean| is far below
//             |x| (a row far from 0, or hidden = 1, where dx is exactly 0 and the affine form
//             leaves about u·rstd·|g|).
// The affine form is bounded by the rules above applied to its own steps; its v and r are the
// centered form's (the definition's value), its e the affine steps'.
enum class NormDx { centered, affine };
// One evaluation order the bound covers: xhat's, the variance's and dx's.
struct NormForm {
  NormXhat xhat = NormXhat::difference;
  NormVariance variance = NormVariance::two_pass;
  NormDx dx = NormDx::centered;
};

// ---- the Welford variance (NormVariance::welford) ----
//
// The contract. Every leaf is one element: the state (1, x, 0). Two states (n_a, m_a, M2_a) and
// (n_b, m_b, M2_b) merge, n = n_a + n_b, in A, in one of these forms (any mix, any tree):
//   mean  delta:    m = m_a + fl(fl(m_b − m_a)·w_b), w_b = fl(n_b/n) or the product a division
//                   (Welford's update m + (x − m)/n; PyTorch's AddMoments and WelfordOps)
//         weighted: m = fl(w_a·m_a) + fl(w_b·m_b), w_a, w_b = fl(n_a/n), fl(n_b/n) (Apex's Chan)
//   M2    Chan:     M2_a + M2_b + c, c the product of δ̂ = fl(m_b − m_a) twice and of n_a, n_b,
//                   1/n as at most 4 more rounded factors (counts exact, weights rounded once):
//                   δ·δ·w_b·n_a (PyTorch), δ·δ·w_a·w_b·n (Apex)
//         Welford:  M2_a + fl(x − m_a)·fl(x − m), m the merged mean, for a singleton b = (1, x, 0)
//   the two or three terms of M2 added in any order; var = M2/n (one division, or a product
//   with fl(1/n)). Underflow: each rounding may add eta/2 (eta A's smallest subnormal).
// The bound is a priori and holds for every tree, every leaf order and every mix of forms.
// Notation: x̂ the row the kernel reads (x within x.e of the reference's x), n its length, u the
// unit roundoff of A, M ≥ max|x̂_i|, D ≥ max x̂ − min x̂, m2 ≥ M2(x̂) = Σ(x̂_i − mean(x̂))², and
// for a merge N of subtrees a, b: μ_a, μ_b their exact means, δ_N = μ_b − μ_a,
// w_N = n_a·n_b/n_N. Chan's identity: M2(x̂) = Σ_N w_N·δ_N² over the n − 1 merges (exact).
// (1) The mean. With e_K ≥ |m̂_K − μ_K|, a merge gives
//       e_N ≤ (n_a/n_N)·e_a + (n_b/n_N)·e_b + ℓ_N,
//     ℓ_N ≤ γ3·w_b·(D + e_a + e_b) + u·(M + ...) in the delta form and γ3·(M + max e) in the
//     weighted one, so ℓ_N ≤ L := (γ3 + u)(1 + γ3)(D + M + 3Ē) + 2·eta whenever every e ≤ Ē.
//     Unrolled, e_N ≤ L·Σ_{K ⊆ N} n_K/n_N over the merges K under N, and Σ n_K (the sum of the
//     leaves' depths) is at most n_N(n_N + 1)/2 − 1 (a chain), so e_N ≤ L·(n_N + 1)/2. With
//     Ē = L·(n + 1)/2 the fixed point is L = ((γ3 + u)(1 + γ3)(D + M) + 2·eta)/(1 − 1.5·(n + 1)·
//     (γ3 + u)(1 + γ3)) (no bound, +inf, when the denominator is not positive).
// (2) One merge's M2 term. Chan form: ĉ = (m̂_b − m̂_a)²·w_N·(1 + θ8), |θ8| ≤ γ8, and
//     |(m̂_b − m̂_a)² − δ²| ≤ 2|δ|(e_a + e_b) + (e_a + e_b)², e_a + e_b ≤ L·(n_N + 2)/2.
//     Welford form (n_b = 1, w_N = n_a/n_N ≥ 1/2): ĉ = (x − m̂_a)(x − m̂)(1 + θ3), exact c =
//     (x − μ_a)(x − μ) with |x − μ| ≤ |δ|, so the product is off by ≤ |δ|(e_a + e) + e_a·e, and
//     |δ| = w_N|δ|·n_N/n_a with e_a + e ≤ L·(2n_N + 1)/2 gives |δ|(e_a + e) ≤ w_N|δ|L(n_N + 3).
//     Both: |ĉ_N − c_N| ≤ (1 + γ8)(w_N|δ_N|·L·(n_N + 3) + 4·w_N·Ē²) + γ8·c_N + 2n·eta.
// (3) Summed over the merges, by Cauchy–Schwarz with Σ w_N·δ_N² = M2:
//       Σ w_N|δ_N|(n_N + 3) ≤ sqrt(m2·S3), S3 = Σ w_N(n_N + 3)² ≤ (n + 11)·n(n − 1)/2,
//     as (n_N + 3)²/n_N ≤ n_N + 10.5 and Σ_N n_a·n_b = n(n − 1)/2 (each pair of leaves meets
//     once); Σ w_N ≤ n(n − 1)/4. So F := Σ|ĉ_N − c_N| ≤ (1 + γ8)(L·sqrt(m2·S3) + Ē²·n(n − 1))
//     + γ8·m2 + 2n²·eta.
// (4) The additions of M2 add the n − 1 terms ĉ_N in some tree (a singleton's M2 is an exact 0,
//     and adding it is exact), so each term passes at most n − 2 roundings (Higham, ASNA 2nd ed.,
//     (3.4) in any order): |M̂2 − M2| ≤ F + γ_{n−2}·(m2 + F). Then var = M2/n with at most two
//     roundings: e_var ≤ (F + γ_{n−2}(m2 + F))·(1 + γ2)/n + γ2·m2/n + eta.
// The bound is first order in n·u times the row's spread (D + M)/sqrt(var): Welford's error grows
// with |mean|/σ, not (mean/σ)² as the one-pass formula's does (Chan, Golub, LeVeque, Amer.
// Statist. 37(3), 1983), but it is a worst case over every tree and form: on unit rows it is
// wider than the two-pass bound (docs/norm.md, "The Welford variance", has the figures).
// The row's own input errors: |m̂ − mean(x)| ≤ Ē + |mean(x̂) − mean(x)| and the second term is
// at most the two-pass rules' e for the mean (exact arithmetic is one of the executions those
// rules cover); likewise for var. normalize_row adds these to the two-pass e's.
template <class R>
struct WelfordErrors {
  R mean{0};      // Ē: |Welford mean − mean(x̂)|
  R variance{0};  // |Welford var − var(x̂)|
};

// welford_errors: token t's row of x, its two-pass var (v, r, e: m2 = n·(v + r + e) ≥ M2(x̂)).
template <class R>
WelfordErrors<R> welford_errors(const TrackedTensor<R>& x, std::size_t t, const Tracked<R>& var,
                                const Units<R>& units) {
  using std::abs;
  using std::sqrt;
  const std::size_t n = x.shape[1];
  if (n < 2) return {};  // one leaf: the state (1, x, 0) is exact
  const R inf = std::numeric_limits<R>::infinity();
  R hi = -inf, lo = inf, big(0);
  for (std::size_t i = 0; i < n; ++i) {
    const Tracked<R>& xi = x(t, i);
    const R slack = xi.r + xi.e;
    hi = std::max(hi, R(xi.v + slack));
    lo = std::min(lo, R(xi.v - slack));
    big = std::max(big, R(abs(xi.v) + slack));
  }
  const R u = units.u_a, eta = units.eta_a, nn(n);
  const R g3 = gamma<R>(3, u), g8 = gamma<R>(8, u), g2 = gamma<R>(2, u);
  const R c = (g3 + u) * (1 + g3);
  const R den = 1 - R(1.5) * (nn + 1) * c;
  if (!(den > 0)) return {inf, inf};
  const R L = (c * (hi - lo + big) + 2 * eta) / den;  // (1)
  const R ebar = L * (nn + 1) / 2;
  const R m2 = nn * (var.v + var.r + var.e);
  const R s3 = (nn + 11) * nn * (nn - 1) / 2;
  const R f = (1 + g8) * (L * sqrt(m2 * s3) + ebar * ebar * nn * (nn - 1)) + g8 * m2 +
              2 * nn * nn * eta;                                         // (2), (3)
  const R em2 = f + (n >= 3 ? R(gamma<R>(n - 2, u) * (m2 + f)) : R(0));  // (4)
  return {ebar, em2 * (1 + g2) / nn + g2 * m2 / nn + eta};
}

template <class R>
Tracked<R> normalize_row(NormKind kind, const TrackedTensor<R>& x, std::size_t t, const R& eps,
                         const Propagator<R>& P, NormForwardTracked<R>& out, NormForm form = {}) {
  const std::size_t n = x.shape[1];
  const auto count = Propagator<R>::exact(R(n));
  std::vector<Tracked<R>> d(n), terms(n);
  Tracked<R> mean = Propagator<R>::exact(R(0));
  if (kind == NormKind::rms_norm) {
    for (std::size_t i = 0; i < n; ++i) d[i] = x(t, i);
  } else {
    for (std::size_t i = 0; i < n; ++i) terms[i] = x(t, i);
    mean = P.div(P.sum(terms), count);
    for (std::size_t i = 0; i < n; ++i) d[i] = P.sub(x(t, i), mean);
  }
  for (std::size_t i = 0; i < n; ++i) terms[i] = P.mul(d[i], d[i]);
  auto var = P.div(P.sum(terms), count);  // ms for rms_norm
  if (form.variance == NormVariance::one_pass && kind != NormKind::rms_norm) {
    // ms − mean², ms = Σx²/n: its error bound, with the two-pass value and R-error kept.
    for (std::size_t i = 0; i < n; ++i) terms[i] = P.mul(x(t, i), x(t, i));
    var.e = P.sub(P.div(P.sum(terms), count), P.mul(mean, mean)).e;
  } else if (form.variance == NormVariance::welford && kind != NormKind::rms_norm) {
    // The merge tree's errors on top of the two-pass e's, which bound what the row's own input
    // errors do to the exact mean and var; d is formed again with the Welford mean.
    const auto w = welford_errors(x, t, var, P.units());
    var.e += w.variance;
    mean.e += w.mean;
    for (std::size_t i = 0; i < n; ++i) d[i] = P.sub(x(t, i), mean);
  }
  out.mean.push_back(mean);
  auto rstd = P.div(Propagator<R>::exact(R(1)), P.sqrt(P.add(var, Propagator<R>::exact(eps))));
  if (form.xhat == NormXhat::fused && kind != NormKind::rms_norm) {
    const auto shift = P.mul(rstd, mean);
    for (std::size_t i = 0; i < n; ++i) out.xhat(t, i) = P.sub(P.mul(x(t, i), rstd), shift);
  } else {
    for (std::size_t i = 0; i < n; ++i) out.xhat(t, i) = P.mul(d[i], rstd);
  }
  return rstd;
}

// Token t's output: y = xhat·gamma (+ beta for layer_norm) in A, rounded once to T.
template <class R>
void scale_and_shift_row(NormKind kind, std::size_t t, const Tensor<R>& gamma,
                         const Tensor<R>& beta, const Propagator<R>& P,
                         NormForwardTracked<R>& out) {
  const std::size_t n = out.xhat.shape[1];
  for (std::size_t i = 0; i < n; ++i) {
    auto v = P.mul(out.xhat(t, i), Propagator<R>::exact(gamma[i]));
    if (kind == NormKind::layer_norm) v = P.add(v, Propagator<R>::exact(beta[i]));
    out.y(t, i) = P.to_storage(v);
  }
}

// Token t's input gradient: g = dy·gamma, c2 = Σ g·xhat/n, c1 = Σ g/n (layer kinds),
// dx = ((g − c1) − xhat·c2)·rstd (rms_norm: (g − xhat·c2)·rstd) in A, rounded once to T.
template <class R>
void input_gradient_row(NormKind kind, std::size_t t, const Tensor<R>& gamma,
                        const TrackedTensor<R>& dy, const NormForwardTracked<R>& fwd,
                        const Propagator<R>& P, TrackedTensor<R>& dx, const TrackedTensor<R>& x,
                        NormForm form = {}) {
  const std::size_t n = dx.shape[1];
  const auto count = Propagator<R>::exact(R(n));
  std::vector<Tracked<R>> g(n), terms(n);
  for (std::size_t i = 0; i < n; ++i) g[i] = P.mul(dy(t, i), Propagator<R>::exact(gamma[i]));
  for (std::size_t i = 0; i < n; ++i) terms[i] = P.mul(g[i], fwd.xhat(t, i));
  const auto c2 = P.div(P.sum(terms), count);
  const auto& rstd = fwd.rstd[t];
  if (kind == NormKind::rms_norm) {
    for (std::size_t i = 0; i < n; ++i) {
      dx(t, i) = P.to_storage(P.mul(P.sub(g[i], P.mul(fwd.xhat(t, i), c2)), rstd));
    }
  } else {
    const auto c1 = P.div(P.sum(std::span<const Tracked<R>>(g)), count);
    for (std::size_t i = 0; i < n; ++i) {
      const auto centered = P.sub(g[i], c1);
      dx(t, i) = P.to_storage(P.mul(P.sub(centered, P.mul(fwd.xhat(t, i), c2)), rstd));
    }
    if (form.dx == NormDx::affine) {
      // a·g + b·x + c (NormDx): its error bound e, the centered form's v and r kept.
      const auto& mean = fwd.mean[t];
      for (std::size_t i = 0; i < n; ++i) terms[i] = P.mul(g[i], x(t, i));
      const auto ds = P.sum(terms);
      const auto db = P.sum(std::span<const Tracked<R>>(g));
      const auto scale = P.div(Propagator<R>::exact(R(1)), count);
      const auto b =
          P.mul(P.mul(P.mul(P.mul(P.sub(P.mul(db, mean), ds), rstd), rstd), rstd), scale);
      // b̂ = b + β enters dx twice, as b̂·x and in c = −b̂·mean − ...: β·(x − mean) plus its part
      // of those roundings, |β|·γ4·(|x| + |mean|). The rules would take |β|·(|x| + |mean|), which
      // a³ (about 3e7 at var = 0, eps = 1e-5) makes useless where x − mean cancels. So b is
      // carried exact through the steps and β added once (docs/norm.md, "PyTorch's CPU dx").
      auto b_exact = b;
      b_exact.e = R(0);
      auto c = P.add(P.mul(b_exact, mean), P.mul(P.mul(db, rstd), scale));
      c.v = -c.v;  // −b·mean − db·a·scale: negation is exact
      using std::abs;
      const R g4 = reference::gamma<R>(4, P.units().u_a);  // the function, not the weights
      const R mean_mag = abs(mean.v) + mean.r + mean.e;
      for (std::size_t i = 0; i < n; ++i) {
        const Tracked<R>& xi = x(t, i);
        const Tracked<R> three[] = {P.mul(rstd, g[i]), P.mul(b_exact, xi), c};
        auto sum = P.sum(three);
        const R spread = abs(xi.v - mean.v) + xi.r + xi.e + mean.r + mean.e;
        sum.e += b.e * (spread + g4 * (abs(xi.v) + xi.r + xi.e + mean_mag));
        dx(t, i).e = P.to_storage(sum).e;
      }
    }
  }
}

// The parameter gradients: per part (a rank's tokens, in order) dgamma = Σ_t dy·xhat and
// dbeta = Σ_t dy in A, each rounded to T; the parts summed in T (the all_reduce, any order).
// Empty parts are exact zeros and do not count.
template <class R>
void parameter_gradients(NormKind kind, const TrackedTensor<R>& dy,
                         const NormForwardTracked<R>& fwd, std::span<const std::size_t> parts,
                         const Propagator<R>& P, NormBackwardTracked<R>& out) {
  const std::size_t n = dy.shape[1];
  out.dgamma = TrackedTensor<R>(Shape{n});
  if (kind == NormKind::layer_norm) out.dbeta = TrackedTensor<R>(Shape{n});
  std::vector<Tracked<R>> pg, pb, col;
  for (std::size_t i = 0; i < n; ++i) {
    pg.clear();
    pb.clear();
    std::size_t t0 = 0;
    for (const std::size_t len : parts) {
      if (len == 0) continue;
      col.clear();
      for (std::size_t t = t0; t < t0 + len; ++t) col.push_back(P.mul(dy(t, i), fwd.xhat(t, i)));
      pg.push_back(P.to_storage(P.sum(col)));
      if (kind == NormKind::layer_norm) {
        col.clear();
        for (std::size_t t = t0; t < t0 + len; ++t) col.push_back(dy(t, i));
        pb.push_back(P.to_storage(P.sum(col)));
      }
      t0 += len;
    }
    out.dgamma.data[i] = P.sum_in_storage(pg);
    if (kind == NormKind::layer_norm) out.dbeta.data[i] = P.sum_in_storage(pb);
  }
}

// ---- the op, step by step ----

// The forward, per token: normalize_row, then scale_and_shift_row. Arguments as the definition's
// norm_forward, x tracked (it may carry errors: the Megatron block's propagation feeds exact x,
// the machinery does not care) and the propagator P last.
template <HighPrecision R = hp>
NormForwardTracked<R> propagate_norm_forward(NormKind kind, const TrackedTensor<R>& x,
                                             const Tensor<R>& gamma, const Tensor<R>& beta,
                                             const R& eps, const Propagator<R>& P,
                                             NormForm form = {}) {
  detail::require_norm_shapes(kind, x.shape, gamma, beta, nullptr);
  NormForwardTracked<R> out{TrackedTensor<R>(x.shape), TrackedTensor<R>(x.shape), {}, {}};
  for (std::size_t t = 0; t < x.shape[0]; ++t) {
    out.rstd.push_back(normalize_row(kind, x, t, eps, P, out, form));
    scale_and_shift_row(kind, t, gamma, beta, P, out);
  }
  return out;
}

// The backward: the forward's steps, input_gradient_row per token, then parameter_gradients.
// `token_parts`: the token counts of the ranks in order (empty: one part, the dense op). dy may
// carry errors (the block's dz).
template <HighPrecision R = hp>
NormBackwardTracked<R> propagate_norm_backward(NormKind kind, const TrackedTensor<R>& x,
                                               const Tensor<R>& gamma, const TrackedTensor<R>& dy,
                                               const R& eps, const Propagator<R>& P,
                                               std::span<const std::size_t> token_parts = {},
                                               NormForm form = {}) {
  const bool beta = kind == NormKind::layer_norm;
  detail::require_norm_shapes(kind, x.shape, gamma, beta ? gamma : Tensor<R>(), &dy.shape);
  const auto parts = detail::norm_token_parts(token_parts, x.shape[0]);
  const auto fwd =
      propagate_norm_forward<R>(kind, x, gamma, beta ? gamma : Tensor<R>(), eps, P, form);
  NormBackwardTracked<R> out;
  out.dx = TrackedTensor<R>(x.shape);
  for (std::size_t t = 0; t < x.shape[0]; ++t)
    input_gradient_row(kind, t, gamma, dy, fwd, P, out.dx, x, form);
  parameter_gradients(kind, dy, fwd, parts, P, out);
  return out;
}

}  // namespace shardcheck::reference
