// The UsageErrors of the vocabulary-parallel embedding and cross-entropy not pinned by
// vocab_unit_tests.cpp, those of a padded vocabulary (real_vocab) included. Each case pins the
// parts of the message a user needs (the function, the rank when one raises it, the shapes or
// sizes, and the fix) and, on ranks, that the run's primary failure is on the rank at fault.
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"
#include "suites/vocab/vocab_padded_example.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace shardcheck::vocab_usage_error_tests {
namespace {

using D = Tensor<double>;
using Ids = std::vector<std::int64_t>;
using namespace test;  // the suites' test helpers (testing/ops_test_util.hpp)

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

// ---------------------------------------------------------------- a padded vocabulary

// The padded config (vocab_padded_example.hpp) with one change.
template <class Config>
Config padded_with(void (*change)(Config&)) {
  auto cfg = padded<Config>();
  change(cfg);
  return cfg;
}

// The forward on this rank's 2 columns of [2, V_pad] zero logits.
void padded_forward(Communicator& c, void (*change)(VocabCrossEntropyConfig&), const Ids& targets) {
  (void)vocab_parallel_cross_entropy<double>(c, padded_with(change), D({2, width}), targets);
}

// The forward on this rank's 2 rows of a [V_pad, 2] zero table.
void padded_lookup(Communicator& c, void (*change)(VocabEmbeddingConfig&), const Ids& ids) {
  (void)vocab_parallel_embedding<double>(c, padded_with(change), ids, D({width, 2}));
}

TEST(VocabPadding, errors_name_the_rank_the_target_or_id_V_and_V_pad) {
  expect_usage_errors(std::vector<RankUsageCase>{
      {"a target in the padding",
       3,
       [](Communicator& c) {
         padded_forward(c, [](auto&) {}, {0, 4});
       },
       0,
       {"vocab_parallel_cross_entropy on rank 0: target 4 of token 1 is a padding column",
        "V = 3 real classes padded to V_pad = 6, and [3, 6) are padding",
        "pass targets in [0, V), or ignore_index for tokens without a target"}},
      {"a target past the padding",
       3,
       [](Communicator& c) {
         padded_forward(c, [](auto&) {}, {0, 6});
       },
       0,
       {"vocab_parallel_cross_entropy on rank 0: target 6 of token 1 is out of range for a "
        "vocabulary of V = 3 (padded to V_pad = 6)",
        "pass targets in [0, V)"}},
      {"a target in the padding, in the backward",
       3,
       [](Communicator& c) {
         VocabCrossEntropySaved<double> saved;
         saved.max.assign(2, 0);
         saved.sum_exp.assign(2, 1);
         (void)vocab_parallel_cross_entropy_backward<double>(
             c, padded<VocabCrossEntropyConfig>(), D({2, width}), Ids{5, 0}, saved, D({1}));
       },
       0,
       {"vocab_parallel_cross_entropy_backward on rank 0: target 5 of token 0 is a padding "
        "column",
        "V_pad = 6"}},
      {"class weights for the padded columns",
       3,
       [](Communicator& c) {
         padded_forward(c, [](auto& x) { x.class_weight.assign(padded_v, 1.0); }, {0, 1});
       },
       0,
       {"vocab_parallel_cross_entropy on rank 0: class_weight has 6 values but the vocabulary "
        "has V = 3 classes (padded to V_pad = 6 columns; padding columns have no weight)",
        "pass the full vector of V class weights"}},
      {"a real_vocab above the padded vocab",
       3,
       [](Communicator& c) {
         padded_forward(c, [](auto& x) { x.real_vocab = 7; }, {0, 1});
       },
       0,
       {"vocab_parallel_cross_entropy on rank 0: real_vocab = 7 is outside [1, vocab = 6]",
        "set vocab to the padded count V_pad (the columns of the logits, split over the ranks) "
        "and real_vocab to the real vocabulary V"}},
      {"a real_vocab of 0",
       3,
       [](Communicator& c) {
         padded_forward(c, [](auto& x) { x.real_vocab = 0; }, {0, 1});
       },
       0,
       {"real_vocab = 0 is outside [1, vocab = 6]", "or leave real_vocab unset for no padding"}},
      {"logits with another rank's columns, padded",
       3,
       [](Communicator& c) {
         (void)vocab_parallel_cross_entropy<double>(c, padded<VocabCrossEntropyConfig>(),
                                                    D({2, c.rank() == 2 ? 1U : width}), Ids{0, 1});
       },
       2,
       {"vocab_parallel_cross_entropy on rank 2: logits_shard is [2, 1] but rank 2 owns 2 "
        "columns of V_pad = 6 under explicit[2,2,2]"}},
      {"an id in the padding",
       3,
       [](Communicator& c) {
         padded_lookup(c, [](auto&) {}, {1, 3});
       },
       0,
       {"vocab_parallel_embedding on rank 0: id 3 at token 1 is a padding row",
        "V = 3 real rows padded to V_pad = 6, and [3, 6) are padding", "ids must be in [0, V)"}},
      {"an id past the padding",
       3,
       [](Communicator& c) { padded_lookup(c, [](auto&) {}, {6}); },
       0,
       {"vocab_parallel_embedding on rank 0: id 6 at token 0 is out of range for a vocabulary "
        "of V = 3 rows (padded to V_pad = 6)"}},
      {"an id in the padding, in the backward",
       3,
       [](Communicator& c) {
         (void)vocab_parallel_embedding_backward<double>(c, padded<VocabEmbeddingConfig>(),
                                                         Ids{0, 5}, D({2, 2}));
       },
       0,
       {"vocab_parallel_embedding_backward on rank 0: id 5 at token 1 is a padding row",
        "V_pad = 6"}},
      {"a padding_idx in the padding",
       3,
       [](Communicator& c) { padded_lookup(c, [](auto& x) { x.padding_idx = 4; }, {0}); },
       0,
       {"vocab_parallel_embedding on rank 0: padding_idx 4 is outside the vocabulary [0, V = 3)",
        "pass a global row id in [0, V)"}},
      {"a real_vocab above the padded vocab",
       3,
       [](Communicator& c) {
         auto cfg = padded<VocabEmbeddingConfig>();
         cfg.real_vocab = 9;
         (void)vocab_parallel_embedding_backward<double>(c, cfg, Ids{0}, D({1, 2}));
       },
       0,
       {"vocab_parallel_embedding_backward on rank 0: real_vocab = 9 is outside [1, vocab = 6]",
        "set vocab to the padded count V_pad (the rows of the embedding table, split over the "
        "ranks)"}},
      {"a w_shard with another rank's rows, padded",
       3,
       [](Communicator& c) {
         (void)vocab_parallel_embedding<double>(c, padded<VocabEmbeddingConfig>(), Ids{0},
                                                D({c.rank() == 1 ? 3U : width, 2}));
       },
       1,
       {"vocab_parallel_embedding on rank 1: w_shard is [3, 2] but rank 1 owns 2 rows of "
        "V_pad = 6 under explicit[2,2,2]"}},
  });
}

}  // namespace
}  // namespace shardcheck::vocab_usage_error_tests
