// The MLP block (ops/mlp/mlp.hpp): the activation layer, the dense op, the fused fc1 split, and
// ParallelMLP on one rank, composed of column_parallel_linear and row_parallel_linear. The
// shape checks' messages reuse the linear family's helpers (ops/linear/linear_internal.hpp).
#include "ops/mlp/mlp.hpp"

#include "ops/linear/linear_internal.hpp"
#include "runtime/errors.hpp"

#include <string>

namespace shardcheck {

using linear_detail::block_column_config;
using linear_detail::block_row_config;
using linear_detail::on_rank;
using linear_detail::pieces;
using linear_detail::require_2d;
using linear_detail::str;

namespace {

template <class A>
A activation_value(Activation act, A x) {
  return act == Activation::gelu ? gelu(x) : gelu_tanh(x);
}
template <class A>
A activation_grad(Activation act, A x) {
  return act == Activation::gelu ? gelu_grad(x) : gelu_tanh_grad(x);
}

// n, the features a produces from h: h's columns / k. @throws UsageError for swiglu's odd h.
template <class T>
std::size_t activation_features(const std::string& where, const Tensor<T>& h, Activation act) {
  require_2d(where, "h", h, act == Activation::swiglu ? "[tokens, 2·n]" : "[tokens, n]");
  const std::size_t k = up_rows_per_feature(act);
  if (h.dim(1) % k != 0) {
    throw UsageError(where + "h is " + format_shape(h.shape()) +
                     " but swiglu's pre-activation is [tokens, 2·n], the gate columns then the "
                     "up columns; pass the output of the fused [Wg_r; Wu_r] projection");
  }
  return h.dim(1) / k;
}

}  // namespace

template <class T>
Tensor<T> mlp_activation(const Tensor<T>& h, Activation act) {
  using A = acc_t<T>;
  const std::size_t n = activation_features("mlp_activation: ", h, act);
  const std::size_t tokens = h.dim(0), cols = h.dim(1);
  Tensor<T> a(Shape{tokens, n});
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t j = 0; j < n; ++j) {
      const A v = static_cast<A>(h[t * cols + j]);
      a[t * n + j] =
          static_cast<T>(act == Activation::swiglu ? silu(v) * static_cast<A>(h[t * cols + n + j])
                                                   : activation_value(act, v));
    }
  }
  return a;
}

template <class T>
Tensor<T> mlp_activation_backward(const Tensor<T>& h, Activation act, const Tensor<T>& da) {
  using A = acc_t<T>;
  const std::string where = "mlp_activation_backward: ";
  const std::size_t n = activation_features(where, h, act);
  if (da.shape() != Shape({h.dim(0), n})) {
    throw UsageError(where + "da is " + format_shape(da.shape()) + " but h is " +
                     format_shape(h.shape()) + "; da must be [tokens, " + str(n) +
                     "], the gradient of the activation's output");
  }
  const std::size_t tokens = h.dim(0), cols = h.dim(1);
  Tensor<T> dh(h.shape());
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t j = 0; j < n; ++j) {
      const A d = static_cast<A>(da[t * n + j]);
      const A v = static_cast<A>(h[t * cols + j]);
      if (act == Activation::swiglu) {
        const A u = static_cast<A>(h[t * cols + n + j]);
        dh[t * cols + j] = static_cast<T>(d * u * silu_grad(v));
        dh[t * cols + n + j] = static_cast<T>(d * silu(v));
      } else {
        dh[t * cols + j] = static_cast<T>(activation_grad(act, v) * d);
      }
    }
  }
  return dh;
}

