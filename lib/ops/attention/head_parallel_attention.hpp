// The attention layer with its projections, heads partitioned over the tensor-parallel ranks
// (Megatron-LM's ParallelAttention / SelfAttention; Shoeybi et al. 2019 §3), optionally with
// the sequence over context-parallel ranks (a 2-D mesh: heads over tp, sequence over cp).
//
// Dense layer (x [batch, L, hidden]; weights in PyTorch's [out, in] convention):
//   q = x·Wqᵀ + bq  [batch, L, h·d] = [batch, L, h, d]     Wq [h·d, hidden], bq [h·d]
//   k = x·Wkᵀ + bk, v = x·Wvᵀ + bv  [batch, L, g, d]       Wk, Wv [g·d, hidden], bk, bv [g·d]
//   o = attention(q, k, v)          [batch, L, h, d]       (ops/attention/attention.hpp)
//   y = o·Woᵀ + bo                  [batch, L, hidden]     Wo [hidden, h·d], bo [hidden]
// (Q, K and V projections kept apart; Megatron fuses them into one interleaved QKV weight,
// which is the same arithmetic on a permuted weight.)
//
// Head partition over tp = P ranks: heads are split BY HEAD, never by element count (an element
// split lands mid-head), and each rank keeps every query head with the kv head it reads:
//   g ≥ P   kv heads split over the ranks by `kv_head_split` (uneven and empty pieces allowed):
//           rank r owns kv heads [g_off, g_off + g_r) and their query heads
//           [g_off·(h/g), (g_off + g_r)·(h/g)).
//   g < P   each kv head is replicated on P/g ranks (@pre g divides P, and P/g divides the group
//           size h/g, so each rank gets h/P whole query heads of one group): rank r holds kv
//           head r / (P/g) (NOT r mod g) and query heads (r / (P/g))·(h/g) + (r mod (P/g))·(h/P)
//           + [0, h/P).
// A configuration with no valid mapping is refused with a UsageError naming the constraint.
//
// Per rank: the Q/K/V projections are column-parallel by heads (the rows of Wq, Wk, Wv of its
// heads, with their bias elements), attention runs on the local heads (or context-parallel over
// cp), and the output projection is row-parallel: partial y_r = o_r·Wo_rᵀ rounded to T, reduced
// over tp by all_reduce, and bo added ONCE, after the reduction (ops/linear/linear.hpp).
// Backward: dy is the full gradient on every tp rank; do_r = dy·Wo_r; dWo_r = dyᵀ·o_r; dbo =
// Σ dy (identical on every rank); the attention core's backward gives dq, dk, dv of the local
// heads; the fused projection backward gives dx_r = [dq | dk | dv]·[Wq_r; Wk_r; Wv_r] (one dot
// product of (h_r + 2·g_r)·d terms, rounded once), summed over tp by ONE all_reduce (Megatron's
// f: identity forward, all_reduce backward). dWq_r, dbq_r are the rank's own rows. With g < P
// the replicated kv projection's dWk, dbk, dWv, dbv are partial (each rank saw only its query
// heads) and are summed by all_reduce over exactly the P/g ranks that share the kv head.
// With cp > 1 every parameter gradient is a partial sum over the rank's tokens and is summed
// over the cp group by all_reduce (what Megatron's DDP does over dp × cp): the rank's shards in
// one packed buffer, and dbo, replicated on every tp rank, in an all_reduce of its own, so that
// its layout (and the ring's summation order) is the same on every tp rank whatever its heads.
//
// Ledger per rank, T the element type, n = batch·L_r tokens of this rank:
//   forward   all_reduce of y (n·hidden elements) over tp; the CP core's traffic over cp
//             (with sequence_parallel: all_gather of x along tokens over tp before, and a
//             reduce_scatter of y along tokens in place of its all_reduce)
//   backward  all_reduce of dx (n·hidden) over tp (with sequence_parallel: all_gather of dy
//             first, all_gather of x before the QKV backward, and a reduce_scatter of dx in
//             place of its all_reduce); g < P: one all_reduce over the kv group of
//             (2·g_r·d·hidden [+ 2·g_r·d with biases]) elements; the CP core's traffic; cp > 1:
//             one all_reduce over cp of every parameter gradient but dbo, packed in one
//             buffer ((h_r + 2·g_r)·d·(hidden [+ 1]) + hidden·h_r·d elements), then with
//             biases one all_reduce over cp of dbo (hidden elements).
// Collective buffers (ops/workspace.hpp), one at a time: the CP core's; the kv group's and the
// cp group's gradient packs; with sequence_parallel, each a [n, hidden] buffer of T, the
// all_gathered x while the QKV projection reads it (forward, and again in the backward), the
// output projection's full partial y and all_gathered dy (row_parallel_linear), and the full
// partial dx while it is reduce_scattered.
#pragma once

