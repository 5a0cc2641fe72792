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
// Padded vocabulary (cfg.real_vocab, below): the table has V_pad = cfg.vocab rows, split over
// the ranks, of which only the first V = cfg.real_vocab are tokens; rows [V, V_pad) are padding
// (Megatron-LM's `_vocab_size_with_padding`, megatron/training/tokenizer/tokenizer.py: the
// vocabulary rounded up to a multiple of make_vocab_size_divisible_by·tp; vLLM's
// VocabParallelEmbedding: `org_vocab_size` real rows of `num_embeddings_padded`). The dense op
// is the embedding of the V real rows: an id in [V, V_pad) is a UsageError naming the rank,
// the token, the id, V and V_pad (it would silently read an untrained padding row), padding
// rows are never read, and their gradient is exactly 0 (no id reaches them). padding_idx must be
// a real row, in [0, V). Any rank may hold padding rows, or only padding rows; the collectives
// are unchanged.
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

// vocab: the table's row count (V_pad when padded), the count the split divides; known to
// every rank (required). real_vocab: the real vocabulary V ≤ vocab (vLLM's org_vocab_size),
// rows [V, vocab) being padding; std::nullopt (the default): no padding, V = vocab.
struct VocabEmbeddingConfig {
  std::size_t vocab = 0;                           // V_pad: rows of the table (required)
  std::optional<std::size_t> real_vocab;           // V, the real rows in [1, vocab]; none: V_pad
  SplitPolicy vocab_split = SplitPolicy::chunk();  // rows of W over the ranks
  std::optional<std::int64_t> padding_idx;         // global id in [0, V), or none
  // reduce_scatter the output along tokens (y is this rank's token rows) instead of all_reduce;
  // backward then takes this rank's token rows of dy and all_gathers them.
  bool sequence_parallel_output = false;
  SplitPolicy token_split = SplitPolicy::chunk();
  Algorithm reduce_algorithm = Algorithm::ring;
};

// The real vocabulary V of a config: cfg.real_vocab when given, else cfg.vocab (no padding).
constexpr std::size_t real_vocab_size(const VocabEmbeddingConfig& cfg) noexcept {
  return cfg.real_vocab.value_or(cfg.vocab);
}

// Forward on one rank. ids [tokens] (all tokens, on every rank), w_shard [V_r, h].
// Returns y [tokens, h] (all_reduce), or [tokens_r, h] with sequence_parallel_output.
// Collectives: one all_reduce (or reduce_scatter) of tokens·h elements of T.
// @throws UsageError for an out-of-range id (a padding id in [V, V_pad) included), a w_shard
// whose rows disagree with the split, a padding_idx outside [0, V), or a real_vocab outside
// [1, vocab].
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
