// The specs of context_parallel_attention and attention_layer (ops/op_spec.hpp). The ops:
// context_parallel_attention.hpp, head_parallel_attention.hpp.
//
//   context_parallel_attention over the cp group (L_j: cp_lengths, rank j's positions)
//     q, out, dout, dq [batch, L, h, d]; k, v, dk, dv [batch, L, g, d]  S(1) by L_j
//     lse [batch, h, L] (acc_t<T>)                                      S(2) by L_j
//     (zigzag: rank j holds chunks j and 2·cp − 1 − j of the 2·cp; the shapes are the same)
//     ring        forward: cp − 1 ring_shifts of the K/V chunk (2·batch·L_src·g·d of T, the
//                 chunk of rank (r − s) mod cp at step s); backward: the same K/V shifts and
//                 cp shifts of the dK/dV chunk in acc_t<T>
//     all_gather  forward: all_gather k, v (T); backward: all_gather k, v again, and
//                 reduce_scatter dk, dv in acc_t<T>
//   attention_layer on the (cp, tp) mesh, world rank = cp_rank·tp + tp_rank
//     x, y, dy, dx [batch, L, hidden]          S(1) by L_j over cp, R over tp (sequence_parallel:
//                                              local shapes [rows, hidden], tp rank k's
//                                              token_split rows of its cp piece flattened)
//     wq [h·d, hidden], bq [h·d]; wo [hidden, h·d]   R over cp, the rank's query heads over tp
//     wk, wv [g·d, hidden], bk, bv [g·d]       R over cp, the rank's kv heads over tp (shared by
//                                              the kv group when g < tp: head_assignment)
//     bo [hidden]                              R
//     forward   the CP core (a rank with query heads, with context_parallel), all_reduce y
//               over tp (sequence_parallel: all_gather x first, reduce_scatter y instead)
//     backward  the CP core, all_reduce dx over tp (sequence_parallel: all_gather dy first,
//               all_gather x after the core, reduce_scatter dx instead), the kv group's
//               all_reduce of dwk, dbk, dwv, dbv (g < tp), the cp group's all_reduce of every
//               parameter gradient (cp > 1)
#pragma once

#include "ops/attention/context_parallel_attention.hpp"
#include "ops/attention/head_parallel_attention.hpp"
#include "ops/op_spec.hpp"

#include <string>
#include <vector>

namespace shardcheck {

// cfg with the heads this group computes (the layer passes its rank's local heads).
spec::OpSpec context_parallel_attention_spec(const AttentionConfig& cfg,
                                             const ContextParallelConfig& cc, std::size_t batch,
                                             int cp);
spec::OpSpec attention_layer_spec(const HeadParallelConfig& cfg, std::size_t batch, int cp, int tp);
// The layer as a caller that sums its parameter gradients over cp itself runs it
// (attention_layer_backward_partial, then all_reduce_replicated_kv_grads, without
// all_reduce_layer_grads_over_cp): attention_layer_spec without the cp all_reduces, their calls
// and their buffers. The whole model runs its layers so (ops/model/model_spec.hpp), leaving every
// gradient's sum over dp × cp to its finalize, as Megatron-LM's finalize_model_grads does.
spec::OpSpec attention_layer_spec_grads_left_to_caller(const HeadParallelConfig& cfg,
                                                       std::size_t batch, int cp, int tp);

// The lengths L_j of the cp ranks' pieces of the sequence under cc's layout and split (the keys'
// pieces; the queries' too under self-attention).
std::vector<std::size_t> cp_lengths(const ContextParallelConfig& cc, int cp);
// The lengths Lq_j of the cp ranks' query pieces: cp_lengths when cc.q_seq_len is 0, else
// q_seq_len cut by cc.q_split under the same layout.
std::vector<std::size_t> cp_query_lengths(const ContextParallelConfig& cc, int cp);

// The configurations' fields (ops/field_table.hpp): what to_json writes and the compare reader
// reads. The mask's allowed_shape is computed (the shape of its allowed tensor): its to_json adds
// it after the table's fields.
SHARDCHECK_CONFIG_FIELDS(AttentionMask, kind, alignment, q_len, k_len, key_lengths);
std::string to_json(const AttentionMask& m);
SHARDCHECK_CONFIG_FIELDS(AttentionConfig, q_heads, kv_heads, head_dim, scale, mask);
SHARDCHECK_CONFIG_FIELDS(ContextParallelConfig, seq_len, layout, split, algorithm, q_seq_len,
                         q_split);
SHARDCHECK_CONFIG_FIELDS(HeadParallelConfig, attention, hidden, has_bias, kv_head_split,
                         reduce_algorithm, context_parallel, sequence_parallel, token_split, batch);

std::vector<spec::OpSpec> attention_example_specs();

}  // namespace shardcheck
