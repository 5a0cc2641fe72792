// The softmax_merge suite's configuration coverage (generators/structure.hpp): the number of
// parts (the merge's world size) is drawn unscaled, so every count 1..8 appears within the first
// 60 cases at every one of 10 seeds, and an empty part, a case without keys, an empty partial
// holding NaN and one holding +inf, a nested grouping, an empty group, a ring that starts from
// the identity and a ring that starts past rank 0 within the first 30. The check can fail: the
// scaled draw this replaced (1, 2, or RapidCheck's inRange(3, 9), which scales with the case
// index) misses 8 parts in the first 60 cases at some of the same 10 seeds.
#include "generators/structure.hpp"
#include "suites/softmax_merge/softmax_merge_case.hpp"
#include "testing/coverage.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace shardcheck::check {
namespace {

std::vector<std::string> labels(const MergeCase& c) {
  std::vector<std::string> out = {"parts=" + std::to_string(c.parts)};
  std::vector<std::size_t> sizes(c.parts, 0);
  for (const auto j : c.part_of_key) ++sizes[j];
  for (std::size_t j = 0; j < c.parts; ++j) {
    if (sizes[j] != 0) continue;
    out.emplace_back("an empty part");
    if (c.empty_fill[j] == EmptyFill::nan) out.emplace_back("an empty partial holding NaN");
    if (c.empty_fill[j] == EmptyFill::inf) out.emplace_back("an empty partial holding +inf");
  }
  if (c.keys == 0) out.emplace_back("no keys");
  const std::set<std::size_t> used(c.group_of_part.begin(), c.group_of_part.end());
  if (used.size() > 1) out.emplace_back("nested groups");
  if (used.size() < c.groups) out.emplace_back("an empty group");
  if (c.ring_from_empty) out.emplace_back("a ring from the identity");
  if (c.ring_start > 0) out.emplace_back("a ring starting past rank 0");
  return out;
}

TEST(SoftmaxMergeCoverage, EveryPartCountWithin60CasesAtEverySeed) {
  const RunConfig config;
  std::vector<std::string> counts;
  for (int p = 1; p <= 8; ++p) counts.push_back("parts=" + std::to_string(p));
  EXPECT_TRUE(test::covers(gen_case(config, MergeCaseOptions{}), counts, labels, 60));
}

TEST(SoftmaxMergeCoverage, EveryEmptyPartConventionAndGroupingWithin30CasesAtEverySeed) {
  const RunConfig config;
  EXPECT_TRUE(test::covers(gen_case(config, MergeCaseOptions{}),
                           {"an empty part", "no keys", "an empty partial holding NaN",
                            "an empty partial holding +inf", "nested groups", "an empty group",
                            "a ring from the identity", "a ring starting past rank 0"},
                           labels));
}

TEST(SoftmaxMergeCoverage, TheScaledPartCountThisReplacedMissesEightParts) {
  const auto scaled =
      rc::gen::weightedOneOf<std::size_t>({{1, rc::gen::just<std::size_t>(1)},
                                           {3, rc::gen::just<std::size_t>(2)},
                                           {5, rc::gen::inRange<std::size_t>(3, 9)}});
  const auto missing = gen::missing_configurations(
      scaled, {"parts=8"}, [](std::size_t p) { return std::vector{"parts=" + std::to_string(p)}; },
      10, 60);
  EXPECT_EQ(missing.count("parts=8"), 1U) << "the scaled draw now reaches 8 parts at every seed";
}

}  // namespace
}  // namespace shardcheck::check
