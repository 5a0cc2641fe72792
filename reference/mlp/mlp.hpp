// The dense MLP block, forward and backward, in the high-precision scalar R: the oracle of
// lib/ops/mlp/mlp.hpp (the dense mlp and Megatron-LM's ParallelMLP). Plain loops on purpose.
// Shapes and formulas are the library's (PyTorch's convention), F ffn features, H hidden:
//   x [tokens, H], w_up [k·F, H] (swiglu, k = 2: the fused [Wg; Wu]), b_up empty or [k·F],
//   w_down [H, F], b_down empty or [H], dy [tokens, H]
//   h  = x·w_upᵀ + b_up [tokens, k·F]   a = f(h) [tokens, F] (swiglu: silu(g)·u, g = h[:, :F],
//   u = h[:, F:])                        y = a·w_downᵀ + b_down [tokens, H]
//   da = dy·w_down   dh = f'(h)⊙da (swiglu: dg = da⊙u⊙silu'(g), du = da⊙silu(g))
//   dx = dh·w_up     dw_up = dhᵀ·x   db_up = Σ_t dh   dw_down = dyᵀ·a   db_down = Σ_t dy
// Each result's elementwise bound is mlp_bound.hpp's. Inputs of a storage type T convert exactly.
// `path` (contraction_path.hpp): with fast or automatic (the default, per product) the six
// products, h = x·w_upᵀ + b_up and y = a·w_downᵀ + b_down (each bias added after the sum), da =
// dy·w_down, dx = dh·w_up, dw_up = dhᵀ·x and dw_down = dyᵀ·a, are contraction/contract.hpp's (the
// four with an operand computed in R slice it as R values); with plain they are the loops below, as
// before.
#pragma once

#include "reference/contraction/contract.hpp"
#include "reference/linear/linear.hpp"
#include "reference/mlp/activation.hpp"
#include "reference/precision.hpp"

#include <stdexcept>
#include <string>

namespace shardcheck::reference {

inline std::size_t mlp_up_rows(Activation act) { return act == Activation::swiglu ? 2 : 1; }

template <class R = hp>
struct MlpForward {
  Tensor<R> h;  // the pre-activation [tokens, k·F]
  Tensor<R> a;  // the activation [tokens, F]
  Tensor<R> y;  // [tokens, H]
};

template <class R = hp>
struct MlpGrads {
  Tensor<R> dx, dw_up, db_up, dw_down, db_down;  // the biases' gradients empty without bias
  Tensor<R> da;                                  // [tokens, F], the down projection's dx
  Tensor<R> dh;                                  // [tokens, k·F], the activation's backward
};

namespace detail {
template <class R>
void require_mlp_shapes(Activation act, const Tensor<R>& x, const Tensor<R>& w_up,
                        const Tensor<R>& w_down) {
  const std::size_t k = mlp_up_rows(act);
  if (x.ndim() != 2 || w_up.ndim() != 2 || w_down.ndim() != 2 || w_up.dim(1) != x.dim(1) ||
      w_down.dim(0) != x.dim(1) || w_up.dim(0) != k * w_down.dim(1)) {
    throw std::invalid_argument("reference::mlp: x " + format_shape(x.shape()) + ", w_up " +
                                format_shape(w_up.shape()) + ", w_down " +
                                format_shape(w_down.shape()) + ": need x [tokens, H], w_up [" +
                                std::to_string(k) + "·F, H], w_down [H, F]");
  }
}
}  // namespace detail

// The forward. @pre shapes as above.
template <HighPrecision R = hp>
MlpForward<R> mlp(const Tensor<R>& x, const Tensor<R>& w_up, const Tensor<R>& b_up,
                  const Tensor<R>& w_down, const Tensor<R>& b_down, Activation act,
                  ContractionPath path = default_contraction_path()) {
  detail::require_mlp_shapes(act, x, w_up, w_down);
  const std::size_t n = x.dim(0), hid = x.dim(1), f = w_down.dim(1), kf = w_up.dim(0);
  const bool fast = path != ContractionPath::plain;  // products by contraction()
  MlpForward<R> o{fast ? linear<R>(x, w_up, b_up, {}, path).value : Tensor<R>({n, kf}),
                  Tensor<R>({n, f}), Tensor<R>({n, hid})};
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t j = 0; j < kf && !fast; ++j) {
      R s = b_up.empty() ? R(0) : b_up[j];
      for (std::size_t i = 0; i < hid; ++i) s += x(t, i) * w_up(j, i);
      o.h(t, j) = s;
    }
    for (std::size_t j = 0; j < f; ++j) {
      o.a(t, j) = act == Activation::swiglu ? R(silu(o.h(t, j)) * o.h(t, f + j))
                                            : activation_value(act, o.h(t, j));
    }
    for (std::size_t i = 0; i < hid && !fast; ++i) {
      R s = b_down.empty() ? R(0) : b_down[i];
      for (std::size_t j = 0; j < f; ++j) s += o.a(t, j) * w_down(i, j);
      o.y(t, i) = s;
    }
  }
  if (fast) o.y = linear<R>(o.a, w_down, b_down, {}, path).value;
  return o;
}

