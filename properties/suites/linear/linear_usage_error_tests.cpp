// Every UsageError of ops/linear/linear.hpp and ops/tp_transitions.hpp, with the parts of its
// message a user needs pinned: the function, the rank, the shapes or sizes involved, and the fix.
// On ranks, the error must be the run's primary failure, on the rank that made the mistake.
#include "ops/linear/linear.hpp"
#include "ops/tp_transitions.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <string>

namespace shardcheck::linear_usage_error_tests {
namespace {

using namespace test;  // the suites' test helpers (testing/ops_test_util.hpp)
using D = Tensor<double>;

// ---------------------------------------------------------------- dense

TEST(LinearUsageErrors, linear_names_the_shapes_and_the_fix) {
  expect_parts(
      usage_error_of([] {
        linear(zeros({5, 7}), zeros({3, 8}), D());
      }),
      {"linear: w is [3, 8] but x is [5, 7]", "w must be [out, in] with in = x.dim(1) = 7"});
  expect_parts(usage_error_of([] {
                 linear(zeros({5}), zeros({3, 5}), D());
               }),
               {"linear: x must be 2-D [tokens, in] but is [5]"});
  expect_parts(usage_error_of([] {
                 linear(zeros({5, 2}), zeros({6}), D());
               }),
               {"linear: w must be 2-D [out, in] but is [6]"});
  expect_parts(usage_error_of([] {
                 linear(zeros({5, 2}), zeros({3, 2}), zeros({4}));
               }),
               {"linear: b is [4] but w is [3, 2]",
                "b must be empty (no bias) or [out] with out = w.dim(0) = 3"});
}

TEST(LinearUsageErrors, linear_backward_names_the_shapes_and_the_fix) {
  expect_parts(usage_error_of([] {
                 linear_backward(zeros({5, 2}), zeros({3, 2}), true, zeros({5, 4}));
               }),
               {"linear_backward: dy is [5, 4] but x is [5, 2] and w is [3, 2]",
                "dy must be [tokens, out] = [5, 3]"});
  expect_parts(usage_error_of([] {
                 linear_backward(zeros({5, 2}), zeros({3, 2}), true, zeros({15}));
               }),
               {"linear_backward: dy must be 2-D [tokens, out] but is [15]"});
  expect_parts(usage_error_of([] {
                 linear_backward(zeros({5, 2}), zeros({3, 4}), true, zeros({5, 3}));
               }),
               {"linear_backward: w is [3, 4] but x is [5, 2]"});
}

// ---------------------------------------------------------------- splits

TEST(LinearUsageErrors, splits_name_the_dimension_the_policy_and_the_rank) {
  expect_parts(
      usage_error_of([] {
        split_weight_by_output_features(zeros({3, 8}), SplitPolicy::explicit_sizes({1, 1}), 2, 0);
      }),
      {"split_weight_by_output_features: cannot split the out = 3 rows of w [3, 8] with "
       "explicit[1,1]",
       "give one non-negative size per rank adding up to 3"});
  expect_parts(
      usage_error_of([] {
        split_weight_by_input_features(zeros({3, 8}), SplitPolicy::chunk(), 2, 2);
      }),
      {"split_weight_by_input_features: rank 2 is outside [0, 2)", "pass 0 <= rank < parts"});
  expect_parts(usage_error_of([] {
                 split_input_by_features(zeros({4, 5}), SplitPolicy::explicit_sizes({5}), 2, 0);
               }),
               {"split_input_by_features: cannot split the in = 5 columns of x [4, 5]"});
  expect_parts(usage_error_of([] {
                 split_bias(zeros({2, 3}), SplitPolicy::chunk(), 2, 0);
               }),
               {"split_bias: b must be empty (no bias) or 1-D [out] but is [2, 3]"});
  expect_parts(usage_error_of([] { split_by_tokens(D(), SplitPolicy::chunk(), 2, 0); }),
               {"split_by_tokens: x must have a token axis [tokens, ...] but is []"});
  expect_parts(
      usage_error_of([] {
        split_by_tokens(zeros({4, 2}), SplitPolicy::chunk(), 0, 0);
      }),
      {"split_by_tokens: cannot split over 0 parts; the number of ranks must be at least 1"});
}

// ---------------------------------------------------------------- column-parallel

TEST(LinearUsageErrors, column_forward_names_the_rank_and_shapes) {
  const auto f = test::usage_error_of(3, [](Communicator& tp) {
    const std::size_t in = tp.rank() == 2 ? 8 : 7;
    column_parallel_linear(tp, ColumnParallelConfig{}, zeros({5, 7}), zeros({3, in}), D());
  });
  EXPECT_EQ(f.rank, 2);
  expect_parts(f.message, {"column_parallel_linear on rank 2: w_shard is [3, 8] but x is [5, 7]",
                           "w_shard must be [out_r, in] with in = x.dim(1) = 7"});
  const auto g = test::usage_error_of(2, [](Communicator& tp) {
    column_parallel_linear(tp, ColumnParallelConfig{}, zeros({5, 7}), zeros({3, 7}),
                           zeros({tp.rank() == 1 ? 4U : 3U}));
  });
  EXPECT_EQ(g.rank, 1);
  expect_parts(g.message, {"column_parallel_linear on rank 1: b_shard is [4] but w_shard is [3, 7]",
                           "b_shard must be empty (no bias) or [out_r]"});
}

TEST(LinearUsageErrors, column_forward_checks_token_shards_against_token_split) {
  ColumnParallelConfig cfg;
  cfg.sequence_parallel_input = true;
  cfg.tokens = 4;
  const auto f = test::usage_error_of(2, [&](Communicator& tp) {
    column_parallel_linear(tp, cfg, zeros({tp.rank() == 0 ? 1U : 3U, 2}), zeros({2, 2}), D());
  });
  EXPECT_EQ(f.rank, 0);
  expect_parts(f.message, {"column_parallel_linear on rank 0:",
                           "x is [1, 2] but token_split chunk gives this rank 2 of cfg.tokens = 4",
                           "split_by_tokens(x, token_split, P, k)",
                           "set cfg.tokens to the global token count"});
  cfg.token_split = SplitPolicy::explicit_sizes({1, 1, 2});
  const auto g = test::usage_error_of(2, [&](Communicator& tp) {
    column_parallel_linear(tp, cfg, zeros({2, 2}), zeros({2, 2}), D());
  });
  expect_parts(g.message, {"column_parallel_linear on rank 0: cannot split cfg.tokens = 4 tokens "
                           "with explicit[1,1,2]"});
  // The global token count is required: left at 0 it cannot match any non-empty shard.
  const auto h = test::usage_error_of(2, [&](Communicator& tp) {
    column_parallel_linear(tp, ColumnParallelConfig{.sequence_parallel_input = true}, zeros({2, 2}),
                           zeros({2, 2}), D());
  });
  expect_parts(h.message,
               {"x is [2, 2] but token_split chunk gives this rank 0 of cfg.tokens = 0"});
}

TEST(LinearUsageErrors, column_forward_checks_weight_shards_against_out_split_when_gathering) {
  ColumnParallelConfig cfg;
  cfg.gather_output = true;
  cfg.out_split = SplitPolicy::balanced();
  cfg.out_features = 4;
  const auto f = test::usage_error_of(2, [&](Communicator& tp) {
    column_parallel_linear(tp, cfg, zeros({3, 2}), zeros({tp.rank() == 0 ? 1U : 3U, 2}), D());
  });
  expect_parts(f.message, {"w_shard is [1, 2] but out_split balanced gives this rank 2 of "
                           "cfg.out_features = 4 features",
                           "split_weight_by_output_features(w, out_split, P, k)"});
}

TEST(LinearUsageErrors, column_backward_names_the_rank_and_shapes) {
  const auto f = test::usage_error_of(2, [](Communicator& tp) {
    column_parallel_linear_backward(tp, ColumnParallelConfig{}, zeros({5, 8}), zeros({3, 8}), true,
                                    zeros({5, tp.rank() == 1 ? 2U : 3U}));
  });
  EXPECT_EQ(f.rank, 1);
  expect_parts(f.message, {"column_parallel_linear_backward on rank 1: dy is [5, 2] but w_shard "
                           "is [3, 8]",
                           "dy must be [tokens, out_r] with out_r = w_shard.dim(0) = 3"});
  const auto g = test::usage_error_of(1, [](Communicator& tp) {
    column_parallel_linear_backward(tp, ColumnParallelConfig{.gather_output = true}, zeros({5, 8}),
                                    zeros({3, 8}), true, zeros({5, 6}));
  });
  expect_parts(g.message, {"dy is [5, 6] and out_split chunk gives this rank 6 of its 6 "
                           "features, but w_shard is [3, 8]"});
  const auto h = test::usage_error_of(2, [](Communicator& tp) {
    column_parallel_linear_backward(tp, ColumnParallelConfig{.sequence_parallel_input = true},
                                    zeros({1, 8}), zeros({3, 8}), true, zeros({5, 3}));
  });
  expect_parts(h.message, {"x is [1, 8] but token_split chunk gives this rank 3 of dy's 5 tokens",
                           "pass the token shard x given to the forward"});
  const auto k = test::usage_error_of(1, [](Communicator& tp) {
    column_parallel_linear_backward(tp, ColumnParallelConfig{}, zeros({4, 8}), zeros({3, 8}), true,
                                    zeros({5, 3}));
  });
  expect_parts(k.message, {"dy is [5, 3] but x is [4, 8]; dy must have x's 4 tokens"});
}

// ---------------------------------------------------------------- row-parallel

TEST(LinearUsageErrors, row_forward_names_the_rank_and_shapes) {
  const auto f = test::usage_error_of(2, [](Communicator& tp) {
    row_parallel_linear(tp, RowParallelConfig{}, zeros({5, tp.rank() == 1 ? 3U : 4U}),
                        zeros({3, 4}), D());
  });
  EXPECT_EQ(f.rank, 1);
  expect_parts(f.message, {"row_parallel_linear on rank 1: w_shard is [3, 4] but x is [5, 3]",
                           "with input_is_parallel x must be this rank's [tokens, in_r] with "
                           "in_r = w_shard.dim(1) = 4"});
  const auto g = test::usage_error_of(2, [](Communicator& tp) {
    row_parallel_linear(tp, RowParallelConfig{.input_is_parallel = false}, zeros({5, 8}),
                        zeros({3, 2}), D());
  });
  expect_parts(g.message, {"x is [5, 8] and in_split chunk gives this rank 4 of its 8 features, "
                           "but w_shard is [3, 2]",
                           "split_weight_by_input_features(w, in_split, P, rank)"});
  const auto h = test::usage_error_of(1, [](Communicator& tp) {
    row_parallel_linear(tp, RowParallelConfig{}, zeros({5, 4}), zeros({3, 4}), zeros({4}));
  });
  expect_parts(h.message, {"row_parallel_linear on rank 0: b is [4] but w_shard is [3, 4]",
                           "b must be empty (no bias) or [out] with out = w_shard.dim(0) = 3"});
}

TEST(LinearUsageErrors, row_backward_names_the_rank_and_shapes) {
  const auto f = test::usage_error_of(1, [](Communicator& tp) {
    row_parallel_linear_backward(tp, RowParallelConfig{}, zeros({5, 4}), zeros({3, 4}), true,
                                 zeros({5, 2}));
  });
  expect_parts(f.message, {"row_parallel_linear_backward on rank 0: dy is [5, 2] but w_shard is "
                           "[3, 4]; dy must have out = w_shard.dim(0) = 3 features"});
  const auto g = test::usage_error_of(2, [](Communicator& tp) {
    row_parallel_linear_backward(tp, RowParallelConfig{.sequence_parallel_output = true},
                                 zeros({5, 4}), zeros({3, 4}), true, zeros({5, 3}));
  });
  expect_parts(g.message, {"dy is [5, 3] but token_split chunk gives this rank 3 of x's 5 tokens",
                           "dy is the gradient of this rank's token shard of y"});
  const auto h = test::usage_error_of(1, [](Communicator& tp) {
    row_parallel_linear_backward(tp, RowParallelConfig{}, zeros({5, 4}), zeros({3, 4}), true,
                                 zeros({4, 3}));
  });
  expect_parts(h.message, {"dy is [4, 3] but x is [5, 4]; dy must have x's 5 tokens"});
}

// ---------------------------------------------------------------- transitions

TEST(LinearUsageErrors, transitions_name_the_counts_and_the_shard) {
  const std::size_t two[] = {2, 2};
  const std::size_t one[] = {4};
  const auto f = test::usage_error_of(2, [&](Communicator& tp) {
    all_gather_tokens(tp, zeros({2, 3}), std::span<const std::size_t>(one));
  });
  expect_parts(f.message, {"all_gather_tokens on rank 0: got 1 counts [4] for a group of 2 ranks",
                           "pass one count per rank"});
  const auto g = test::usage_error_of(2, [&](Communicator& tp) {
    all_gather_last_axis(tp, zeros({3, tp.rank() == 1 ? 1U : 2U}),
                         std::span<const std::size_t>(two));
  });
  EXPECT_EQ(g.rank, 1);
  expect_parts(g.message, {"all_gather_last_axis on rank 1: the shard is [3, 1] but the column "
                           "counts [2, 2] give this rank 2 columns"});
  const auto h = test::usage_error_of(2, [&](Communicator& tp) {
    reduce_scatter_tokens(tp, zeros({3, 2}), std::span<const std::size_t>(two));
  });
  expect_parts(h.message, {"reduce_scatter_tokens on rank 0: the tensor is [3, 2] but the row "
                           "counts [2, 2] add up to 4 rows"});
}

}  // namespace
}  // namespace shardcheck::linear_usage_error_tests
