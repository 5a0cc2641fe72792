// LayerNorm and RMSNorm, forward and backward, in the high-precision scalar R, with an a-priori
// elementwise error bound for lib/ops/norm/norm.hpp's arithmetic contract. Two halves, each in
// its own header:
//   norm_definition.hpp  the definition in plain loops: norm_forward, norm_backward (formulas
//                        there)
//   norm_bound.hpp       the bound: forward error propagation, one function per step of the op
//                        (docs/norm.md, "The bound")
// norm_expected() below pairs every value of the definition with its bound.
#pragma once

#include "ops/norm/norm_config.hpp"
#include "reference/bounds.hpp"
#include "reference/norm/norm_bound.hpp"
#include "reference/norm/norm_definition.hpp"
#include "reference/precision.hpp"

#include <span>

namespace shardcheck::reference {

// Values and bounds, the form the suites compare with.
template <class R = hp>
struct NormExpected {
  Tensor<R> y, y_bound, dx, dx_bound, dgamma, dgamma_bound, dbeta, dbeta_bound;
};

// Forward and backward of a norm for exact inputs: the values of norm_definition.hpp, the bounds
// of norm_bound.hpp's propagation. `eps`: the accumulator's eps. `arith`: the implementation's
// storage T and accumulator (arithmetic_of<T>()). `token_parts`: the sequence-parallel token
// split (empty for dense). `forms`: the evaluation orders the bound covers (norm_bound.hpp's
// NormForm: xhat's and the variance's; empty: the definition's, difference and two_pass); with
// more than one, each element's bound is the largest of theirs.
template <HighPrecision R = hp>
NormExpected<R> norm_expected(NormKind kind, const Tensor<R>& x, const Tensor<R>& gamma,
                              const Tensor<R>& beta, const Tensor<R>& dy, const R& eps,
                              const Arithmetic& arith,
                              std::span<const std::size_t> token_parts = {},
                              std::span<const NormForm> forms = {}) {
  detail::require_norm_shapes(kind, x.shape(), gamma, beta, &dy.shape());
  const auto fwd = norm_forward<R>(kind, x, gamma, beta, eps);
  const auto grads = norm_backward<R>(kind, x, gamma, dy, eps, token_parts);
  const Propagator<R> P(arith);
  const auto xt = TrackedTensor<R>::exact(x);
  NormExpected<R> e;
  e.y = fwd.y;
  e.dx = grads.dx;
  e.dgamma = grads.dgamma;
  if (kind == NormKind::layer_norm) e.dbeta = grads.dbeta;
  const NormForm only[] = {{NormXhat::difference, NormVariance::two_pass}};
  bool first = true;
  // The largest of the forms' bounds, element by element.
  auto widen = [&first](Tensor<R>& into, const Tensor<R>& b) {
    if (first) {
      into = b;
      return;
    }
    for (std::size_t k = 0; k < b.size(); ++k) into[k] = into[k] < b[k] ? b[k] : into[k];
  };
  for (const NormForm& form : forms.empty() ? std::span<const NormForm>(only) : forms) {
    const auto fwd_t = propagate_norm_forward<R>(kind, xt, gamma, beta, eps, P, form);
    const auto bwd_t = propagate_norm_backward<R>(kind, xt, gamma, TrackedTensor<R>::exact(dy), eps,
                                                  P, token_parts, form);
    widen(e.y_bound, fwd_t.y.bounds(P));
    widen(e.dx_bound, bwd_t.dx.bounds(P));
    widen(e.dgamma_bound, bwd_t.dgamma.bounds(P));
    if (kind == NormKind::layer_norm) widen(e.dbeta_bound, bwd_t.dbeta.bounds(P));
    first = false;
  }
  return e;
}

}  // namespace shardcheck::reference
