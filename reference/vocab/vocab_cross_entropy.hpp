// The dense cross-entropy over the vocabulary (PyTorch F.cross_entropy semantics, with PyTorch's
// per-class `weight` and per-token weights), forward and backward, in the high-precision scalar
// R, with elementwise a-priori error bounds for lib/ops/vocab/vocab_cross_entropy.hpp's
// arithmetic contract. Two halves, each in its own header:
//   vocab_cross_entropy_definition.hpp  the definition in plain loops: lse, the loss, its
//                                       reductions and the gradient (formulas there)
//   vocab_cross_entropy_bound.hpp       the bound, one function per step of its derivation
//                                       (docs/vocab.md, "Cross-entropy")
// cross_entropy() below pairs every value with its bound.
//
// A padded vocabulary (lib/ops/vocab/vocab_cross_entropy.hpp, "Padded vocabulary": the library's
// logits have V_pad columns of which the first V are classes) is the dense loss over the V
// real classes: the caller passes the first V columns only, and this reference never sees a
// padding column (the suite expects exactly 0, bound 0, in the padding columns of the
// gradient: properties/suites/vocab/vocab_expected.cpp). Every V in the definition and the
// bound is then the REAL V = logits.dim(1), which is the V of the library's arithmetic: it
// adds V real terms to S and Z (γ_{V−1}), divides ε by the real V, and sums the class weights
// of the V classes (C); the padding columns add no operation at all (they are skipped, not
// added as zeros), so no term of the bound counts them.
#pragma once

#include "reference/bounds.hpp"
#include "reference/precision.hpp"
#include "reference/vocab/vocab_cross_entropy_bound.hpp"
#include "reference/vocab/vocab_cross_entropy_definition.hpp"

#include <cstdint>
#include <span>
#include <tuple>
#include <vector>

namespace shardcheck::reference {

template <class R = hp>
struct CrossEntropyResult {
  Tensor<R> loss, loss_bound;  // [tokens] (none) or [1]
  Tensor<R> grad, grad_bound;  // [tokens, V]: the gradient for the upstream dloss
  // Per token (for the finite-difference checks): the loss in R and a bound on R's own error.
  std::vector<R> token_loss, token_loss_error;
  std::size_t count = 0;  // N
  R weight_sum{0};        // D = Σ_{t non-ignored} ω_t·c_{y_t} (N without weights)
  // mean, and the computed D' may be 0 though D is not (E_D' ≥ |D'|: products below A's normal
  // range, or weights of mixed sign): the library's D' = 0 convention may give 0 where the
  // reference is NaN or ±inf, and every bound is +inf.
  bool denominator_uncertain = false;
};

// The loss and its gradient for the upstream dloss, each with its bound. logits [tokens, V];
// targets [tokens]; dloss [tokens] (none) or [1]. `arith`: the implementation's storage T and
// accumulator (arithmetic_of<T>()). The argument order is the library's
// (vocab_parallel_cross_entropy: options, logits, targets; its backward then dloss), the
// arithmetic last. @throws std::invalid_argument on shapes, weights or targets the
// definition's require_cross_entropy_inputs refuses.
template <HighPrecision R = hp>
CrossEntropyResult<R> cross_entropy(const CrossEntropyOptions& opt, const Tensor<R>& logits,
                                    std::span<const std::int64_t> targets, const Tensor<R>& dloss,
                                    const Arithmetic& arith) {
  detail::require_cross_entropy_inputs(logits, targets, dloss, opt);
  const std::size_t tokens = logits.dim(0), V = logits.dim(1);
  const detail::CeSpec<R> spec(opt, V);
  const auto den = detail::loss_denominator(spec, targets);
  const detail::CrossEntropyErrors<R> bound(arith, spec, den);
  const R e_base = bound.upstream_error(dloss);
  CrossEntropyResult<R> res;
  res.count = den.count;
  res.weight_sum = den.value;
  res.denominator_uncertain = bound.denominator_uncertain();
  res.token_loss.assign(tokens, R(0));
  res.token_loss_error.assign(tokens, R(0));
  std::vector<R> e_tok(tokens, R(0)), scaled_loss(tokens, R(0));
  res.grad = Tensor<R>({tokens, V});
  res.grad_bound = Tensor<R>({tokens, V});
  for (std::size_t t = 0; t < tokens; ++t) {
    if (spec.ignored(targets[t])) continue;  // loss 0, gradient 0, bound 0: exact zeros
    const auto y = static_cast<std::size_t>(targets[t]);
    const auto lse = detail::token_logsumexp(logits, t);
    const auto loss = detail::token_loss(logits, t, y, lse, spec);
    const auto e_lse = bound.lse_errors(logits, t, lse);
    const auto e_loss = bound.token_loss_errors(logits, t, lse, loss, e_lse);
    res.token_loss[t] = loss.loss;
    using std::abs;
    res.token_loss_error[t] = (abs(spec.tok(t)) + 1) * e_loss.reference;
    if (opt.reduction == LossReduction::none) {
      e_tok[t] = bound.unreduced_loss_error(t, loss, e_loss);
    } else {
      std::tie(scaled_loss[t], e_tok[t]) = bound.scaled_loss(t, loss, e_loss);
    }

    const R k_factor = detail::gradient_k(loss, spec);
    const R base = detail::upstream_base(dloss, t, spec, den);
    const R scale = base * spec.tok(t);
    const auto row = bound.gradient_row_errors(t, loss, k_factor, base, scale, e_base);
    for (std::size_t v = 0; v < V; ++v) {
      const auto g = detail::gradient_term(lse, loss, k_factor, v, v == y, scale, spec);
      res.grad(t, v) = spec.mean() && den.zero() ? R(0) : g.g;
      res.grad_bound(t, v) = bound.gradient_error(lse, e_lse, row, v, v == y, g);
    }
  }
  if (opt.reduction == LossReduction::none) {
    res.loss = Tensor<R>({tokens}, res.token_loss);
    res.loss_bound = Tensor<R>({tokens});
    for (std::size_t t = 0; t < tokens; ++t) {
      if (!spec.ignored(targets[t]))
        res.loss_bound[t] = bound.to_storage(res.token_loss[t], e_tok[t]);
    }
    return res;
  }
  // The library sums loss'_t = ω'_t·l_t (ω'_t = ω_t·2^−e): N' = 2^−e·Σ_t loss_t.
  const R sum = detail::loss_sum<R>(res.token_loss);
  const R loss = detail::reduced_loss(sum, spec, den);
  const R scaled_sum = detail::loss_sum<R>(scaled_loss);
  res.loss = Tensor<R>({1}, {loss});
  res.loss_bound = Tensor<R>(
      {1}, {bound.reduced_loss_error(scaled_sum, bound.sum_error(scaled_loss, e_tok), loss)});
  return res;
}

}  // namespace shardcheck::reference
