// The library's own activation model: what each partitioned op of lib/ops keeps for its
// backward and the temporary peak of its collective buffers, term by term, per rank, in bytes.
// The second model beside Korthikanti et al.'s Table 2 (activation_memory.hpp): that one
// counts a Megatron transformer layer's stored activations; this one counts what OUR ops
// allocate, exactly, and is checked byte for byte against the tracker (live_bytes.hpp) on real
// sharded runs (properties/budget/).
//
// Both are declared once, in the op's spec (lib/ops/<family>/<family>_spec.cpp, ops/op_spec.hpp);
// this file sizes them in bytes for one rank and one element type:
// kept     the tensors the backward takes as input that the forward produced or received
//          (parameters excluded): the caller holds them between the passes. The spec's `kept`
//          list, each rank's local piece of each.
// peaks    the most bytes of the collective buffers (live_bytes.hpp lists them) live at once
//          during the forward, and during the backward: the spec's `buffers`, the first moment
//          of the pass with the most bytes; the terms are the buffers live at that moment.
//          Outputs, kept tensors and kernels' working memory are not in the peaks.
//
// What the specs' kept tensors and moments come to in closed form, op by op (with e = sizeof(T),
// a = sizeof(acc_t<T>) and each rank's piece under the op's split): the table of docs/budget.md,
// "The library's own activation model". It is written there once; the spec files are the
// declaration and properties/budget/ measures both against the tracker.
#pragma once

#include "budget/traffic.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace shardcheck::budget {

struct Term {
  std::string name;  // "all_gathered x [tokens, in]"
  std::uint64_t bytes = 0;
};
std::uint64_t sum(const std::vector<Term>& terms);

struct OpActivations {
  std::vector<Term> kept;           // for the backward
  std::vector<Term> forward_peak;   // collective buffers live at the forward's peak
  std::vector<Term> backward_peak;  // and at the backward's
  std::uint64_t kept_bytes() const { return sum(kept); }
  std::uint64_t forward_peak_bytes() const { return sum(forward_peak); }
  std::uint64_t backward_peak_bytes() const { return sum(backward_peak); }
};

// The same arguments as the traffic functions of traffic.hpp.
OpActivations column_parallel_activations(const ColumnParallelConfig& cfg, std::size_t tokens,
                                          std::size_t in, std::size_t out, int p, int r,
                                          ElementBytes e);
OpActivations row_parallel_activations(const RowParallelConfig& cfg, std::size_t tokens,
                                       std::size_t in, std::size_t out, int p, int r,
                                       ElementBytes e);
OpActivations sp_norm_activations(const SequenceParallelNormConfig& cfg, std::size_t hidden, int p,
                                  int r, ElementBytes e);
OpActivations sp_block_activations(const SequenceParallelNormConfig& norm, std::size_t hidden,
                                   std::size_t ffn, const SplitPolicy& ffn_split, int p, int r,
                                   ElementBytes e);
OpActivations parallel_mlp_activations(const MlpConfig& cfg, std::size_t tokens, std::size_t hidden,
                                       bool has_bias, int p, int r, ElementBytes e);
OpActivations vocab_embedding_activations(const VocabEmbeddingConfig& cfg, std::size_t tokens,
                                          std::size_t hidden, int p, int r, ElementBytes e);
OpActivations vocab_cross_entropy_activations(const VocabCrossEntropyConfig& cfg,
                                              std::size_t tokens, int p, int r, ElementBytes e);
OpActivations cp_attention_activations(const AttentionConfig& cfg, const ContextParallelConfig& cc,
                                       std::size_t batch, int p, int r, ElementBytes e);
// grads_reduced_over_cp = false: the layer as attention_layer_spec_grads_left_to_caller declares
// it (ops/attention/attention_spec.hpp), for a caller that sums the gradients over dp × cp
// itself, as the model's finalize does.
OpActivations head_layer_activations(const HeadParallelConfig& cfg, std::size_t batch, int tp,
                                     int tp_rank, int cp, int cp_rank, ElementBytes e,
                                     bool grads_reduced_over_cp = true);

}  // namespace shardcheck::budget
