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
// What the specs' moments come to, with e = sizeof(T), a = sizeof(acc_t<T>), p ranks, rank r,
// n_r this rank's piece of n under the op's split (uneven and empty pieces included):
//   column-parallel  kept x: tokens_r·in·e (SP input) or tokens·in·e
//                    fwd peak: tokens·in·e (SP: all_gathered x) + tokens·out·e (gather_output:
//                    the all_gather_last_axis blocks, while the gathered x is still live)
//                    bwd peak: 2·tokens·in·e with SP (the re-gathered x and the full dx that is
//                    reduce_scattered), else 0 (dx is all_reduced in place: the result)
//   row-parallel     kept x: tokens·in_r·e (input_is_parallel) or tokens·in·e
//                    fwd peak: tokens·out·e with SP output (the full partial y), else 0
//                    bwd peak: tokens·out·e (SP: all_gathered dy) + tokens·in·e (not
//                    input_is_parallel: the blocks of dx's all_gather_last_axis)
//   SP norm          kept x: tokens_r·hidden·e; fwd 0; bwd (2 with beta, else 1)·hidden·e
//   SP block         kept x_r, z_r: tokens_r·hidden·e each, a: tokens·ffn_r·e; fwd peak
//                    tokens·hidden·e; bwd peak max(2·tokens·hidden·e, norm's)
//   parallel MLP     kept x (as column-parallel's), h: tokens·k·F_r·e (k = 2 for swiglu's
//                    [gate_r | up_r], else 1); fwd peak max(fc1's, fc2's): with SP the
//                    all_gathered x tokens·hidden·e and the full partial y tokens·hidden·e, so
//                    tokens·hidden·e; bwd peak max(fc2's, fc1's): with SP tokens·hidden·e (dy)
//                    and 2·tokens·hidden·e (x again, the full dx), so 2·tokens·hidden·e; 0
//                    without SP
//   embedding        kept ids: 8·tokens; fwd and bwd peak tokens·hidden·e with SP output
//                    (the full partial rows; the all_gathered dy), else 0
//   cross-entropy    kept logits_r tokens·V_r·e, targets 8·tokens, max and sum_exp tokens·a each;
//                    fwd peak k·tokens·a (k = 3 with label smoothing, else 2); bwd 0
//   CP attention     kept q, out: b·L_r·h·d·e each; k, v: b·L_r·g·d·e each; lse b·h·L_r·a.
//                    c_j = 2·b·L_j·g·d, src_s = (r − s) mod p.
//                    ring fwd peak: max(c_r·e, max_{s<p−1} (c_{src_s} + c_{src_{s+1}})·e)
//                    ring bwd peak: the max over the moments (s < p − 1 only for the first)
//                      c_{src_s}·(e + a) + c_{src_{s+1}}·e            (K/V received)
//                      c_{src_{s+1}}·e + (c_{src_s} + c_{src_{s+1}})·a   (dK/dV received)
//                    (at s = p − 1 the K/V chunk stays c_{src_{p−1}}; p = 1: c_r·(e + a))
//                    all-gather (N = b·seq·g·d): fwd peak 3·N·e (K in sequence order, V
//                    received and reordered); bwd peak max(3·N·e, 2·N·e + 4·N·a) (K, V; the
//                    full dK, dV and their per-rank reordering for the reduce_scatters)
//   head layer       kept x b·L_r·hidden·e (SP: its token rows_r·hidden·e), q, k, v, out, lse
//                    of the local heads (h_r, g_r);
//                    fwd peak the max of the CP core's (0 without CP or heads) and, with SP,
//                    b·L_r·hidden·e (the all_gathered x, then the full partial y: one at a time);
//                    bwd peak the max of the CP core's, the kv group's pack (2·g_r·d·hidden
//                    [+ 2·g_r·d])·e, the cp pack (every parameter gradient of the rank but dbo,
//                    which is all_reduced over cp in place on its own)·e and, with SP,
//                    b·L_r·hidden·e (the all_gathered dy, x gathered again, the full dx: each
//                    freed before the next)
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
// grads_reduced_over_cp = false: the layer's backward as attention_layer_backward_partial and
// all_reduce_replicated_kv_grads run it, without the cp group's pack (a caller that sums the
// gradients over dp × cp itself, as the model's finalize does).
OpActivations head_layer_activations(const HeadParallelConfig& cfg, std::size_t batch, int tp,
                                     int tp_rank, int cp, int cp_rank, ElementBytes e,
                                     bool grads_reduced_over_cp = true);

}  // namespace shardcheck::budget
