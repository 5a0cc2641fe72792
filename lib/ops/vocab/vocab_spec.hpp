// The specs of vocab_parallel_embedding and vocab_parallel_cross_entropy (ops/op_spec.hpp).
// The ops: vocab_embedding.hpp, vocab_cross_entropy.hpp.
//
//   vocab_parallel_embedding      ids [tokens] R (int64); w, dw [V, hidden] S(0)[vocab_split]
//                                 y, dy [tokens, hidden] S(0)[token_split] with
//                                 sequence_parallel_output, else R
//     forward   reduce_scatter y (sequence_parallel_output), else all_reduce y: each rank's
//               partial rows (zero for ids it does not hold)
//     backward  all_gather dy (sequence_parallel_output); dW is local
//   vocab_parallel_cross_entropy  logits, dlogits [tokens, V] S(1)[vocab_split]
//                                 targets [tokens] R (int64); loss, dloss R: [tokens] with
//                                 reduction none, else [1]
//     forward   all_reduce(max) of the row maxima [tokens], all_reduce(sum) of the sums of
//               exp and the target logits [2·tokens] (and the row sums for label smoothing:
//               [3·tokens]), all in acc_t<T>; no collective of the logits, and none backward
// With a padded vocabulary (cfg.real_vocab) V above is the padded V_pad = cfg.vocab (the rows of
// w, the columns of the logits, as split); the config's JSON says real_vocab (null: none) and
// the collectives are the same (the padding is masked locally).
#pragma once

#include "ops/op_spec.hpp"
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"

#include <string>
#include <vector>

namespace shardcheck {

spec::OpSpec vocab_parallel_embedding_spec(const VocabEmbeddingConfig& cfg, std::size_t tokens,
                                           std::size_t hidden, int p);
spec::OpSpec vocab_parallel_cross_entropy_spec(const VocabCrossEntropyConfig& cfg,
                                               std::size_t tokens, int p);

// The configurations' fields (ops/field_table.hpp), an absent optional written null: what
// to_json writes and the compare reader reads.
SHARDCHECK_CONFIG_FIELDS(VocabEmbeddingConfig, vocab, real_vocab, vocab_split, padding_idx,
                         sequence_parallel_output, token_split, reduce_algorithm);
SHARDCHECK_CONFIG_FIELDS(VocabCrossEntropyConfig, vocab, real_vocab, vocab_split, ignore_index,
                         label_smoothing, reduction, reduce_algorithm, class_weight, token_weight);

std::vector<spec::OpSpec> vocab_example_specs();

}  // namespace shardcheck
