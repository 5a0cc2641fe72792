// The softmax merge in the high-precision scalar R, the exact softmax / log-sum-exp of a list of
// scores, and an a-priori elementwise error bound for lib/ops/softmax_merge/softmax_merge.hpp's
// merge computed in A (float64 or float32), for one merge, for nested merges and chains, and for
// partials that are themselves rounded. docs/attention.md ("The softmax merge") has the same in
// prose.
//
// Everything is in the row layout: out [rows, width], lse [rows]. A value carries the bound of
// its own error (SoftmaxRows: out_err, lse_err, bounds on |value − exact|), so bounds compose:
// a merge's inputs carry theirs, its result carries the bound of the implementation's result.
//
// ---- The merge of one row, as the library computes it in A ----
// Inputs: parts j with lse λ_j (an A value, or −inf: empty) and out o_je; J = the non-empty parts,
// n = |J|. u = 2^−p (unit roundoff of A), η = smallest subnormal of A, γ_k = k·u/(1 − k·u).
// Exact: m = max_J λ_j, d_j = λ_j − m ≤ 0, W_j = e^{d_j}, l = Σ_J W_j ≥ 1, L = m + log l,
// c_j = W_j / l, O_e = Σ_J c_j·o_je. Computed (hats), each step one rounding:
//   d̂_j = fl(λ_j − m)       |d̂_j − d_j| ≤ u·|d_j| (a difference that is subnormal is exact; one
//                           that overflows is −inf, and then ŵ_j = 0, inside the bound below)
//   ŵ_j = exp_A(d̂_j)        libm: |exp_A(x) − e^x| ≤ 2u·e^x + η (glibc documents < 1 ulp for
//                           exp/expf; 1 ulp ≤ 2u relative in the normal range and η below it).
//                           e^x is increasing and d̂_j ∈ [d_j(1+u), d_j(1−u)], so
//                           ŵ_j ∈ [lo_j, hi_j], lo_j = max(0, e^{d_j(1+u)}(1−2u) − η),
//                           hi_j = e^{d_j(1−u)}(1+2u) + η;   εw_j = max(hi_j − W_j, W_j − lo_j).
//                           The argument's error u·|d_j| is what makes the bound grow with the
//                           gap: relative error ≈ u·|d_j| of a weight e^{d_j} (≤ u/e absolute).
//   l̂ = Σ ŵ_j (n − 1 additions of nonnegative terms; subnormal sums are exact)
//                           εl = Σ εw_j + γ_{n−1}·Σ hi_j ;  l̂ ∈ [l − εl, l + εl], l − εl > 0
//   ĝ = log_A(l̂)            |log l̂ − log l| ≤ εl/(l − εl); libm: ≤ 2u·|log l̂| + η more:
//                           εg = εl/(l − εl) + 2u·(log l + εl/(l − εl)) + η
//   lse = fl(m + ĝ)         εL = εg + u·(|L| + εg)   (m is exact: a max of the inputs)
//   ĉ_j = fl(ŵ_j / l̂)       |ŵ_j/l̂ − c_j| ≤ p_j = (εw_j + c_j·εl)/(l − εl);
//                           εc_j = p_j + u·(c_j + p_j) + η/2
//   out_e = Σ_J ĉ_j·o_je    (n products and n − 1 additions, any order, fma allowed;
//                           Higham ASNA (3.4) plus gradual underflow of the products)
//                           εO_e = Σ εc_j|o_je| + γ_n·Σ (c_j + εc_j)|o_je| + n·(η/2)·(1 + γ_n)
// No step overflows: ŵ_j ≤ 1 + 2u + η, ĉ_j ≤ 1 (ŵ_j ≤ l̂ and division is monotone), so
// |out_e| ≤ (1 + γ_n)·max|o_je|, and |m + ĝ| ≤ |m| + log n. The only overflow is of out when
// the o_je are within γ_n of the largest finite value; properties/engine/tensor_check accepts
// ±inf exactly when |exact| + bound reaches A's overflow threshold.
//
// ---- Inputs with errors: propagation through the exact merge ----
// If the inputs are within a_j (lse) and b_je (out) of exact ones (an input of value −inf must
// be exactly −inf), the exact merge of the given values (c̃_j, L̃, Õ) differs from the exact merge
// of the exact inputs (c_j*, L*, O*) by
//   |L̃ − L*| ≤ D = log Σ_J exp(λ_j − L̃ + a_j)      (L* ≤ L̃ + D directly; L* ≥ L̃ − D by
//                                                   Jensen, since Σ c̃_j = 1)
//   c_j* ∈ [exp(λ_j − L̃ − a_j − D), exp(λ_j − L̃ + a_j + D)] =: [clo_j, chi_j],
//   Δc_j = max(chi_j − c̃_j, c̃_j − clo_j)
//   |Õ_e − O*_e| ≤ Σ_J c̃_j·b_je + Δc_j·(|o_je| + b_je)
// (written with the exponents added before exp, so a part with a huge negative gap contributes
// e^{−1e30 + a_j} = 0, not 0·inf). This gives:
//   - partials rounded to A from exact values: a_j = u·|λ_j| + η/2, b_je = u·|o_je| + η/2
//     (|RN(x) − x| ≤ u·|RN(x)| in the normal range, ≤ η/2 below it), plus the error of the
//     exact values themselves (their R rounding);
//   - NESTED merges (merge of merged groups): each group's result is an A value carrying the
//     bound of its own merge; the outer merge adds its own rounding (the first part, evaluated
//     at the group results the implementation produced) to the propagated group errors (the
//     second). Associativity of the exact merge makes the exact result the merge of all leaves.
//     A chain of two-way steps (merge_into around a ring) is the nested case one step at a time.
//   Both parts are functions of the values the step receives, so bounding a nested or chained
//   merge needs each intermediate result (the suite and the fuzzer drive every step and have
//   them); each intermediate is itself within its bound when the implementation is correct.
//
// ---- The reference's own rounding (R, 113 bits) ----
// Values here are computed in R; their own error is carried in the err fields: with u_R' =
// 2^−100 (≥ 2^13 ulps of R, covering R's exp/log/division/sums of at most a few hundred terms),
// lse: u_R'·(|m| + log l + 1), out: u_R'·Σ c_j·(1 + |d_j| + n)·|o_je|. Every bound is finally
// multiplied by (1 + 2^−100) for its own evaluation in R.
//
// Special values (the library's conventions, lib/ops/softmax_merge/softmax_merge.hpp): all parts
// empty or no parts: lse −inf, out +0 (bound 0: exact); any non-empty NaN lse: lse and out NaN;
// otherwise any +inf lse: lse +inf, out NaN; NaN or ±inf in a non-empty part's out propagates (R
// computes c_j·inf with c_j > 0, i.e. ±inf; the library may give NaN there when its ĉ_j underflows,
// which the convention allows). Bounds of non-finite values are 0.
#pragma once