#include "layout/split_policy.hpp"
#include "ops/attention/attention.hpp"
#include "ops/attention/context_parallel_attention.hpp"
#include "runtime/communicator.hpp"

#include <functional>
#include <optional>
#include <string>

namespace shardcheck {

struct HeadParallelConfig {
  AttentionConfig attention;  // global h, g, d, scale, mask (q_len = k_len = the global L)
  std::size_t hidden = 1;
  bool has_bias = true;                              // bq, bk, bv and bo
  SplitPolicy kv_head_split = SplitPolicy::chunk();  // used when g ≥ tp
  Algorithm reduce_algorithm = Algorithm::ring;
  // Sequence over the cp group (attention_layer with a cp communicator); nullopt: no CP.
  std::optional<ContextParallelConfig> context_parallel;
  // Sequence parallelism over tp (Megatron's --sequence-parallel; Korthikanti et al. 2022
  // §4.2.2): x arrives as this tp rank's rows of the flattened [batch·L_r, hidden] tokens (L_r
  // the rank's cp positions, or the whole sequence without CP) under token_split, and is
  // all_gathered along tokens before the QKV projection (g); y leaves as the same rows, the
  // output projection's reduce_scatter taking the place of its all_reduce (ḡ). The backward
  // all_gathers dy (ḡ's backward) and x again (for dWq, dWk, dWv, as Megatron re-gathers the
  // input), and reduce_scatters dx (g's backward). batch is then required: x's rows do not
  // say it.
  bool sequence_parallel = false;
  SplitPolicy token_split = SplitPolicy::chunk();
  std::size_t batch = 0;
};

// Which heads a tp rank holds.
struct HeadAssignment {
  std::size_t q_offset = 0, q_count = 0;    // query heads [q_offset, q_offset + q_count)
  std::size_t kv_offset = 0, kv_count = 0;  // kv heads [kv_offset, kv_offset + kv_count)
  int kv_replicas = 1;     // ranks sharing this rank's kv head (P/g when g < P, else 1)
  int kv_group_first = 0;  // the first tp rank of that sharing group
  friend bool operator==(const HeadAssignment&, const HeadAssignment&) = default;
};

// @throws UsageError naming h, g, P and the violated constraint.
HeadAssignment head_assignment(const HeadParallelConfig& cfg, int tp_size, int tp_rank);

// The layer's parameters: dense, or one rank's shards (bo is never split).
template <class T>
struct AttentionLayerWeights {
  Tensor<T> wq, bq;  // [h_r·d, hidden], [h_r·d]   (biases empty without has_bias)
  Tensor<T> wk, bk;  // [g_r·d, hidden], [g_r·d]
  Tensor<T> wv, bv;  // [g_r·d, hidden], [g_r·d]
  Tensor<T> wo, bo;  // [hidden, h_r·d], [hidden]
};

template <class T>
struct AttentionLayerGrads {
  Tensor<T> dx;                                      // x's shape: [batch, L_r, hidden]
  Tensor<T> dwq, dbq, dwk, dbk, dwv, dbv, dwo, dbo;  // the shapes of the rank's weights
};

// f(every member), in declaration order (the check engine sends a rank's results between MPI
// processes member by member).
template <class T, class F>
void fields(AttentionLayerGrads<T>& o, F&& f) {
  f(o.dx, o.dwq, o.dbq, o.dwk, o.dbk, o.dwv, o.dbv, o.dwo, o.dbo);
}
static_assert(sizeof(AttentionLayerGrads<double>) == 9 * sizeof(Tensor<double>));

// What the forward keeps for the backward.
template <class T>
struct AttentionLayerOutput {
  Tensor<T> y;              // [batch, L_r, hidden]
  Tensor<T> q, k, v;        // the local heads' projections [batch, L_r, heads_r, d]
  AttentionOutput<T> attn;  // the core's out [batch, L_r, h_r, d] and lse [batch, h_r, L_r]
};

// The context-parallel core the layer runs on its local heads (under cfg.context_parallel): the
// library's context_parallel_attention and context_parallel_attention_backward unless given.
// A member left empty means the library's. This is how the attention suite runs the layer
// around an implementation's own core (properties/suites/attention, the property
// layer_around_the_implementations_core), so a user's core is checked inside a layer too.
template <class T>
struct ContextParallelCore {
  std::function<AttentionOutput<T>(Communicator& cp, const AttentionConfig&,
                                   const ContextParallelConfig&, const Tensor<T>& q,
                                   const Tensor<T>& k, const Tensor<T>& v)>
      forward;
  std::function<AttentionGrads<T>(
      Communicator& cp, const AttentionConfig&, const ContextParallelConfig&, const Tensor<T>& q,
      const Tensor<T>& k, const Tensor<T>& v, const AttentionOutput<T>& fwd, const Tensor<T>& dout)>
      backward;
};

// One rank's shards of the dense weights under its assignment.
template <class T>
AttentionLayerWeights<T> shard_attention_weights(const AttentionLayerWeights<T>& dense,
                                                 const HeadParallelConfig& cfg,
                                                 const HeadAssignment& a);

// The layer on one rank. tp: the tensor-parallel group; cp: the context-parallel group (a
// group of one rank when cfg.context_parallel is nullopt). x [batch, L_r, hidden] (the full
// sequence without CP, identical on every tp rank), or with cfg.sequence_parallel this tp
// rank's token rows [tokens_r, hidden] of it flattened; w this rank's shards. core: the
// context-parallel core to run (default: the library's). y has x's shape.
template <class T>
AttentionLayerOutput<T> attention_layer(Communicator& tp, Communicator& cp,
                                        const HeadParallelConfig& cfg, const Tensor<T>& x,
                                        const AttentionLayerWeights<T>& w,
                                        const ContextParallelCore<T>& core = {});

// The layer's backward on one rank: attention_layer_backward_partial, then
// all_reduce_replicated_kv_grads over tp and all_reduce_layer_grads_over_cp. fwd is this rank's
// attention_layer output for the same x and w; dy [batch, L_r, hidden]. Returns dx
// [batch, L_r, hidden] (complete: summed over tp) and this rank's parameter-gradient shards,
// complete (summed over every rank that holds a partial sum of them).
template <class T>
AttentionLayerGrads<T> attention_layer_backward(Communicator& tp, Communicator& cp,
                                                const HeadParallelConfig& cfg, const Tensor<T>& x,
                                                const AttentionLayerWeights<T>& w,
                                                const AttentionLayerOutput<T>& fwd,
                                                const Tensor<T>& dy,
                                                const ContextParallelCore<T>& core = {});

// The backward up to the parameter gradients' reductions: the output projection's
// row-parallel backward, the attention core's (context-parallel when configured) and the
// fused QKV projection's, with dx all_reduced over tp (Megatron's f). The parameter gradients
// are this rank's partial sums: over its query heads for a replicated kv head (g < tp) and
// over its tokens under CP. The two functions below finish them, as Megatron leaves the
// data- and context-parallel gradient sums to finalize_model_grads.
template <class T>
AttentionLayerGrads<T> attention_layer_backward_partial(
    Communicator& tp, Communicator& cp, const HeadParallelConfig& cfg, const Tensor<T>& x,
    const AttentionLayerWeights<T>& w, const AttentionLayerOutput<T>& fwd, const Tensor<T>& dy,
    const ContextParallelCore<T>& core = {});

// A replicated kv head (g < tp, HeadAssignment::kv_replicas > 1): sums dWk, dbk, dWv, dbv over
// exactly the tp ranks that share it (one all_reduce on their sub-group, packed). No-op when
// every rank owns its kv heads.
template <class T>
void all_reduce_replicated_kv_grads(Communicator& tp, const HeadParallelConfig& cfg,
                                    AttentionLayerGrads<T>& g);

// Context parallelism: sums every parameter gradient over cp, since each cp rank saw only its
// tokens: one packed all_reduce of dWq, dbq, dWk, dbk, dWv, dbv, dWo, then (with biases) one
// all_reduce of dbo alone. dbo is replicated on every tp rank and must come out bit-identical on
// all of them; in the pack it would sit at an offset that depends on the rank's head count, so
// the ring would sum it in a different order on a rank with more, fewer or no heads. The kv
// group's ranks (g < tp) have the same head counts, so their packs, and the replicated dWk, dbk,
// dWv, dbv in them, line up. No-op without cfg.context_parallel or with cp of one rank.
template <class T>
void all_reduce_layer_grads_over_cp(Communicator& cp, const HeadParallelConfig& cfg,
                                    AttentionLayerGrads<T>& g);

}  // namespace shardcheck
