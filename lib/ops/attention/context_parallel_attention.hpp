// Context-parallel attention: the sequence split over the cp ranks of a group, each rank holding
// the queries, keys and values of its tokens; the softmax normalized GLOBALLY (Liu et al. 2023,
// Ring Attention; Llama 3 §3.3.2 for the all-gather form; Megatron-LM / Transformer Engine's
// context parallelism for the load-balanced zigzag layout).
//
// Self-attention: Lq = Lk = seq_len. Every rank holds q [batch, L_r, h, d], k and v
// [batch, L_r, g, d] for its global positions (cp_positions), L_r may be 0. Results: out
// [batch, L_r, h, d] and lse [batch, h, L_r] for the same positions, equal to the dense op's rows
// at those positions (ops/attention/attention.hpp) up to the order of the softmax's sums.
// Lq ≠ Lk (cross-attention; chunked prefill, a chunk of Lq new tokens against Lk = cached + Lq
// keys; decode, Lq = 1 against a KV cache): q_seq_len = Lq > 0, and the queries are split by
// the same layout over Lq (cp_query_positions, with q_split), the keys over Lk = seq_len. Rank r
// then holds q [batch, Lq_r, h, d] and k, v [batch, Lk_r, g, d]; out and lse are its query
// rows. The mask is evaluated on the global positions with q_len = Lq and k_len = Lk, so either
// causal alignment (attention_config.hpp) works: with bottom_right the diagonal sits at the end
// of the keys, and every query of a decode step sees the whole cache.
//
// Layouts (which global positions rank r holds):
//   contiguous  the sequence cut into cp pieces by `split`: rank r holds piece r.
//   zigzag      the sequence cut into 2·cp chunks by `split`: rank r holds chunks r and
//               2·cp − 1 − r, in that order (load balance under a causal mask: every rank gets
//               an early and a late chunk).
// Every mask is evaluated on global positions (AttentionMask::visible), so each step of the ring
// applies its own mask: under causal, the diagonal step is causal, chunks wholly in the past
// are fully visible, chunks wholly in the future are skipped (no kernel call; their K/V still
// travel). Padding and explicit masks are evaluated the same way.
//
// Algorithms and their traffic (ledger; T = the element type, A = acc_t<T>):
//   ring        forward: cp − 1 ring_shift steps, each moving this rank's current K/V chunk
//               (k and v packed in one buffer of T) to rank r + 1; each step's partial (out, lse
//               in A) is merged into the running result with merge_attention_into (the guarded
//               lse merge of ops/softmax_merge/softmax_merge.hpp); out rounded once to T at the
//               end. backward: every step uses the GLOBAL merged out and lse (never a step's own):
//               dq accumulates locally in A; K/V travel again (cp − 1 ring_shifts of T) and
//               dK/dV travel with them in A (cp ring_shifts: the last one returns them to
//               their owner); dq, dk, dv rounded once to T at the end.
//   all_gather  forward: all_gather k and all_gather v (two collectives of T, uneven counts),
//               then the local queries against every key in one kernel call; no merge.
//               backward: the same two all_gathers again (K/V are not kept between the passes),
//               then reduce_scatter of dk and of dv in A (uneven counts) back to the owners.
#pragma once

#include "layout/split_policy.hpp"
#include "ops/attention/attention.hpp"
#include "runtime/communicator.hpp"

#include <string>
#include <vector>

namespace shardcheck {

enum class CpLayout { contiguous, zigzag };
SHARDCHECK_ENUM_NAMES(CpLayout, "contiguous", "zigzag");
enum class CpAlgorithm { ring, all_gather };
SHARDCHECK_ENUM_NAMES(CpAlgorithm, "ring", "all_gather");

struct ContextParallelConfig {
  std::size_t seq_len = 0;  // the global sequence length (of the keys), known to every rank
  CpLayout layout = CpLayout::contiguous;
  // contiguous: the sequence over the cp ranks; zigzag: the sequence into 2·cp chunks
  // (explicit sizes then list 2·cp chunks). Uneven and empty pieces allowed.
  SplitPolicy split = SplitPolicy::chunk();
  CpAlgorithm algorithm = CpAlgorithm::ring;
  // The queries' global length when it is not seq_len (Lq ≠ Lk); 0: self-attention, the
  // queries are at the keys' positions. The queries are cut by the same layout with q_split
  // (explicit sizes then list the pieces of q_seq_len).
  std::size_t q_seq_len = 0;
  SplitPolicy q_split = SplitPolicy::chunk();
};

// The global key positions rank `rank` of `cp_size` holds, in its local order (the query
// positions too under self-attention).
// @throws UsageError when the split cannot tile seq_len into the layout's pieces.
std::vector<std::size_t> cp_positions(const ContextParallelConfig& cfg, int cp_size, int rank);

// The global query positions rank `rank` holds: cp_positions when q_seq_len is 0, else the
// layout's pieces of q_seq_len cut by q_split.
// @throws UsageError when q_split cannot tile q_seq_len into the layout's pieces.
std::vector<std::size_t> cp_query_positions(const ContextParallelConfig& cfg, int cp_size,
                                            int rank);

// Rows [batch, L, ...] of a dense tensor (dim 1 is the sequence) at `positions`, in order: a
// rank's local piece of q, k, v, out or dout. And the converse for lse [batch, h, L] (dim 2).
template <class T>
Tensor<T> take_positions(const Tensor<T>& x, const std::vector<std::size_t>& positions);
template <class T>
Tensor<T> take_lse_positions(const Tensor<T>& lse, const std::vector<std::size_t>& positions);

// Forward on one rank. cfg.mask.k_len == cp_cfg.seq_len and cfg.mask.q_len == cp_cfg.q_seq_len
// (== seq_len when q_seq_len is 0). q holds this rank's cp_query_positions, k and v its
// cp_positions.
// @throws UsageError naming the rank and shapes when the local pieces disagree with the layout
// or the mask's lengths with the config's.
template <class T>
AttentionOutput<T> context_parallel_attention(Communicator& cp, const AttentionConfig& cfg,
                                              const ContextParallelConfig& cp_cfg,
                                              const Tensor<T>& q, const Tensor<T>& k,
                                              const Tensor<T>& v);

// Backward on one rank, given the forward's out and lse (this rank's query rows) and dout.
template <class T>
AttentionGrads<T> context_parallel_attention_backward(Communicator& cp, const AttentionConfig& cfg,
                                                      const ContextParallelConfig& cp_cfg,
                                                      const Tensor<T>& q, const Tensor<T>& k,
                                                      const Tensor<T>& v,
                                                      const AttentionOutput<T>& fwd,
                                                      const Tensor<T>& dout);

}  // namespace shardcheck
