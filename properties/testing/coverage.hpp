// The assertions of the suites' configuration-coverage tests
// (properties/suites/<suite>/<suite>_coverage_tests.cpp, docs/check-engine.md "Structure is
// drawn unscaled"): a case generator's first cases, drawn as a run draws them at 10 seeds
// (generators/structure.hpp), against the labels they must show.
//
//   EXPECT_TRUE(test::covers(gen_case(config, options), {"split chunk", ...}, labels));
#pragma once

#include "engine/suite.hpp"
#include "generators/structure.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <string>
#include <vector>

namespace shardcheck::test {

// Success when every label of `wanted` is among label(c) for some case c of the first n cases of
// `gen`, at every one of 10 seeds; a failure naming each label missing and at how many seeds.
template <class T, class Label>
::testing::AssertionResult covers(const rc::Gen<T>& gen, const std::vector<std::string>& wanted,
                                  Label label, int n = 30) {
  const auto missing = gen::missing_configurations(gen, wanted, label, 10, n);
  if (missing.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << gen::missing_text(missing);
}

// covers() for every world size "P=1" ... "P=max_world" (the labels label(c) gives a case of world
// size P) within the first 60 cases: each is 1 case in 8 at max_world 8.
template <class T, class Label>
::testing::AssertionResult covers_every_world_size(const rc::Gen<T>& gen, Label label,
                                                   int max_world = check::RunConfig{}.max_world) {
  const auto missing = gen::missing_world_sizes(gen, max_world, label);
  if (missing.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << gen::missing_text(missing);
}

// Success when the world size max_world + 1, which no case of `gen` can have, is missing at all
// 10 seeds: the world-size coverage check can fail.
template <class T, class Label>
::testing::AssertionResult misses_an_impossible_world(
    const rc::Gen<T>& gen, Label label, int max_world = check::RunConfig{}.max_world) {
  const std::size_t seeds = gen::seeds_missing_impossible_world(gen, max_world, label);
  if (seeds == 10) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "P=" << max_world + 1 << " is missing at " << seeds << " of 10 seeds, not 10";
}

}  // namespace shardcheck::test
