// An a-priori elementwise error bound for a softmax merge evaluated as ANY tree of two-way
// steps: a chain of online merges in any order (what FlashAttention-style kernels and ring
// implementations do when they merge n partials: acc ← merge(acc, part), from the first partial
// or from the identity), a balanced tree (split-KV combines reduced pairwise), or anything in
// between. reference/softmax_merge/softmax_merge.hpp bounds the n-way form, whose one rounding of
// the lse is what its permutation and associativity bounds assume; a chain rounds the lse once
// per step, and at offsets of 1e30 in float32 that loses the mass of every earlier step (two
// equal partials merged give lse = fl(1e30 + log 2) = 1e30, so a third one then gets weight 1/2,
// not 1/3). A correct chain is within this bound; the n-way bound rejects it.
//
// Each step is one two-way merge with the arithmetic of lib/ops/softmax_merge/softmax_merge.hpp's
// merge_into (or any two-way step whose rounding is within that model): notation and the
// per-step formulas are those of reference/softmax_merge/softmax_merge.hpp. What is new is that
// the intermediates are not known (the implementation returns only the root), so every per-step
// quantity is bounded a priori, over every weight the step can see:
//   - εw_j ≤ ω = 2u + (1 + 2u)·u/(e·(1 − u)) + η for every d_j ≤ 0: with t = −d_j ≥ 0,
//     hi_j − W_j = e^{−t}((1 + 2u)e^{ut} − 1) + η ≤ 2u + (1 + 2u)·u·t·e^{−t(1−u)} + η, and
//     t·e^{−ct} ≤ 1/(c·e); W_j − lo_j ≤ e^{−t}(2u + u·t) + η ≤ 2u + u/e + η.
//   - hi_j ≤ 1 + 2u + η; l ∈ [1, 2] (the max part has W = 1); so
//     εl ≤ ε_l = 2ω + γ_1·2(1 + 2u + η), and with q = ε_l/(1 − ε_l):
//     εg ≤ ε_g = q + 2u·(log 2 + q) + η.
//   - the step's own lse error: εL ≤ ε_g + u·(|L̃| + ε_g), and |L̃| ≤ Λ + log(2n) + α_{k−1}
//     (L̃ lies within log 2 above its larger input, each input within α_{k−1} of an exact
//     partial lse, and those lie in [−Λ, Λ + log n]); Λ = max_J |λ_j|.
//   - Σ_j εc_j ≤ σ = (2ω + ε_l)/(1 − ε_l) + u·(1 + 2(ω + ε_l)/(1 − ε_l)) + η (Σ_j c_j = 1).
// Propagation through a step (the header's formulas with the inputs' errors): the lse error
// D ≤ max of the inputs' (Σ c̃_j = 1), so the coefficients move by Σ_j Δc_j ≤ e^{2α} − 1, and
// never by more than 2 in total (both coefficient vectors lie in [0, 1] and sum to 1).
// With h steps on every root-to-leaf path (h = the number of partials: a chain from the
// identity has one step per partial; an empty partial merged is a step too), by induction on
// the height k (a node's inputs have height < k, and both bounds grow with k):
//   α_0 = max_J a_j (the inputs' lse error bounds),  β_0 = max_J b_je (their out error bounds),
//   M = max_J |o_je| + β_0 (≥ every exact partial's |out|; every intermediate's |out| is within
//   M + β_{k−1}),
//   α_k = α_{k−1} + ε_g + u·(Λ + log(2n) + α_{k−1} + ε_g),
//   β_k = min(β_{k−1} + δc_k·(M + 2β_{k−1}) + (σ + γ_2·(1 + σ))·(M + β_{k−1}) + η(1 + γ_2),
//             g^k·M + M),   δc_k = min(2, e^{2α_{k−1}} − 1),  g = (1 + γ_2)(1 + u)(1 + γ_1),
// where the cap is the triangle inequality: a step's |out| is at most g times its inputs'
// largest (Σ_j ĉ_j ≤ (1 + u)(1 + γ_1) and the dot rounds by γ_2), and the exact |out| ≤ M.
// The bound of the root is (α_h, β_h), raised by 1 + 2^−100 for its evaluation in R. It holds for
// every tree shape and every order of the partials at once; it is at most about h times the
// n-way bound where that one is small, and where a chain genuinely loses accuracy (lse offsets
// far beyond 1/u) it says so: out within about 2M, i.e. nothing.
//
// Special values: rows with a NaN or +inf lse, and rows whose every part is empty, are those of
// the n-way merge (softmax_merge with arith == nullptr), with bound 0.
#pragma once

