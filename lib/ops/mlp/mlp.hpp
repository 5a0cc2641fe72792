// The MLP block: the dense op and Megatron-LM's tensor-parallel ParallelMLP, forward and backward.
//
// Shapes (PyTorch's convention), F = ffn features, H = hidden features:
//   x [tokens, H]; w_up [k·F, H]; b_up empty or [k·F]; w_down [H, F]; b_down empty or [H];
//   y [tokens, H]. k = 1 for gelu and gelu_tanh; k = 2 for swiglu, whose fused fc1 weight is
//   [Wg; Wu] (rows [0, F) the gate projection, rows [F, 2F) the up projection).
// Formulas (h = x·w_upᵀ + b_up, the pre-activation, [tokens, k·F]):
//   gelu       a = gelu(h) = h·Φ(h) = h/2·(1 + erf(h/√2))           (Hendrycks & Gimpel 2016,
//                                                                    PyTorch's default)
//   gelu_tanh  a = h/2·(1 + tanh(√(2/π)·(h + 0.044715·h³)))          (ibid., approximate='tanh')
//   swiglu     a = silu(g)·u with g = h[:, :F], u = h[:, F:], silu(g) = g·σ(g) (Shazeer 2020,
//              "GLU Variants Improve Transformer"; Megatron-LM's swiglu on the fused fc1)
//   y = a·w_downᵀ + b_down
// Backward, given dy [tokens, H]: da = dy·w_down; dw_down = dyᵀ·a; db_down = Σ_tokens dy;
//   dh = f'(h)⊙da (swiglu: dg = da⊙u⊙silu'(g), du = da⊙silu(g)); dx = dh·w_up;
//   dw_up = dhᵀ·x; db_up = Σ_tokens dh.
//
// Arithmetic, for every element type T (float64, float32, bfloat16, float16), A = acc_t<T>:
//   - both projections follow lib/ops/linear/linear.hpp (dots in A rounded once to T, the bias
//     added in T; the row-parallel partials rounded to T and reduced in T);
//   - the activation is evaluated in A from the rounded pre-activation h (in T) by the formulas
//     below (mlp_activation_value), and rounded once to T; swiglu's product silu(g)·u is one
//     more operation in A before that rounding. The backward's dh is evaluated in A from h and
//     da (in T) and rounded once to T. The evaluation's own error in A is bounded in
//     docs/mlp.md ("The bound") and checked against the high-precision functions by
//     properties/suites/mlp/mlp_reference_props.cpp.
//
// Sources: Shoeybi et al. 2019 (Megatron-LM) §3 (the MLP split: column-parallel fc1, row-parallel
// fc2, one all_reduce forward and one backward); Megatron-LM core/transformer/mlp.py (MLP, the
// fused gated fc1) and core/tensor_parallel/layers.py; Korthikanti et al. 2022 §4.2.2 for the
// sequence-parallel transitions (g = all_gather forward / reduce_scatter backward, ḡ the reverse).
#pragma once

#include "layout/split_policy.hpp"
#include "ops/linear/linear.hpp"
#include "ops/mlp/mlp_config.hpp"
#include "runtime/communicator.hpp"
#include "tensor/tensor.hpp"

#include <cmath>
#include <string_view>

namespace shardcheck {

// k: rows of the fused fc1 per ffn feature (2 for swiglu, else 1).
constexpr std::size_t up_rows_per_feature(Activation a) { return a == Activation::swiglu ? 2 : 1; }

// ---- the activation functions, evaluated in A (float or double) exactly as written ----
// gelu(x) = x/2·(1 + erf(x/√2)); gelu'(x) = Φ(x) + x·φ(x).
// gelu_tanh(x) = x/2·(1 + tanh(c·(x + 0.044715·x³))), c = √(2/π);
//   gelu_tanh'(x) = (1 + t)/2 + x/2·(1 − t²)·c·(1 + 3·0.044715·x²), t = tanh(c·(x + 0.044715·x³)).
// silu(x) = x/(1 + exp(−x)); silu'(x) = σ(x)·(1 + x·σ(−x)), σ(−x) = 1/(1 + exp(x)) computed
//   directly (not as 1 − σ(x), which cancels for large x).
template <class A>
A gelu(A x) {
  return A(0.5) * x * (A(1) + std::erf(x * A(0.70710678118654752440)));
}
template <class A>
A gelu_grad(A x) {
  const A cdf = A(0.5) * (A(1) + std::erf(x * A(0.70710678118654752440)));
  return cdf + x * (A(0.39894228040143267794) * std::exp(A(-0.5) * x * x));
}
template <class A>
A gelu_tanh(A x) {
  const A t = std::tanh(A(0.79788456080286535588) * (x + A(0.044715) * x * x * x));
  return A(0.5) * x * (A(1) + t);
}
template <class A>
A gelu_tanh_grad(A x) {
  const A t = std::tanh(A(0.79788456080286535588) * (x + A(0.044715) * x * x * x));
  return A(0.5) * (A(1) + t) +
         A(0.5) * x * (A(1) - t * t) * A(0.79788456080286535588) * (A(1) + A(3 * 0.044715) * x * x);
}
template <class A>
A silu(A x) {
  return x / (A(1) + std::exp(-x));
}
template <class A>
A silu_grad(A x) {
  const A s = A(1) / (A(1) + std::exp(-x));
  const A s_neg = A(1) / (A(1) + std::exp(x));
  return s * (A(1) + x * s_neg);
}

// ---- the activation layer on a rank's pre-activation ----

// a = act(h), each element evaluated in acc_t<T> and rounded once to T.
// @pre h [tokens, k·n] (swiglu: columns [0, n) the gate, [n, 2n) the up projection); returns
// a [tokens, n]. @throws UsageError when h is not 2-D or swiglu's h has an odd column count.
template <class T>
Tensor<T> mlp_activation(const Tensor<T>& h, Activation act);

// dh = act'(h)⊙da in acc_t<T>, rounded once to T. @pre da [tokens, n], h as above; returns
// dh [tokens, k·n] (swiglu: [dg | du]).
template <class T>
Tensor<T> mlp_activation_backward(const Tensor<T>& h, Activation act, const Tensor<T>& da);

// ---- the dense op ----

template <class T>
struct MlpForward {
  Tensor<T> y;  // [tokens, H], or this rank's token rows [tokens_r, H] with sequence_parallel
  Tensor<T> h;  // the pre-activation [tokens, k·F_r], saved for the backward (autograd's save)
};

template <class T>
struct MlpGrads {
  Tensor<T> dx;       // [tokens, H] (the token shard with sequence_parallel)
  Tensor<T> dw_up;    // [k·F_r, H]: the fused [dWg_r; dWu_r] for swiglu
  Tensor<T> db_up;    // [k·F_r], empty without bias
  Tensor<T> dw_down;  // [H, F_r]
  Tensor<T> db_down;  // [H], the full sum over tokens, empty without bias
};

// y = act(x·w_upᵀ + b_up)·w_downᵀ + b_down. @pre shapes as above; b_up and b_down both empty or
// both present (Megatron's add_bias_linear).
template <class T>
MlpForward<T> mlp(const Tensor<T>& x, const Tensor<T>& w_up, const Tensor<T>& b_up,
                  const Tensor<T>& w_down, const Tensor<T>& b_down, Activation act,
                  Kernel kernel = Kernel::deterministic);

// Gradients of mlp() given the saved forward and dy [tokens, H].
template <class T>
MlpGrads<T> mlp_backward(const Tensor<T>& x, const Tensor<T>& w_up, const Tensor<T>& w_down,
                         const MlpForward<T>& saved, bool has_bias, const Tensor<T>& dy,
                         Activation act, Kernel kernel = Kernel::deterministic);

// ---- splitting the dense parameters (each rank's piece) ----

// Rank r's rows of the fused fc1 weight [k·F, H] (or bias [k·F]) under ffn_split: for gelu the
// rows of its ffn features; for swiglu the concatenation [Wg_r; Wu_r] of its gate rows and its up
// rows, each the piece of F under ffn_split (NOT a contiguous chunk of [Wg; Wu], which would
// give rank 0 only gate rows). @throws UsageError when w's rows are not k·F.
template <class T>
Tensor<T> split_fused_up(const Tensor<T>& w, Activation act, const SplitPolicy& ffn_split,
                         int parts, int rank);

// ---- tensor-parallel: ParallelMLP ----

struct MlpConfig {
  Activation activation = Activation::gelu;
  std::size_t ffn_features = 0;                  // F, the global ffn size (required)
  SplitPolicy ffn_split = SplitPolicy::chunk();  // the ffn features over the tp ranks
  std::size_t tokens = 0;                        // the global tokens (with sequence_parallel)
  // x arrives as a token shard: all_gather it forward / reduce_scatter dx backward (g), and the
  // output leaves as a token shard: reduce_scatter y forward / all_gather dy backward (ḡ).
  bool sequence_parallel = false;
  SplitPolicy token_split = SplitPolicy::chunk();
  Algorithm reduce_algorithm = Algorithm::ring;
  Kernel kernel = Kernel::deterministic;
};

// The configurations of the two linear layers ParallelMLP is made of: fc1 column-parallel without
// gather_output (its output stays the rank's ffn features), with sequence_parallel_input under
// sequence parallelism; fc2 row-parallel with input_is_parallel, with sequence_parallel_output
// under sequence parallelism. Both take cfg's token split, reduction algorithm and kernel.
ColumnParallelConfig fc1_config(const MlpConfig& cfg);
RowParallelConfig fc2_config(const MlpConfig& cfg);

// Forward on one rank: h = column_parallel_linear(x, w_up_shard, b_up_shard) (all_gather of x
// along tokens with sequence_parallel), a = mlp_activation(h) on the rank's ffn features only
// (no collective: the activation is elementwise, so it is applied to complete pre-activations,
// never to a partial sum), y = row_parallel_linear(a, w_down_shard, b_down): the partial
// a_r·W_down,rᵀ rounded to T, all_reduced (reduce_scatter along tokens with sequence_parallel),
// b_down added once after the reduction.
// Pieces: x [tokens, H] identical on every rank, or rank r's token rows [tokens_r, H];
// w_up_shard = split_fused_up(w_up, act, ffn_split, P, r) [k·F_r, H]; b_up_shard its [k·F_r] or
// empty; w_down_shard [H, F_r] = split_weight_by_input_features(w_down, ffn_split, P, r);
// b_down the full [H] or empty. y: [tokens, H] bit-identical on every rank (all_reduce), or
// rank r's token rows with sequence_parallel.
// @throws UsageError naming the rank, the shapes and what to pass.
template <class T>
MlpForward<T> parallel_mlp(Communicator& tp, const MlpConfig& cfg, const Tensor<T>& x,
                           const Tensor<T>& w_up_shard, const Tensor<T>& b_up_shard,
                           const Tensor<T>& w_down_shard, const Tensor<T>& b_down);

// Backward on one rank, from the forward's `saved` h and dy (the full [tokens, H], or this rank's
// token rows with sequence_parallel). Collectives: all_gather of dy along tokens (sequence
// parallel; row_parallel_linear_backward), all_gather of x along tokens for dw_up (sequence
// parallel), then dx all_reduced, or reduce_scattered along tokens with sequence_parallel
// (column_parallel_linear_backward). da and dh stay on the rank. Returns MlpGrads: dw_up, db_up,
// dw_down the rank's pieces; db_down and (without sequence_parallel) dx bit-identical on every
// rank.
template <class T>
MlpGrads<T> parallel_mlp_backward(Communicator& tp, const MlpConfig& cfg, const Tensor<T>& x,
                                  const Tensor<T>& w_up_shard, const Tensor<T>& w_down_shard,
                                  const MlpForward<T>& saved, bool has_bias, const Tensor<T>& dy);

}  // namespace shardcheck