#include "reference/format.hpp"
#include "reference/precision.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::reference {

// Rows of softmax results in R, each value with the bound of its error (empty err tensors mean
// 0: exact). out [rows, width], lse [rows].
template <class R = hp>
struct SoftmaxRows {
  Tensor<R> out;
  Tensor<R> lse;
  Tensor<R> out_err;
  Tensor<R> lse_err;

  std::size_t rows() const { return lse.size(); }
  std::size_t width() const { return out.ndim() == 2 ? out.dim(1) : 0; }
  R oerr(std::size_t i, std::size_t e) const {
    return out_err.empty() ? R(0) : out_err[i * width() + e];
  }
  R lerr(std::size_t i) const { return lse_err.empty() ? R(0) : lse_err[i]; }
};

namespace merge_detail {

template <class R>
R inf() {
  return std::numeric_limits<R>::infinity();
}
template <class R>
R nan() {
  return std::numeric_limits<R>::quiet_NaN();
}
template <class R>
R slack() {
  return pow2<R>(-100);
}

// A product of bounds with 0·inf = 0: a term whose magnitude (or weight error) is exactly 0
// contributes nothing, however large the other factor's bound (an infinite bound means "no
// bound", as in reference/norm/norm_bound.hpp).
template <class R>
R times(const R& a, const R& b) {
  return a == 0 || b == 0 ? R(0) : R(a * b);
}

template <class R>
SoftmaxRows<R> shaped(std::size_t rows, std::size_t width) {
  SoftmaxRows<R> s;
  s.out = Tensor<R>(Shape{rows, width});
  s.lse = Tensor<R>(Shape{rows});
  s.out_err = Tensor<R>(Shape{rows, width});
  s.lse_err = Tensor<R>(Shape{rows});
  return s;
}

}  // namespace merge_detail