#include "reference/format.hpp"
#include "reference/softmax_merge/softmax_merge.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>

namespace shardcheck::reference {

namespace merge_detail {

// The per-step constants of a two-way step in A (u, η of A), bounded over every weight.
template <class R>
struct TwoWayStep {
  R u{0}, eta{0}, eg{0}, sigma{0}, g2{0}, growth{0};
  bool bounded = true;  // false when ε_l ≥ 1 (no format shardcheck uses)
};

template <class R>
TwoWayStep<R> two_way_step(const Format& f) {
  using std::exp;
  using std::log;
  TwoWayStep<R> s;
  const R u = unit_roundoff<R>(f), eta = smallest_subnormal<R>(f);
  s.u = u;
  s.eta = eta;
  const R omega = 2 * u + (1 + 2 * u) * u / (exp(R(1)) * (1 - u)) + eta;
  const R g1 = gamma<R>(1, u);
  s.g2 = gamma<R>(2, u);
  const R el = 2 * omega + g1 * 2 * (1 + 2 * u + eta);
  s.bounded = el < 1;
  if (!s.bounded) return s;
  const R q = el / (1 - el);
  s.eg = q + 2 * u * (log(R(2)) + q) + eta;
  s.sigma = (2 * omega + el) / (1 - el) + u * (1 + 2 * (omega + el) / (1 - el)) + eta;
  s.growth = (1 + s.g2) * (1 + u) * (1 + g1);
  return s;
}

}  // namespace merge_detail

// The merge of `parts` (each [rows, width] / [rows], values with their error bounds) evaluated
// in f (float64 or float32) as any tree of two-way steps, merge_into's arithmetic per step.
// value: the exact merge of the given values (softmax_merge with arith == nullptr); err: bounds
// |any such tree's result − exact merge of the exact inputs| (the derivation above).
// @throws std::invalid_argument on shapes that differ from [rows, width] / [rows].
template <class R = hp>
SoftmaxRows<R> softmax_merge_tree(std::span<const SoftmaxRows<R>> parts, std::size_t rows,
                                  std::size_t width, const Format& f) {
  using std::abs;
  using std::exp;
  using std::isfinite;
  using std::log;
  using std::max;
  using std::min;
  SoftmaxRows<R> s = softmax_merge<R>(parts, rows, width, nullptr);
  const auto step = merge_detail::two_way_step<R>(f);
  const std::size_t h = parts.size();
  const R inf = merge_detail::inf<R>(), slack = merge_detail::slack<R>();
  for (std::size_t i = 0; i < rows; ++i) {
    const auto row = merge_detail::row_parts(parts, i);
    if (row.any_nan || row.any_pinf || row.J.empty()) continue;  // exact conventions, bound 0
    if (!step.bounded) {
      s.lse_err[i] = inf;
      for (std::size_t e = 0; e < width; ++e) s.out_err(i, e) = inf;
      continue;
    }
    R Lambda(0), alpha0(0);
    for (const auto j : row.J) {
      Lambda = max(Lambda, R(abs(parts[j].lse[i])));
      alpha0 = max(alpha0, parts[j].lerr(i));
    }
    const R log2n = log(R(2 * row.J.size()));
    // α_k for k = 0..h: every element's β recursion uses the same row's α.
    std::vector<R> alpha(h + 1, alpha0);
    for (std::size_t k = 1; k <= h; ++k) {
      const R a = alpha[k - 1];
      alpha[k] = a + step.eg + step.u * (Lambda + log2n + a + step.eg);
    }
    s.lse_err[i] = alpha[h] * (1 + slack);
    for (std::size_t e = 0; e < width; ++e) {
      R M(0), beta0(0);
      for (const auto j : row.J) {
        M = max(M, R(abs(parts[j].out(i, e))));
        beta0 = max(beta0, parts[j].oerr(i, e));
      }
      if (!isfinite(M)) continue;  // inf in a non-empty out propagates (bound 0, as the n-way)
      M += beta0;
      R beta = beta0, grown = M;
      for (std::size_t k = 1; k <= h; ++k) {
        const R a = alpha[k - 1];
        const R dc = a == 0 ? R(0) : min(R(2), R(exp(2 * a) - 1));
        grown *= step.growth;
        const R next = beta + merge_detail::times(dc, R(M + 2 * beta)) +
                       (step.sigma + step.g2 * (1 + step.sigma)) * (M + beta) +
                       step.eta * (1 + step.g2);
        beta = min(next, R(grown + M));
      }
      s.out_err(i, e) = beta * (1 + slack);
    }
  }
  return s;
}

}  // namespace shardcheck::reference
