// The linear suite's configuration coverage (generators/structure.hpp): its structure is drawn
// unscaled, so every layer, kernel, sequence-parallel choice, split kind and a shard with no
// features appear within the first 30 cases, and every world size 1..8 within the first 60
// (each is 1 case in 8), at every one of 10 seeds. The world-size test can fail: with genWorld
// drawn by RapidCheck's scaled inRange, P = 6, 7 and 8 are missing at all 10 seeds (measured
// 2026-12-02).
#include "generators/layout_gen.hpp"
#include "generators/structure.hpp"
#include "suites/linear/linear_case.hpp"
#include "testing/coverage.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shardcheck::check {
namespace {

std::vector<std::string> labels(const LinearCase& c) {
  std::vector<std::string> out = {"P=" + std::to_string(c.world), to_string(c.layer),
                                  "split " + gen::policy_kind(c.feature_split())};
  if (c.sequence_parallel()) out.emplace_back("sequence parallel");
  if (gen::has_empty_piece(c.feature_split(), c.feature_dim(), c.world)) {
    out.emplace_back("a shard with no features");
  }
  return out;
}

TEST(LinearCoverage, EveryLayerSplitAndEmptyShardWithin30CasesAtEverySeed) {
  const RunConfig config;
  EXPECT_TRUE(test::covers(
      gen_case(config, LinearCaseOptions{}),
      {"column_parallel_linear", "row_parallel_linear", "split chunk", "split balanced",
       "split explicit", "sequence parallel", "a shard with no features"},
      labels));
}

TEST(LinearCoverage, EveryWorldSizeWithin60CasesAtEverySeed) {
  EXPECT_TRUE(test::covers_every_world_size(gen_case(RunConfig{}, LinearCaseOptions{}), labels));
}

}  // namespace
}  // namespace shardcheck::check