// The exact softmax over keys: scores [rows, keys] (−inf: a masked key; finite otherwise),
// values [keys, width]. lse_i = log Σ_s exp(scores_is), out_i = Σ_s exp(scores_is − lse_i)·v_s;
// a row without a visible key: lse −inf, out 0. Err: R's own rounding.
template <class R = hp>
SoftmaxRows<R> softmax_rows(const Tensor<R>& scores, const Tensor<R>& values) {
  using std::abs;
  using std::exp;
  using std::log;
  if (scores.ndim() != 2 || values.ndim() != 2 || values.dim(0) != scores.dim(1)) {
    throw std::invalid_argument("reference::softmax_rows: scores " + format_shape(scores.shape()) +
                                " and values " + format_shape(values.shape()) +
                                " must be [rows, keys] and [keys, width]");
  }
  const std::size_t rows = scores.dim(0), keys = scores.dim(1), width = values.dim(1);
  auto s = merge_detail::shaped<R>(rows, width);
  const R ur = merge_detail::slack<R>();
  const R n = R(keys);
  for (std::size_t i = 0; i < rows; ++i) {
    R m = -merge_detail::inf<R>();
    for (std::size_t k = 0; k < keys; ++k) {
      if (scores(i, k) > m) m = scores(i, k);
    }
    if (m == -merge_detail::inf<R>()) {
      s.lse[i] = m;  // out stays 0, errors 0
      continue;
    }
    R l(0);
    for (std::size_t k = 0; k < keys; ++k) {
      if (scores(i, k) != -merge_detail::inf<R>()) l += exp(scores(i, k) - m);
    }
    const R lse = m + log(l);
    s.lse[i] = lse;
    s.lse_err[i] = ur * (abs(m) + log(l) + 1);
    for (std::size_t e = 0; e < width; ++e) {
      R acc(0), err(0);
      for (std::size_t k = 0; k < keys; ++k) {
        if (scores(i, k) == -merge_detail::inf<R>()) continue;
        const R p = exp(scores(i, k) - lse);
        acc += p * values(k, e);
        err += p * (1 + abs(scores(i, k) - m) + n) * abs(values(k, e));
      }
      s.out(i, e) = acc;
      s.out_err(i, e) = ur * err;
    }
  }
  return s;
}

// The exact log-sum-exp of each row of scores [rows, keys] (−inf allowed): softmax_rows' lse.
template <class R = hp>
Tensor<R> logsumexp_rows(const Tensor<R>& scores) {
  return softmax_rows<R>(scores, Tensor<R>(Shape{scores.ndim() == 2 ? scores.dim(1) : 0, 0})).lse;
}

// The exact partials over a partition of the keys: key k belongs to part part_of_key[k] <
// parts. Part j is the softmax over its keys alone (an empty part: lse −inf, out 0).
template <class R = hp>
std::vector<SoftmaxRows<R>> softmax_partials(const Tensor<R>& scores, const Tensor<R>& values,
                                             const std::vector<std::size_t>& part_of_key,
                                             std::size_t parts) {
  std::vector<SoftmaxRows<R>> out;
  for (std::size_t j = 0; j < parts; ++j) {
    Tensor<R> masked = scores;
    for (std::size_t i = 0; i < scores.dim(0); ++i) {
      for (std::size_t k = 0; k < scores.dim(1); ++k) {
        if (part_of_key.at(k) != j) masked(i, k) = -merge_detail::inf<R>();
      }
    }
    out.push_back(softmax_rows<R>(masked, values));
  }
  return out;
}

