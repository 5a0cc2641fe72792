// The model family's configuration as the model defines it: the data types the library
// (model.hpp), the reference (reference/model/) and the suite (properties/suites/model/) share,
// declared once. Data only: enums and structs of fields, no op logic (cmake/check_layering.cmake).
// How the model is partitioned over a mesh is the library's business: ModelParallelConfig
// (model.hpp) adds it.
//
// The model: a decoder-only transformer (GPT-2 / Llama shape), pre-norm, causal self-attention:
//   x_0     = E[ids]                                  E [V, H], ids [B, L]
//   per layer l = 0 .. layers−1:
//     h_l   = x_l + attention_l(norm1_l(x_l))         (ops/attention/head_parallel_attention.hpp)
//     x_l+1 = h_l + mlp_l(norm2_l(h_l))               (ops/mlp/mlp.hpp)
//   f       = final_norm(x_layers)
//   logits  = f·Wᵀ                                    W = E when tied_embedding, else W_out [V, H]
//   loss    = Σ_{tokens t, target_t ≠ ignore_index} (logsumexp(logits_t) − logits_t[target_t]) / N
//             N = the number of such tokens in the whole batch (0 when there are none: loss 0)
// and one optimizer step on the loss's gradient g (every parameter's):
//   coef    = max_grad_norm > 0 and max_grad_norm/(‖g‖₂ + clip_eps) < 1 ? that ratio : 1
//   p'      = p − learning_rate·coef·g                (SGD after clipping by the global norm)
// ‖g‖₂ counts every parameter once (a tied embedding once). Megatron-LM's clip_grad_norm_fp32
// and optimizer step; Shoeybi et al. 2019; docs/model.md.
#pragma once

#include "ops/mlp/mlp_config.hpp"
#include "ops/norm/norm_config.hpp"
#include "tensor/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace shardcheck {

struct ModelConfig {
  std::size_t vocab = 1;     // V
  std::size_t hidden = 1;    // H
  std::size_t heads = 1;     // h query heads
  std::size_t kv_heads = 1;  // g key/value heads, g divides h
  std::size_t head_dim = 1;  // d (the heads' width h·d need not equal H)
  std::size_t ffn = 1;       // F, the MLP's hidden size
  std::size_t layers = 1;    // transformer layers (0: embedding, final norm and loss only)
  NormConfig norm;           // every norm: before attention, before the MLP, and the final one
  Activation activation = Activation::gelu;
  bool linear_bias = false;     // the attention's and the MLP's linear biases
  bool tied_embedding = false;  // the output projection is E (W = E, one parameter)
  std::optional<std::int64_t> ignore_index = -100;  // targets equal to it count nowhere
};

// One transformer layer's parameters (dense, or one rank's shards: model.hpp's
// shard_model_params), in PyTorch's [out, in] convention; biases empty without linear_bias,
// betas empty unless layer_norm.
template <class T>
struct TransformerLayerParams {
  Tensor<T> norm1_gamma, norm1_beta;  // [H]
  Tensor<T> wq, bq;                   // [h·d, H], [h·d]
  Tensor<T> wk, bk, wv, bv;           // [g·d, H], [g·d]
  Tensor<T> wo, bo;                   // [H, h·d], [H]
  Tensor<T> norm2_gamma, norm2_beta;  // [H]
  Tensor<T> w_up, b_up;               // [k·F, H], [k·F]: k = 2 for swiglu ([W_gate; W_up])
  Tensor<T> w_down, b_down;           // [H, F], [H]
};

// f(every member), in declaration order (the check engine sends a rank's results between MPI
// processes member by member).
template <class T, class F>
void fields(TransformerLayerParams<T>& o, F&& f) {
  f(o.norm1_gamma, o.norm1_beta, o.wq, o.bq, o.wk, o.bk, o.wv, o.bv, o.wo, o.bo, o.norm2_gamma,
    o.norm2_beta, o.w_up, o.b_up, o.w_down, o.b_down);
}
static_assert(sizeof(TransformerLayerParams<double>) == 16 * sizeof(Tensor<double>));

// The model's parameters: embedding E [V, H], the layers, the final norm [H], and the output
// projection W_out [V, H] (empty when tied_embedding: W = E). The same struct of acc_t<T> (or
// high-precision) tensors holds gradients.
template <class T>
struct ModelParams {
  Tensor<T> embedding;
  std::vector<TransformerLayerParams<T>> layers;
  Tensor<T> final_gamma, final_beta;
  Tensor<T> output;
};

// f(every member), in declaration order (the check engine sends a rank's results between MPI
// processes member by member).
template <class T, class F>
void fields(ModelParams<T>& o, F&& f) {
  f(o.embedding, o.layers, o.final_gamma, o.final_beta, o.output);
}

// One global batch: `sequences` sequences of `seq_len` tokens, row-major [sequences, seq_len].
// targets[b, t] is the id the model must predict at position t (the next token, already
// shifted by the caller), or ignore_index.
struct ModelBatch {
  std::size_t sequences = 0;          // B
  std::size_t seq_len = 0;            // L
  std::vector<std::int64_t> ids;      // [B·L], each in [0, V)
  std::vector<std::int64_t> targets;  // [B·L], each in [0, V) or ignore_index
};

// The optimizer step after the backward.
struct OptimizerConfig {
  double learning_rate = 1;  // SGD (1: the step is p − coef·g, so a gradient bug shows whole)
  double max_grad_norm = 0;  // clip by the global L2 norm when > 0; 0: no clipping
  double clip_eps = 1e-6;    // coef = max_grad_norm / (‖g‖₂ + clip_eps), as Megatron-LM
};

}  // namespace shardcheck
