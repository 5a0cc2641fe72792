// Every UsageError of ops/mlp/mlp.hpp, with the parts of its message a user needs pinned: the
// function, the rank, the shapes or sizes involved, and the fix. On ranks, the error must be the
// run's primary failure, on the rank that made the mistake.
#include "ops/mlp/mlp.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <string>

namespace shardcheck {
namespace {

using namespace test;  // the suites' test helpers (testing/ops_test_util.hpp)
using D = Tensor<double>;

TEST(MlpUsageErrors, dense_mlp_names_the_shapes_and_the_fix) {
  expect_parts(usage_error_of([] {
                 mlp(zeros({3, 4}), zeros({5, 4}), D(), zeros({4, 6}), D(), Activation::gelu);
               }),
               {"mlp: x is [3, 4], w_up [5, 4] and w_down [4, 6]",
                "gelu needs w_up [1·F_r, H] and w_down [H, F_r] with H = x.dim(1) = 4"});
  expect_parts(usage_error_of([] {
                 mlp(zeros({3, 4}), zeros({6, 4}), D(), zeros({4, 6}), D(), Activation::swiglu);
               }),
               {"swiglu needs w_up [2·F_r, H]", "(w_up the fused [Wg_r; Wu_r])"});
  expect_parts(
      usage_error_of([] {
        mlp(zeros({3, 4}), zeros({6, 4}), zeros({6}), zeros({4, 6}), D(), Activation::gelu);
      }),
      {"b_up is [6] and b_down []", "pass both empty (no bias) or b_up [6] and b_down [4]"});
}

TEST(MlpUsageErrors, activation_names_the_layout_it_needs) {
  expect_parts(usage_error_of([] {
                 mlp_activation(zeros({2, 3}), Activation::swiglu);
               }),
               {"mlp_activation: h is [2, 3]", "swiglu's pre-activation is [tokens, 2·n]"});
  expect_parts(usage_error_of([] {
                 mlp_activation_backward(zeros({2, 4}), Activation::swiglu, zeros({2, 4}));
               }),
               {"mlp_activation_backward: da is [2, 4] but h is [2, 4]", "da must be [tokens, 2]"});
  expect_parts(usage_error_of([] {
                 split_fused_up(zeros({5, 2}), Activation::swiglu, SplitPolicy::chunk(), 2, 0);
               }),
               {"split_fused_up: w is [5, 2]", "2·F rows ([Wg; Wu])"});
}

TEST(MlpUsageErrors, parallel_mlp_names_the_rank_the_split_and_the_fix) {
  // F = 6 over 2 ranks in chunks of 3, but rank 1 passes a w_down shard with 2 columns.
  const auto f = usage_error_of(2, [](Communicator& tp) {
    MlpConfig cfg;
    cfg.ffn_features = 6;
    const std::size_t f_r = tp.rank() == 1 ? 2 : 3;
    parallel_mlp(tp, cfg, zeros({3, 4}), zeros({f_r, 4}), D(), zeros({4, f_r}), D());
  });
  EXPECT_EQ(f.rank, 1);
  expect_parts(f.message, {"parallel_mlp on rank 1: w_down_shard is [4, 2]",
                           "gives this rank 3 of "
                           "cfg.ffn_features = 6",
                           "split_weight_by_input_features(w_down, ffn_split, P, k)",
                           "set cfg.ffn_features to the global ffn size"});
  const auto g = usage_error_of(2, [](Communicator& tp) {
    MlpConfig cfg;
    cfg.ffn_features = 6;
    const MlpForward<double> saved{zeros({3, 4}), zeros({3, 2})};
    parallel_mlp_backward(tp, cfg, zeros({3, 4}), zeros({3, 4}), zeros({4, 3}), saved, false,
                          zeros({3, 4}));
  });
  expect_parts(g.message, {"parallel_mlp_backward on rank",
                           "saved.h is [3, 2] but w_up_shard is "
                           "[3, 4]",
                           "pass the MlpForward that parallel_mlp returned"});
  const auto h = usage_error_of(2, [](Communicator& tp) {
    MlpConfig cfg;
    cfg.ffn_features = 6;
    cfg.sequence_parallel = true;
    cfg.tokens = 4;
    parallel_mlp(tp, cfg, zeros({3}), zeros({3, 4}), D(), zeros({4, 3}), D());
  });
  expect_parts(h.message,
               {"parallel_mlp on rank", "x must be 2-D [tokens_r, H] (sequence_parallel)"});
}

}  // namespace
}  // namespace shardcheck
