// Configuration coverage of the attention suite's generator (issue: every configuration early):
// the first 30 cases at each of 10 seeds, drawn as a 100-case run draws them
// (generators/structure.hpp's sample_cases), contain every configuration of the stated list.
// Before the unscaled draw, tp = 4 first became drawable at case 85 and tp = 8 never.
#include "generators/structure.hpp"
#include "suites/attention/attention_case.hpp"
#include "testing/coverage.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shardcheck::check {
namespace {

TEST(AttentionCoverage, EveryHeadConfigurationWithin30CasesAtEverySeed) {
  const RunConfig config;  // max_world 8, as shardcheck check runs
  AttentionCaseOptions layer;
  layer.op = AttentionOp::layer;
  std::vector<std::string> wanted;
  int replicated = 0;
  for (const auto& [tp, g] : head_configurations(8)) {
    if (static_cast<std::size_t>(tp) > g) ++replicated;
    wanted.push_back("tp=" + std::to_string(tp) + " g=" + std::to_string(g));
  }
  // Every (tp, g) with tp > g, g | tp, tp ≤ 8: (2,1) (3,1) (4,1) (4,2) (5,1) (6,1) (6,2) (6,3)
  // (7,1) (8,1) (8,2) (8,4).
  EXPECT_EQ(replicated, 12);
  wanted.emplace_back("a tp rank without heads");
  wanted.emplace_back("sequence parallel");  // x, y, dy, dx as token rows over tp
  for (const char* c : {"cp=1", "cp=2"}) wanted.emplace_back(c);
  EXPECT_TRUE(test::covers(gen_case(config, layer), wanted, configuration_labels));
}

TEST(AttentionCoverage, EveryRingSizeAlgorithmAndLayoutWithin30CasesAtEverySeed) {
  const RunConfig config;
  AttentionCaseOptions cp;
  cp.op = AttentionOp::context_parallel;
  std::vector<std::string> wanted;
  for (int p = 1; p <= 8; ++p) wanted.push_back("cp=" + std::to_string(p));
  for (const char* a : {"ring", "all_gather"})
    for (const char* l : {"contiguous", "zigzag"}) wanted.push_back(std::string(a) + " " + l);
  EXPECT_TRUE(test::covers(gen_case(config, cp), wanted, configuration_labels));
}

// The shapes users run (attention_case.hpp, AttentionShape) from the first cases, and both
// causal alignments where they differ (Lq != Lk) within 60: each alignment is about 1 case in 8.
TEST(AttentionCoverage, EveryShapeWithin30CasesAndEveryAlignmentWithin60AtEverySeed) {
  const RunConfig config;
  AttentionCaseOptions cp;
  cp.op = AttentionOp::context_parallel;
  const std::vector<std::string> shapes = {"self-attention", "cross-attention", "decode",
                                           "chunked prefill"};
  EXPECT_TRUE(test::covers(gen_case(config, cp), shapes, configuration_labels));
  EXPECT_TRUE(test::covers(gen_case(config, cp),
                           {"causal bottom_right with Lq != Lk", "causal top_left with Lq != Lk"},
                           configuration_labels, 60));
}

TEST(AttentionCoverage, TheScaledDrawItReplacesMissedThem) {
  // The test can fail: a generator that draws tp with RapidCheck's scaled inRange misses tp = 8
  // in the first 30 cases at every seed.
  const auto scaled = rc::gen::inRange(1, 9);
  const auto missing = gen::missing_configurations(scaled, {"tp=8"}, [](int tp) {
    return std::vector<std::string>{"tp=" + std::to_string(tp)};
  });
  ASSERT_EQ(missing.count("tp=8"), 1U);
  EXPECT_EQ(missing.at("tp=8").size(), 10U);
}

}  // namespace
}  // namespace shardcheck::check