// x rounded to format f value by value (round_to is the caller's: this takes the rounded
// values) with the error bounds of the rounding added: |RN(v) − v| ≤ u·|RN(v)| + η/2.
// `rounded` holds RN(x.out), RN(x.lse) as R values. −inf stays exact (err 0); non-finite values
// carry no bound (err 0).
template <class R = hp>
SoftmaxRows<R> with_rounding_error(const SoftmaxRows<R>& x, const Tensor<R>& rounded_out,
                                   const Tensor<R>& rounded_lse, const Format& f) {
  using std::abs;
  using std::isfinite;
  const R u = unit_roundoff<R>(f), eta = smallest_subnormal<R>(f);
  auto s = merge_detail::shaped<R>(x.rows(), x.width());
  s.out = rounded_out;
  s.lse = rounded_lse;
  for (std::size_t i = 0; i < x.rows(); ++i) {
    s.lse_err[i] = isfinite(s.lse[i]) ? R(x.lerr(i) + u * abs(s.lse[i]) + eta / 2) : R(0);
    for (std::size_t e = 0; e < x.width(); ++e) {
      const R v = s.out(i, e);
      s.out_err(i, e) = isfinite(v) ? R(x.oerr(i, e) + u * abs(v) + eta / 2) : R(0);
    }
  }
  return s;
}

namespace merge_detail {

template <class R>
void require_part_shapes(std::span<const SoftmaxRows<R>> parts, std::size_t rows,
                         std::size_t width) {
  for (const auto& p : parts) {
    if (p.out.shape() != Shape({rows, width}) || p.lse.shape() != Shape({rows})) {
      throw std::invalid_argument(
          "reference::softmax_merge: a part has out " + format_shape(p.out.shape()) + " and lse " +
          format_shape(p.lse.shape()) + ", not [" + std::to_string(rows) + ", " +
          std::to_string(width) + "] and [" + std::to_string(rows) + "]");
    }
  }
}

// Row i's non-empty parts J (finite lse) and m = max_J λ_j; whether an lse is NaN or +inf.
template <class R>
struct RowParts {
  std::vector<std::size_t> J;
  R m = -inf<R>();
  bool any_nan = false, any_pinf = false;
};

template <class R>
RowParts<R> row_parts(std::span<const SoftmaxRows<R>> parts, std::size_t i) {
  using std::isnan;
  RowParts<R> r;
  for (std::size_t j = 0; j < parts.size(); ++j) {
    const R& v = parts[j].lse[i];
    if (isnan(v)) {
      r.any_nan = true;
    } else if (v == inf<R>()) {
      r.any_pinf = true;
    } else if (v != -inf<R>()) {
      r.J.push_back(j);
      if (v > r.m) r.m = v;
    }
  }
  return r;
}

// The exact merge of the given values (the definition): W_j = e^{λ_j − m}, l = Σ_J W_j,
// L = m + log l, c_j = W_j / l; merged_out is O_e = Σ_J c_j·o_je.
template <class R>
struct ExactMerge {
  std::vector<R> W, c;
  R l{0}, logl{0}, L{0};
};

template <class R>
ExactMerge<R> exact_merge(std::span<const SoftmaxRows<R>> parts, const RowParts<R>& row,
                          std::size_t i) {
  using std::exp;
  using std::log;
  const std::size_t n = row.J.size();
  ExactMerge<R> x;
  x.W.assign(n, R(0));
  for (std::size_t k = 0; k < n; ++k) {
    x.W[k] = exp(parts[row.J[k]].lse[i] - row.m);
    x.l += x.W[k];
  }
  x.logl = log(x.l);
  x.L = row.m + x.logl;
  x.c.assign(n, R(0));
  for (std::size_t k = 0; k < n; ++k) x.c[k] = x.W[k] / x.l;
  return x;
}

template <class R>
R merged_out(std::span<const SoftmaxRows<R>> parts, const RowParts<R>& row, const ExactMerge<R>& x,
             std::size_t i, std::size_t e) {
  R acc(0);
  for (std::size_t k = 0; k < row.J.size(); ++k) acc += x.c[k] * parts[row.J[k]].out(i, e);
  return acc;
}

// ---- inputs with errors: D (0 for exact lse inputs) and Δc_j ----
template <class R>
struct PropagatedErrors {
  R D{0};
  std::vector<R> dc;
};

template <class R>
PropagatedErrors<R> propagated_errors(std::span<const SoftmaxRows<R>> parts, const RowParts<R>& row,
                                      const ExactMerge<R>& x, std::size_t i) {
  using std::exp;
  using std::log;
  using std::max;
  const std::size_t n = row.J.size();
  PropagatedErrors<R> r;
  bool exact_inputs = true;
  for (std::size_t k = 0; k < n; ++k) exact_inputs = exact_inputs && parts[row.J[k]].lerr(i) == 0;
  if (!exact_inputs) {
    R sum(0);
    for (std::size_t k = 0; k < n; ++k)
      sum += exp(parts[row.J[k]].lse[i] - x.L + parts[row.J[k]].lerr(i));
    r.D = max(R(0), R(log(sum)));
  }
  r.dc.assign(n, R(0));
  for (std::size_t k = 0; k < n; ++k) {
    const R a = parts[row.J[k]].lerr(i) + r.D;
    if (a == 0) continue;
    const R d = parts[row.J[k]].lse[i] - x.L;
    r.dc[k] = max(R(exp(d + a) - x.c[k]), R(x.c[k] - exp(d - a)));
  }
  return r;
}

// ---- the implementation's rounding in A: one function per step of the header's derivation ----
template <class R>
struct RoundingModel {
  bool rounds = false;  // false: the exact merge (no rounding errors)
  R u{0}, eta{0};       // of A