// The backward, from the forward's values and dy [tokens, H].
template <HighPrecision R = hp>
MlpGrads<R> mlp_backward(const Tensor<R>& x, const Tensor<R>& w_up, const Tensor<R>& w_down,
                         const MlpForward<R>& fwd, bool has_bias, const Tensor<R>& dy,
                         Activation act, ContractionPath path = default_contraction_path()) {
  detail::require_mlp_shapes(act, x, w_up, w_down);
  const std::size_t n = x.dim(0), hid = x.dim(1), f = w_down.dim(1), kf = w_up.dim(0);
  const bool fast = path != ContractionPath::plain;  // products by contraction()
  MlpGrads<R> g;
  const std::size_t all_hidden[] = {hid};
  g.da = fast ? contraction<R>(dy, row_major_layout(n, hid), w_down, row_major_layout(hid, f),
                               all_hidden, path)
                    .value
              : Tensor<R>({n, f});
  g.dh = Tensor<R>({n, kf});
  g.dx = Tensor<R>({n, hid});
  g.dw_up = Tensor<R>({kf, hid});
  g.dw_down = Tensor<R>({hid, f});
  if (has_bias) {
    g.db_up = Tensor<R>({kf});
    g.db_down = Tensor<R>({hid});
  }
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t j = 0; j < f; ++j) {
      R s(0);
      if (fast) {
        s = g.da(t, j);
      } else {
        for (std::size_t i = 0; i < hid; ++i) s += dy(t, i) * w_down(i, j);
        g.da(t, j) = s;
      }
      if (act == Activation::swiglu) {
        const R& gate = fwd.h(t, j);
        const R& up = fwd.h(t, f + j);
        g.dh(t, j) = s * up * silu_grad(gate);
        g.dh(t, f + j) = s * silu(gate);
      } else {
        g.dh(t, j) = activation_grad(act, fwd.h(t, j)) * s;
      }
    }
    for (std::size_t i = 0; i < hid && !fast; ++i) {
      R s(0);
      for (std::size_t j = 0; j < kf; ++j) s += g.dh(t, j) * w_up(j, i);
      g.dx(t, i) = s;
    }
  }
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t j = 0; j < kf; ++j) {
      for (std::size_t i = 0; i < hid && !fast; ++i) g.dw_up(j, i) += g.dh(t, j) * x(t, i);
      if (has_bias) g.db_up[j] += g.dh(t, j);
    }
    for (std::size_t i = 0; i < hid; ++i) {
      for (std::size_t j = 0; j < f && !fast; ++j) g.dw_down(i, j) += dy(t, i) * fwd.a(t, j);
      if (has_bias) g.db_down[i] += dy(t, i);
    }
  }
  if (fast) {
    const std::size_t all_ffn[] = {kf}, all_tokens[] = {n};
    g.dx = contraction<R>(g.dh, row_major_layout(n, kf), w_up, row_major_layout(kf, hid), all_ffn,
                          path)
               .value;
    g.dw_up = contraction<R>(g.dh, transposed_layout(kf, n), x, row_major_layout(n, hid),
                             all_tokens, path)
                  .value;
    g.dw_down = contraction<R>(dy, transposed_layout(hid, n), fwd.a, row_major_layout(n, f),
                               all_tokens, path)
                    .value;
  }
  return g;
}

}  // namespace shardcheck::reference