namespace {

// x [tokens, H], w_up [k·n, H], w_down [H, n], biases both empty or [k·n] and [H].
template <class T>
void require_mlp_shapes(const std::string& where, Activation act, const Tensor<T>& x,
                        const Tensor<T>& w_up, const Tensor<T>* b_up, const Tensor<T>& w_down,
                        const Tensor<T>* b_down, const char* x_shape) {
  require_2d(where, "x", x, x_shape);
  require_2d(where, "w_up", w_up, "[k·F_r, H]");
  require_2d(where, "w_down", w_down, "[H, F_r]");
  const std::size_t k = up_rows_per_feature(act);
  if (w_up.dim(1) != x.dim(1) || w_down.dim(0) != x.dim(1) || w_up.dim(0) != k * w_down.dim(1)) {
    throw UsageError(where + "x is " + format_shape(x.shape()) + ", w_up " +
                     format_shape(w_up.shape()) + " and w_down " + format_shape(w_down.shape()) +
                     " but " + std::string(name(act)) + " needs w_up [" + str(k) + "·F_r, H] and " +
                     "w_down [H, F_r] with H = x.dim(1) = " + str(x.dim(1)) +
                     (k == 2 ? " (w_up the fused [Wg_r; Wu_r])" : ""));
  }
  if (b_up == nullptr) return;
  const bool ok_up = b_up->empty() || b_up->shape() == Shape({w_up.dim(0)});
  const bool ok_down = b_down->empty() || b_down->shape() == Shape({x.dim(1)});
  // A rank with no ffn features holds an empty b_up even with bias: only its shape is checked.
  const bool mismatch = w_up.dim(0) != 0 && b_up->empty() != b_down->empty();
  if (!ok_up || !ok_down || mismatch) {
    throw UsageError(where + "b_up is " + format_shape(b_up->shape()) + " and b_down " +
                     format_shape(b_down->shape()) + " with w_up " + format_shape(w_up.shape()) +
                     "; pass both empty (no bias) or b_up [" + str(w_up.dim(0)) + "] and b_down [" +
                     str(x.dim(1)) + "]");
  }
}

}  // namespace

template <class T>
MlpForward<T> mlp(const Tensor<T>& x, const Tensor<T>& w_up, const Tensor<T>& b_up,
                  const Tensor<T>& w_down, const Tensor<T>& b_down, Activation act, Kernel kernel) {
  require_mlp_shapes("mlp: ", act, x, w_up, &b_up, w_down, &b_down, "[tokens, H]");
  MlpForward<T> out;
  out.h = linear(x, w_up, b_up, kernel);
  out.y = linear(mlp_activation(out.h, act), w_down, b_down, kernel);
  return out;
}

template <class T>
MlpGrads<T> mlp_backward(const Tensor<T>& x, const Tensor<T>& w_up, const Tensor<T>& w_down,
                         const MlpForward<T>& saved, bool has_bias, const Tensor<T>& dy,
                         Activation act, Kernel kernel) {
  require_mlp_shapes<T>("mlp_backward: ", act, x, w_up, nullptr, w_down, nullptr, "[tokens, H]");
  auto down = linear_backward(mlp_activation(saved.h, act), w_down, has_bias, dy, kernel);
  auto up =
      linear_backward(x, w_up, has_bias, mlp_activation_backward(saved.h, act, down.dx), kernel);
  return {std::move(up.dx), std::move(up.dw), std::move(up.db), std::move(down.dw),
          std::move(down.db)};
}

template <class T>
Tensor<T> split_fused_up(const Tensor<T>& w, Activation act, const SplitPolicy& ffn_split,
                         int parts, int rank) {
  const std::size_t k = up_rows_per_feature(act);
  if (w.ndim() < 1 || w.dim(0) % k != 0) {
    throw UsageError("split_fused_up: w is " + format_shape(w.shape()) +
                     " but swiglu's fused fc1 has 2·F rows ([Wg; Wu]); pass the concatenation "
                     "of the gate and up weights (or biases)");
  }
  if (k == 1) return split_by_tokens(w, ffn_split, parts, rank);  // rows of w: its features
  const std::size_t f = w.dim(0) / 2;
  const auto ps =
      pieces("split_fused_up: ", "the F = " + str(f) + " ffn features", ffn_split, f, parts);
  const Piece p = ps.at(static_cast<std::size_t>(rank));
  const Piece gate = p, up{f + p.offset, p.size};
  Tensor<T> g = linear_detail::take_rows(w, gate), u = linear_detail::take_rows(w, up);
  Shape shape = w.shape();
  shape[0] = 2 * p.size;
  Tensor<T> out(shape);
  std::copy(g.values().begin(), g.values().end(), out.values().begin());
  std::copy(u.values().begin(), u.values().end(), out.values().begin() + g.size());
  return out;
}

ColumnParallelConfig fc1_config(const MlpConfig& cfg) {
  return block_column_config(cfg.tokens, cfg.sequence_parallel, cfg.token_split,
                             cfg.reduce_algorithm, cfg.kernel);
}

RowParallelConfig fc2_config(const MlpConfig& cfg) {
  return block_row_config(cfg.sequence_parallel, cfg.token_split, cfg.reduce_algorithm, cfg.kernel);
}