  // d̂_j = fl(λ_j − m) (shift), ŵ_j = exp_A(d̂_j): hi_j of the enclosure [lo_j, hi_j] of ŵ_j, εw_j.
  std::pair<R, R> shift_exp_error(const R& d, const R& W) const {
    using std::exp;
    using std::max;
    const R hi = exp(d * (1 - u)) * (1 + 2 * u) + eta;
    const R lo = max(R(0), R(exp(d * (1 + u)) * (1 - 2 * u) - eta));
    return {hi, max(R(hi - W), R(W - lo))};
  }
  // l̂ = Σ ŵ_j: εl = Σ εw_j + γ_{n−1}·Σ hi_j.
  R normalizer_error(const R& sum_ew, const R& sum_hi, std::size_t n) const {
    return sum_ew + (n >= 2 ? gamma<R>(n - 1, u) * sum_hi : R(0));
  }
  // ĝ = log_A(l̂): εg = εl/(l − εl) + 2u·(log l + εl/(l − εl)) + η.
  R log_error(const R& el, const R& lden, const R& logl) const {
    const R elog = el / lden;
    return elog + 2 * u * (logl + elog) + eta;
  }
  // lse = fl(m + ĝ): εL = εg + u·(|L| + εg).
  R lse_error(const R& eg, const R& L) const {
    using std::abs;
    return eg + u * (abs(L) + eg);
  }
  // ĉ_j = fl(ŵ_j / l̂): εc_j = p_j + u·(c_j + p_j) + η/2, p_j = (εw_j + c_j·εl)/(l − εl).
  R coefficient_error(const R& ew, const R& c, const R& el, const R& lden) const {
    const R p = (ew + c * el) / lden;
    return p + u * (c + p) + eta / 2;
  }
};

template <class R>
struct RoundingErrors {
  R eL{0};
  std::vector<R> cerr;     // εc_j
  bool unbounded = false;  // l − εl ≤ 0
};

template <class R>
RoundingErrors<R> rounding_errors(std::span<const SoftmaxRows<R>> parts, const RowParts<R>& row,
                                  const ExactMerge<R>& x, std::size_t i,
                                  const RoundingModel<R>& a) {
  const std::size_t n = row.J.size();
  RoundingErrors<R> r;
  r.cerr.assign(n, R(0));
  if (!a.rounds) return r;
  std::vector<R> ew(n);
  R sum_hi(0), sum_ew(0);
  for (std::size_t k = 0; k < n; ++k) {
    const auto [hi, e] = a.shift_exp_error(R(parts[row.J[k]].lse[i] - row.m), x.W[k]);
    ew[k] = e;
    sum_hi += hi;
    sum_ew += ew[k];
  }
  const R el = a.normalizer_error(sum_ew, sum_hi, n);
  const R lden = x.l - el;
  r.unbounded = !(lden > 0);
  if (r.unbounded) return r;
  r.eL = a.lse_error(a.log_error(el, lden, x.logl), x.L);
  for (std::size_t k = 0; k < n; ++k) r.cerr[k] = a.coefficient_error(ew[k], x.c[k], el, lden);
  return r;
}

// εO_e + the propagated error of out + R's own, raised by 1 + u_R' for its evaluation in R.
template <class R>
R out_error(std::span<const SoftmaxRows<R>> parts, const RowParts<R>& row, const ExactMerge<R>& x,
            const PropagatedErrors<R>& in, const RoundingErrors<R>& rd, std::size_t i,
            std::size_t e, const RoundingModel<R>& a) {
  using std::abs;
  const std::size_t n = row.J.size();
  const R gn = a.rounds ? gamma<R>(n, a.u) : R(0);
  R comp(0), mag(0), prop(0), own(0);
  for (std::size_t k = 0; k < n; ++k) {
    const auto& p = parts[row.J[k]];
    const R o = abs(p.out(i, e));
    const R b = p.oerr(i, e);
    comp += times(rd.cerr[k], o);
    mag += times(R(x.c[k] + rd.cerr[k]), o);
    prop += times(x.c[k], b) + times(in.dc[k], R(o + b));
    own += times(R(x.c[k] * (1 + abs(p.lse[i] - row.m) + R(n))), o);
  }
  comp += gn * mag + (a.rounds ? R(R(n) * (a.eta / 2) * (1 + gn)) : R(0));
  return (comp + prop + slack<R>() * own) * (1 + slack<R>());
}

}  // namespace merge_detail

