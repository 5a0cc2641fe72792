// The spec of model_train_step (ops/op_spec.hpp; the op: model.hpp) on the (pp, dp, cp, tp) mesh.
//
//   parameters  every dense parameter by name ("embedding", "layers.<l>.wq", ..., "output"),
//               its global shape, R over pp, dp and cp and its tp placement (S(0) by vocab_split
//               for embedding and output, by heads for wq/bq/wk/bk/wv/bv, S(1) by heads for wo,
//               S(0) by ffn_split (as [W_gate,r; W_up,r]) for w_up/b_up, S(1) for w_down, R for
//               the norms, bo and b_down), and each rank's local shape (a layer's tensors on its
//               stage only, the embedding on the first stage, the final norm and the output
//               projection on the last; a tied embedding's copy on the last stage when pp > 1)
//   gradients   "d" + the parameter's name, acc_t<T>, the parameter's placement and shapes
//   new         "new." + the parameter's name: the parameter after the step
//   loss        [1] acc_t<T> on the last stage; grad_norm, clip_coef [1] acc_t<T> everywhere
//   calls       each rank's collectives in the order model_train_step makes them: per
//               micro-batch the forward's (the embedding's, each layer's attention and MLP, the
//               norms', send/recv to the next stage, the head's), then per micro-batch in reverse
//               the backward's, then the finalize's all_reduces over dp × cp and the embedding
//               group, the loss's over dp × cp and the norm's over the model-parallel group
#pragma once

#include "ops/model/model.hpp"
#include "ops/op_spec.hpp"

#include <string>
#include <vector>

namespace shardcheck {

spec::OpSpec model_train_step_spec(const ModelConfig& cfg, const ModelParallelConfig& par,
                                   std::size_t sequences, std::size_t seq_len);

// Rank `world_rank`'s calls of the spec alone (the spec's calls[world_rank]), without the
// tensors' shapes: cheap at real model sizes (budget/, shardcheck budget).
spec::RankCalls model_train_step_calls(const ModelConfig& cfg, const ModelParallelConfig& par,
                                       std::size_t sequences, std::size_t seq_len, int world_rank);

// The configurations' fields (ops/field_table.hpp), the norm's kind written as "norm" and its eps
// flat: what to_json writes.
template <>
struct ConfigFields<ModelConfig> {
  using C = ModelConfig;
  static constexpr std::tuple fields = std::tuple_cat(
      SHARDCHECK_FIELDS_OF(C, vocab, hidden, heads, kv_heads, head_dim, ffn, layers),
      std::tuple{config_field("norm", &C::norm, &NormConfig::kind),
                 config_field("eps", &C::norm, &NormConfig::eps)},
      SHARDCHECK_FIELDS_OF(C, activation, linear_bias, tied_embedding, ignore_index));
};
SHARDCHECK_CONFIG_FIELDS(ModelParallelConfig, pp, dp, cp, tp, layer_split, batch_split,
                         micro_batches, micro_batch_split, cp_layout, seq_split, cp_algorithm,
                         sequence_parallel, token_split, kv_head_split, ffn_split, vocab_split,
                         reduce_algorithm);
SHARDCHECK_CONFIG_FIELDS(OptimizerConfig, learning_rate, max_grad_norm, clip_eps);

std::vector<spec::OpSpec> model_example_specs();

}  // namespace shardcheck
