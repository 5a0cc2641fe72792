// Vocabulary-parallel embedding (Megatron-LM's VocabParallelEmbedding), forward and backward.
//
// Shapes (PyTorch's F.embedding): ids [tokens] (int64, every rank holds all of them), the table
// W [V, h] split by rows (the vocabulary) over the ranks under any SplitPolicy, unevenly, ranks
// with no rows included: rank r holds W_r = rows [offset_r, offset_r + V_r) as [V_r, h].
//   forward   y[t, :] = W[ids[t], :]                                              [tokens, h]
//   backward  dW[v, :] = Σ_{t : ids[t] = v} dy[t, :]   (0 for v = padding_idx)    [V, h]
//
// Forward on rank r: owned(t) = offset_r ≤ ids[t] < offset_r + V_r; partial[t] = W_r[ids[t] −
// offset_r] when owned, else a row of zeros. The OUTPUT row is zeroed, not only the index: a
// masked index 0 would read the real local row 0. Then all_reduce(sum) over the ranks (or
// reduce_scatter along tokens for a sequence-parallel output). Each token has exactly one owner,
// so the reduction adds one value to zeros: exact in every type, bit-identical on every rank.
//
// Backward on rank r: dy is the full [tokens, h] (identical on every rank), or this rank's token
// rows with sequence_parallel_output (all_gathered along tokens first: the conjugate of the
// forward's reduce_scatter). dW_r receives only the ids the rank owns; repeated ids accumulate in
// acc_t<T> in token order, rounded once to T; the global padding_idx is translated to the owning
// shard only (row padding_idx − offset of its owner gets no gradient, as torch.nn.Embedding's
// padding_idx; the forward still returns the padding row, as PyTorch's does). No collective.
//
// Out-of-range ids (< 0 or ≥ V) are a UsageError naming the rank, the token, the id and V
// (PyTorch raises "index out of range"; Megatron's mask silently gives zeros).
//
// Sources: Shoeybi et al. 2019 (Megatron-LM) §3; Megatron-LM core/tensor_parallel/layers.py
// (VocabParallelEmbedding); Korthikanti et al. 2022 §4.2.2 (reduce_scatter output under sequence
// parallelism).
#pragma once

#include "layout/split_policy.hpp"
#include "runtime/communicator.hpp"
#include "tensor/tensor.hpp"

#include <cstdint>
#include <optional>
#include <span>

namespace shardcheck {

struct VocabEmbeddingConfig {
  std::size_t vocab = 0;                           // V, known to every rank (required)
  SplitPolicy vocab_split = SplitPolicy::chunk();  // rows of W over the ranks
  std::optional<std::int64_t> padding_idx;         // global id in [0, V), or none
  // reduce_scatter the output along tokens (y is this rank's token rows) instead of all_reduce;
  // backward then takes this rank's token rows of dy and all_gathers them.
  bool sequence_parallel_output = false;
  SplitPolicy token_split = SplitPolicy::chunk();
  Algorithm reduce_algorithm = Algorithm::ring;
};

// Forward on one rank. ids [tokens] (all tokens, on every rank), w_shard [V_r, h].
// Returns y [tokens, h] (all_reduce), or [tokens_r, h] with sequence_parallel_output.
// Collectives: one all_reduce (or reduce_scatter) of tokens·h elements of T.
// @throws UsageError for an out-of-range id, a w_shard whose rows disagree with the split, or a
// padding_idx outside [0, V).
template <class T>
Tensor<T> vocab_parallel_embedding(Communicator& tp, const VocabEmbeddingConfig& cfg,
                                   std::span<const std::int64_t> ids, const Tensor<T>& w_shard);

// Backward on one rank: dW_r [V_r, h] from dy ([tokens, h], or [tokens_r, h] with
// sequence_parallel_output); a rank with V_r = 0 returns [0, h].
// Collectives: one all_gather of dy (tokens·h elements) with sequence_parallel_output, else none.
template <class T>
Tensor<T> vocab_parallel_embedding_backward(Communicator& tp, const VocabEmbeddingConfig& cfg,
                                            std::span<const std::int64_t> ids, const Tensor<T>& dy);

// The dense op on one rank (V = W's rows): y = W[ids]; and its gradient dW [V, h] (padding row
// zero), accumulated in acc_t<T> in token order, rounded once.
template <class T>
Tensor<T> embedding(std::span<const std::int64_t> ids, const Tensor<T>& w);
template <class T>
Tensor<T> embedding_backward(std::span<const std::int64_t> ids, const Tensor<T>& dy,
                             std::size_t vocab, std::optional<std::int64_t> padding_idx);

}  // namespace shardcheck