// The merge of `parts` (each [rows, width] / [rows], values with their error bounds): the
// library's softmax_merge(parts, rows, width), with the arithmetic of the bound last.
//   arith == nullptr: the exact merge of the given values; err bounds |value − exact merge of
//                     the exact inputs| (propagated input errors + R's rounding).
//   arith == &f:      value as above; err bounds |library's merge of the given values in f −
//                     exact merge of the exact inputs| (f's rounding + propagated input errors
//                     + R's rounding). f is float64 or float32 (A).
// @throws std::invalid_argument on shapes that differ from [rows, width] / [rows].
template <class R = hp>
SoftmaxRows<R> softmax_merge(std::span<const SoftmaxRows<R>> parts, std::size_t rows,
                             std::size_t width, const Format* arith) {
  using std::abs;
  merge_detail::require_part_shapes(parts, rows, width);
  const R inf = merge_detail::inf<R>(), ur = merge_detail::slack<R>();
  merge_detail::RoundingModel<R> a;
  if (arith) a = {true, unit_roundoff<R>(*arith), smallest_subnormal<R>(*arith)};
  auto s = merge_detail::shaped<R>(rows, width);
  for (std::size_t i = 0; i < rows; ++i) {
    const auto row = merge_detail::row_parts(parts, i);
    if (row.any_nan || row.any_pinf) {
      s.lse[i] = row.any_nan ? merge_detail::nan<R>() : inf;
      for (std::size_t e = 0; e < width; ++e) s.out(i, e) = merge_detail::nan<R>();
      continue;
    }
    if (row.J.empty()) {
      s.lse[i] = -inf;  // out 0, bounds 0
      continue;
    }
    const auto x = merge_detail::exact_merge(parts, row, i);
    s.lse[i] = x.L;
    for (std::size_t e = 0; e < width; ++e)
      s.out(i, e) = merge_detail::merged_out(parts, row, x, i, e);
    const auto in = merge_detail::propagated_errors(parts, row, x, i);
    const auto rd = merge_detail::rounding_errors(parts, row, x, i, a);
    if (rd.unbounded) {
      s.lse_err[i] = inf;
      for (std::size_t e = 0; e < width; ++e) s.out_err(i, e) = inf;
      continue;
    }
    s.lse_err[i] = (rd.eL + in.D + ur * (abs(row.m) + x.logl + 1)) * (1 + ur);
    for (std::size_t e = 0; e < width; ++e)
      s.out_err(i, e) = merge_detail::out_error(parts, row, x, in, rd, i, e, a);
  }
  return s;
}

// Exact conversion of the library's A values (row layout) to R, with errors `err_from` (a value
// whose err fields bound the given values' errors), or exact when err_from is null.
template <class R = hp, StorageFloat A>
SoftmaxRows<R> rows_of(const Tensor<A>& out, const Tensor<A>& lse,
                       const SoftmaxRows<R>* err_from = nullptr) {
  SoftmaxRows<R> s;
  s.out = to_hp<R>(out);
  s.lse = to_hp<R>(lse);
  if (err_from != nullptr) {
    s.out_err = err_from->out_err;
    s.lse_err = err_from->lse_err;
  }
  return s;
}

}  // namespace shardcheck::reference
