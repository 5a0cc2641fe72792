// The UsageErrors of the norms not pinned by norm_unit_tests.cpp. Each case pins the parts of
// the message a user needs (the function, the rank when one raises it, the shapes, and the fix)
// and, on ranks, that the run's primary failure is on the rank at fault.
#include "ops/norm/norm.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace shardcheck {
namespace {

using D = Tensor<double>;
using namespace test;  // the suites' test helpers (testing/ops_test_util.hpp)

TEST(NormUsageErrors, norms_name_the_rank_the_shapes_and_what_to_pass) {
  const NormConfig ln{NormKind::layer_norm, 1e-5};
  expect_parts(test::usage_error_of([&] {
                 (void)norm_forward(ln, D({2, 0}), D({0}), D({0}));
               }),
               {"norm_forward (layer_norm): x is [2, 0]: the hidden dimension must have at least "
                "one feature to normalize over"});
  const SequenceParallelNormConfig sp{ln, 4, SplitPolicy::chunk(), Algorithm::ring};
  const D g({3});
  expect_usage_errors(std::vector<RankUsageCase>{
      {"gamma of the wrong size on one rank",
       2,
       [&](Communicator& c) {
         (void)sequence_parallel_norm(c, sp, D({2, 3}), c.rank() == 1 ? D({4}) : g, g);
       },
       1,
       {"sequence_parallel_norm on rank 1: gamma is [4] but x is [2, 3]",
        "gamma must be [hidden] = [3]"}},
      {"an x_shard that is not the rank's tokens",
       2,
       [&](Communicator& c) {
         (void)sequence_parallel_norm(c, sp, D({c.rank() == 1 ? 1U : 2U, 3}), g, g);
       },
       1,
       {"sequence_parallel_norm on rank 1: x_shard is [1, 3] but token_split chunk gives this "
        "rank 2 of cfg.tokens = 4 tokens",
        "give rank k split_by_tokens(x, token_split, P, k)"}},
      {"a backward dy of another shape than x",
       2,
       [&](Communicator& c) {
         (void)sequence_parallel_norm_backward(c, sp, D({2, 3}), g,
                                               D({2, c.rank() == 1 ? 2U : 3U}));
       },
       1,
       {"sequence_parallel_norm_backward on rank 1: dy is [2, 2] but x is [2, 3]",
        "dy must have x's shape [tokens, hidden]"}},
  });
}

}  // namespace
}  // namespace shardcheck
