// The UsageErrors of the vocabulary-parallel embedding and cross-entropy not pinned by
// vocab_unit_tests.cpp. Each case pins the parts of the
// message a user needs (the function, the rank when one raises it, the shapes or sizes, and the
// fix) and, on ranks, that the run's primary failure is on the rank at fault.
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace shardcheck {
namespace {

using D = Tensor<double>;
using Ids = std::vector<std::int64_t>;
using test::expect_parts;
using test::expect_usage_errors;
using test::RankUsageCase;

// V = 5 over 3 ranks as [2, 0, 3]: rank r owns n_of(r) columns (rows) of the vocabulary.
const SplitPolicy uneven = SplitPolicy::explicit_sizes({2, 0, 3});
std::size_t n_of(const Communicator& c) {
  const std::size_t n[] = {2, 0, 3};
  return n[c.rank()];
}

// ---------------------------------------------------------------- cross-entropy

VocabCrossEntropyConfig ce(void (*change)(VocabCrossEntropyConfig&)) {
  VocabCrossEntropyConfig c;
  c.vocab = 5;
  c.vocab_split = uneven;
  change(c);
  return c;
}

void ce_forward(Communicator& c, const VocabCrossEntropyConfig& cfg, const Ids& targets) {
  (void)vocab_parallel_cross_entropy<double>(c, cfg, D({2, n_of(c)}), targets);
}

TEST(VocabUsageErrors, cross_entropy_names_the_rank_the_sizes_and_what_to_pass) {
  const auto inf = std::numeric_limits<double>::infinity();
  const auto plain = ce([](auto&) {});
  expect_usage_errors(std::vector<RankUsageCase>{
      {"label_smoothing outside [0, 1]",
       3,
       [](Communicator& c) {
         ce_forward(c, ce([](auto& x) { x.label_smoothing = 1.5; }), {0, 4});
       },
       0,
       {"vocab_parallel_cross_entropy on rank 0: label_smoothing must be in [0, 1] but is 1.5",
        "pass 0 for none"}},
      {"a class weight that is not finite",
       3,
       [&](Communicator& c) {
         auto cfg = plain;
         cfg.class_weight = {1, 1, inf, 1, 1};
         ce_forward(c, cfg, {0, 4});
       },
       0,
       {"vocab_parallel_cross_entropy on rank 0: class_weight[2] = inf is not finite",
        "pass finite weights"}},
      {"a token weight that is not finite",
       3,
       [&](Communicator& c) {
         auto cfg = plain;
         cfg.token_weight = {1, -inf};
         ce_forward(c, cfg, {0, 4});
       },
       0,
       {"token_weight[1] = -inf is not finite"}},
      {"logits that are not 2-D",
       3,
       [&](Communicator& c) {
         (void)vocab_parallel_cross_entropy<double>(
             c, plain, c.rank() == 2 ? D({6}) : D({2, n_of(c)}), Ids{0, 4});
       },
       2,
       {"vocab_parallel_cross_entropy on rank 2: logits_shard must be 2-D [tokens, V_r] but is [6]",
        "pass this rank's columns of the [tokens, V] logits"}},
      {"logits with another rank's columns",
       3,
       [&](Communicator& c) {
         (void)vocab_parallel_cross_entropy<double>(c, plain, D({2, c.rank() == 1 ? 1U : n_of(c)}),
                                                    Ids{0, 4});
       },
       1,
       {"vocab_parallel_cross_entropy on rank 1: logits_shard is [2, 1] but rank 1 owns 0 columns "
        "of V = 5 under explicit[2,0,3]",
        "pass this rank's columns of the logits under cfg.vocab_split"}},
      {"a target count that is not the token count",
       3,
       [&](Communicator& c) {
         ce_forward(c, plain, {0, 4, 1});
       },
       0,
       {"vocab_parallel_cross_entropy on rank 0: there are 3 targets but logits_shard is [2, 2]",
        "pass one target per token"}},
      {"a backward dloss of the wrong shape",
       3,
       [&](Communicator& c) {
         VocabCrossEntropySaved<double> saved;
         saved.max.assign(2, 0);
         saved.sum_exp.assign(2, 1);
         (void)vocab_parallel_cross_entropy_backward<double>(c, plain, D({2, n_of(c)}), Ids{0, 4},
                                                             saved, D({2}));
       },
       0,
       {"vocab_parallel_cross_entropy_backward on rank 0: logits_shard [2, 2], 2 targets, saved "
        "state of 2 tokens and dloss [2] disagree",
        "pass the forward's logits_shard, targets and saved state, and dloss [1]"}},
  });
}

// ---------------------------------------------------------------- embedding

VocabEmbeddingConfig emb(bool sequence_parallel_output) {
  VocabEmbeddingConfig c;
  c.vocab = 5;
  c.vocab_split = uneven;
  c.sequence_parallel_output = sequence_parallel_output;
  return c;
}

TEST(VocabUsageErrors, embedding_names_the_rank_the_shapes_and_what_to_pass) {
  const Ids ids = {1, 4, 0};
  expect_usage_errors(std::vector<RankUsageCase>{
      {"padding_idx outside the vocabulary",
       3,
       [&](Communicator& c) {
         auto cfg = emb(false);
         cfg.padding_idx = 5;
         (void)vocab_parallel_embedding<double>(c, cfg, ids, D({n_of(c), 2}));
       },
       0,
       {"vocab_parallel_embedding on rank 0: padding_idx 5 is outside the vocabulary [0, V = 5)",
        "pass a global row id in [0, V), or no padding_idx"}},
      {"a w_shard that is not 2-D",
       3,
       [&](Communicator& c) {
         (void)vocab_parallel_embedding<double>(c, emb(false), ids,
                                                c.rank() == 1 ? D({2}) : D({n_of(c), 2}));
       },
       1,
       {"vocab_parallel_embedding on rank 1: w_shard must be 2-D [V_r, h] but is [2]",
        "pass this rank's rows of the [V, h] embedding table"}},
      {"a w_shard with another rank's rows",
       3,
       [&](Communicator& c) {
         (void)vocab_parallel_embedding<double>(c, emb(false), ids,
                                                D({c.rank() == 2 ? 2U : n_of(c), 2}));
       },
       2,
       {"vocab_parallel_embedding on rank 2: w_shard is [2, 2] but rank 2 owns 3 rows of V = 5 "
        "under explicit[2,0,3]",
        "pass this rank's rows of the table under cfg.vocab_split"}},
      {"a backward dy that is not 2-D",
       3,
       [&](Communicator& c) {
         (void)vocab_parallel_embedding_backward<double>(c, emb(false), ids, D({6}));
       },
       0,
       {"vocab_parallel_embedding_backward on rank 0: dy must be 2-D [tokens, h] but is [6]"}},
      {"a sequence-parallel dy with another rank's tokens",
       3,
       [&](Communicator& c) {
         (void)vocab_parallel_embedding_backward<double>(c, emb(true), ids,
                                                         D({c.rank() == 1 ? 2U : 1U, 2}));
       },
       1,
       {"vocab_parallel_embedding_backward on rank 1: dy is [2, 2] but rank 1 holds 1 of the 3 "
        "tokens under chunk",
        "dy is the gradient of this rank's token rows of y"}},
      {"a dy whose rows are not the ids",
       3,
       [&](Communicator& c) {
         (void)vocab_parallel_embedding_backward<double>(c, emb(false), ids, D({2, 2}));
       },
       0,
       {"vocab_parallel_embedding_backward on rank 0: dy is [2, 2] but there are 3 ids; dy must "
        "be [tokens, h]"}},
  });
  expect_parts(test::usage_error_of([&] { (void)embedding<double>(ids, D({5})); }),
               {"embedding: w must be 2-D [V, h] but is [5]", "pass the whole embedding table"});
  expect_parts(test::usage_error_of([&] {
                 (void)embedding_backward<double>(ids, D({2, 2}), 5, {});
               }),
               {"embedding_backward: dy must be [tokens, h] with tokens = 3 but is [2, 2]",
                "pass one gradient row per id"});
}

}  // namespace
}  // namespace shardcheck