template <class T>
MlpForward<T> parallel_mlp(Communicator& tp, const MlpConfig& cfg, const Tensor<T>& x,
                           const Tensor<T>& w_up_shard, const Tensor<T>& b_up_shard,
                           const Tensor<T>& w_down_shard, const Tensor<T>& b_down) {
  const std::string where = on_rank("parallel_mlp", tp);
  require_mlp_shapes(where, cfg.activation, x, w_up_shard, &b_up_shard, w_down_shard, &b_down,
                     cfg.sequence_parallel ? "[tokens_r, H] (sequence_parallel)" : "[tokens, H]");
  const auto ps = pieces(where, "cfg.ffn_features = " + str(cfg.ffn_features) + " ffn features",
                         cfg.ffn_split, cfg.ffn_features, tp.size());
  const std::size_t f_r = ps.at(static_cast<std::size_t>(tp.rank())).size;
  if (w_down_shard.dim(1) != f_r) {
    throw UsageError(where + "w_down_shard is " + format_shape(w_down_shard.shape()) +
                     " but ffn_split " + cfg.ffn_split.to_string() + " gives this rank " +
                     str(f_r) + " of cfg.ffn_features = " + str(cfg.ffn_features) +
                     " features; give rank k split_fused_up(w_up, act, ffn_split, P, k) and "
                     "split_weight_by_input_features(w_down, ffn_split, P, k), and set "
                     "cfg.ffn_features to the global ffn size");
  }
  MlpForward<T> out;
  out.h = column_parallel_linear(tp, fc1_config(cfg), x, w_up_shard, b_up_shard).y;
  out.y = row_parallel_linear(tp, fc2_config(cfg), mlp_activation(out.h, cfg.activation),
                              w_down_shard, b_down)
              .y;
  return out;
}

template <class T>
MlpGrads<T> parallel_mlp_backward(Communicator& tp, const MlpConfig& cfg, const Tensor<T>& x,
                                  const Tensor<T>& w_up_shard, const Tensor<T>& w_down_shard,
                                  const MlpForward<T>& saved, bool has_bias, const Tensor<T>& dy) {
  const std::string where = on_rank("parallel_mlp_backward", tp);
  require_mlp_shapes<T>(
      where, cfg.activation, x, w_up_shard, nullptr, w_down_shard, nullptr,
      cfg.sequence_parallel ? "[tokens_r, H] (sequence_parallel)" : "[tokens, H]");
  if (saved.h.ndim() != 2 || saved.h.dim(1) != w_up_shard.dim(0)) {
    throw UsageError(where + "saved.h is " + format_shape(saved.h.shape()) + " but w_up_shard is " +
                     format_shape(w_up_shard.shape()) +
                     "; pass the MlpForward that parallel_mlp returned on this rank");
  }
  auto gd = row_parallel_linear_backward(
      tp, fc2_config(cfg), mlp_activation(saved.h, cfg.activation), w_down_shard, has_bias, dy);
  const Tensor<T> dh = mlp_activation_backward(saved.h, cfg.activation, gd.dx);
  auto gu = column_parallel_linear_backward(tp, fc1_config(cfg), x, w_up_shard, has_bias, dh);
  return {std::move(gu.dx), std::move(gu.dw), std::move(gu.db), std::move(gd.dw), std::move(gd.db)};
}

#define SHARDCHECK_INSTANTIATE(T)                                                                  \
  template Tensor<T> mlp_activation<T>(const Tensor<T>&, Activation);                              \
  template Tensor<T> mlp_activation_backward<T>(const Tensor<T>&, Activation, const Tensor<T>&);   \
  template MlpForward<T> mlp<T>(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,              \
                                const Tensor<T>&, const Tensor<T>&, Activation, Kernel);           \
  template MlpGrads<T> mlp_backward<T>(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,       \
                                       const MlpForward<T>&, bool, const Tensor<T>&, Activation,   \
                                       Kernel);                                                    \
  template Tensor<T> split_fused_up<T>(const Tensor<T>&, Activation, const SplitPolicy&, int,      \
                                       int);                                                       \
  template MlpForward<T> parallel_mlp<T>(Communicator&, const MlpConfig&, const Tensor<T>&,        \
                                         const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,     \
                                         const Tensor<T>&);                                        \
  template MlpGrads<T> parallel_mlp_backward<T>(Communicator&, const MlpConfig&, const Tensor<T>&, \
                                                const Tensor<T>&, const Tensor<T>&,                \
                                                const MlpForward<T>&, bool, const Tensor<T>&);

SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck
