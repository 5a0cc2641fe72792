// Normalization over the hidden (last) dimension: LayerNorm (with and without bias) and RMSNorm,
// forward and backward, dense and sequence-parallel (tokens sharded over the ranks).
//
// Shapes (PyTorch's convention, elementwise_affine = True): x [tokens, hidden], gamma [hidden],
// beta [hidden] (layer_norm only; empty otherwise), y [tokens, hidden].
// Per token t, n = hidden:
//   layer_norm     mean = (Σ_i x_i)/n, d_i = x_i − mean, var = (Σ_i d_i²)/n (biased, as
//                  torch.nn.LayerNorm), rstd = 1/sqrt(var + eps), xhat_i = d_i·rstd,
//                  y_i = xhat_i·gamma_i + beta_i (no beta for layer_norm_no_bias: bias=False)
//   rms_norm       ms = (Σ_i x_i²)/n, rstd = 1/sqrt(ms + eps), xhat_i = x_i·rstd,
//                  y_i = xhat_i·gamma_i (torch.nn.RMSNorm)
// Gradients given dy [tokens, hidden], g_i = dy_i·gamma_i:
//   layer_norm     c1 = (Σ g_i)/n, c2 = (Σ g_i·xhat_i)/n, dx_i = ((g_i − c1) − xhat_i·c2)·rstd
//   rms_norm       c2 = (Σ g_i·xhat_i)/n,                  dx_i = (g_i − xhat_i·c2)·rstd
//   dgamma_j = Σ_t dy_tj·xhat_tj,  dbeta_j = Σ_t dy_tj   (sums over tokens)
//
// Arithmetic, for every element type T (float64, float32, bfloat16, float16), A = acc_t<T>
// (runtime/dtype.hpp: float64 for float64, float32 otherwise):
//   - x, gamma, beta, dy are converted to A (exact); eps is converted to A once (so the
//     reference must use A(eps), not eps);
//   - every step above is one operation in A, sums in index order (i ascending, t ascending),
//     in exactly the parenthesization written; rstd is a divide of 1 by a sqrt;
//   - y and dx are rounded once from A to T; dgamma/dbeta are rounded once to T per rank (a
//     partial sum over the rank's tokens) and then summed in T across the sequence-parallel
//     ranks by all_reduce (each step one rounding to T, runtime/reduce_op.hpp).
// The forward and dx are local per token, so a sharded rank reproduces the dense op's bits for
// its tokens. gamma/beta are replicated parameters; each rank's dgamma/dbeta is a partial sum
// over its tokens and must be SUMMED over the sequence-parallel group (not averaged: gpt-neox
// #1259 averaged and LN weights learnt TP× slower). After the all_reduce they are bit-identical
// on every rank.
//
// Sources: Ba, Kiros, Hinton 2016 (LayerNorm); Zhang & Sennrich 2019 (RMSNorm); Korthikanti et
// al. 2022 §4.2.2 (sequence parallelism); Megatron-LM's sequence-parallel LayerNorm gradient
// all-reduce (allreduce_layernorm_grads / _allreduce_layernorm_grads).
#pragma once

#include "layout/split_policy.hpp"
#include "ops/linear/linear.hpp"
#include "ops/norm/norm_config.hpp"
#include "runtime/communicator.hpp"
#include "tensor/tensor.hpp"

#include <string>

namespace shardcheck {

// True for the kind that has beta (and dbeta).
constexpr bool has_beta(NormKind k) { return k == NormKind::layer_norm; }

template <class T>
struct NormGrads {
  Tensor<T> dx;      // [tokens, hidden] (a rank's token shard under sequence parallelism)
  Tensor<T> dgamma;  // [hidden]
  Tensor<T> dbeta;   // [hidden], empty without beta
};

// ---- the dense op (also each rank's local compute) ----

// y [tokens, hidden]. @pre x [tokens, hidden] with hidden ≥ 1, gamma [hidden], beta [hidden]
// for layer_norm and empty otherwise, cfg.eps > 0. @throws UsageError otherwise.
template <class T>
Tensor<T> norm_forward(const NormConfig& cfg, const Tensor<T>& x, const Tensor<T>& gamma,
                       const Tensor<T>& beta);

// Gradients given dy [tokens, hidden]. dgamma/dbeta are the sums over ALL of x's tokens.
template <class T>
NormGrads<T> norm_backward(const NormConfig& cfg, const Tensor<T>& x, const Tensor<T>& gamma,
                           const Tensor<T>& dy);

// ---- sequence-parallel: tokens split over the ranks, hidden features whole ----

struct SequenceParallelNormConfig {
  NormConfig norm;
  // The global token count and its split, known to every rank (the counts of the reduction do
  // not depend on them, but each rank's shard is checked against its piece).
  std::size_t tokens = 0;
  SplitPolicy token_split = SplitPolicy::chunk();
  Algorithm reduce_algorithm = Algorithm::ring;  // for the dgamma/dbeta all_reduce
};

// Forward on one rank: the dense op on its tokens; no collective. x_shard [tokens_r, hidden]
// (tokens_r may be 0), gamma/beta the full replicated parameters.
template <class T>
Tensor<T> sequence_parallel_norm(Communicator& sp, const SequenceParallelNormConfig& cfg,
                                 const Tensor<T>& x_shard, const Tensor<T>& gamma,
                                 const Tensor<T>& beta);

// Backward on one rank: dx for its tokens (local), and dgamma/dbeta summed over every rank's
// tokens by ONE all_reduce(sum) of [hidden] (dgamma) or [2·hidden] (dgamma and dbeta in one
// buffer) elements of T. @post dgamma and dbeta are bit-identical on every rank.
template <class T>
NormGrads<T> sequence_parallel_norm_backward(Communicator& sp,
                                             const SequenceParallelNormConfig& cfg,
                                             const Tensor<T>& x_shard, const Tensor<T>& gamma,
                                             const Tensor<T>& dy_shard);

// ---- the Megatron-LM sequence-parallel block's linear layers ----
//
// The block (Korthikanti et al. 2022, Fig. 5): the sequence-parallel norm on each rank's token
// shard → a column-parallel linear with sequence_parallel_input (g: all_gather of the tokens
// forward, reduce_scatter of dx backward) → a row-parallel linear with sequence_parallel_output
// (ḡ: reduce_scatter of the partial outputs to token shards forward, all_gather of dy
// backward). The ffn features are split over the same ranks as the tokens; no linear biases.
// The two configurations below derive the linears' settings from the norm's, so every user of
// the block (the ops, the memory and traffic models, the suites) describes the same layers.

// The column-parallel linear [hidden → ffn]: out_features = ffn, out_split = ffn_split,
// tokens / token_split from norm, all_reduce_algorithm = norm.reduce_algorithm,
// sequence_parallel_input = true, gather_output = false (y stays the ffn shard), kernel as
// given; every other field its ColumnParallelConfig default.
ColumnParallelConfig sp_block_column_config(const SequenceParallelNormConfig& norm, std::size_t ffn,
                                            const SplitPolicy& ffn_split,
                                            Kernel kernel = Kernel::deterministic);

// The row-parallel linear [ffn → hidden]: in_split = ffn_split, input_is_parallel = true (x is
// the column-parallel layer's ffn shard), sequence_parallel_output = true, token_split from
// norm, reduce_algorithm = norm.reduce_algorithm, kernel as given.
RowParallelConfig sp_block_row_config(const SequenceParallelNormConfig& norm,
                                      const SplitPolicy& ffn_split,
                                      Kernel kernel = Kernel::deterministic);

}  // namespace shardcheck
