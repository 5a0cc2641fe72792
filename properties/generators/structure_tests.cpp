// The structure generators (generators/structure.hpp, layout_gen.hpp): every value drawable from
// the first case on, shrinking toward the simplest, dimensions shrinking toward 1.
#include "generators/layout_gen.hpp"
#include "generators/structure.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace shardcheck::gen {
namespace {

// Every shrink of `s`, repeated while the predicate still holds: what RapidCheck ends at.
template <class T, class P>
T shrink_while(rc::Shrinkable<T> s, P still_fails) {
  for (bool moved = true; moved;) {
    moved = false;
    for (auto shrinks = s.shrinks(); auto next = shrinks.next();) {
      if (still_fails(next->value())) {
        s = *next;
        moved = true;
        break;
      }
    }
  }
  return s.value();
}

TEST(Structure, EveryValueAppearsWithinTheFirst30CasesAtEverySeed) {
  // inRange(1, 5) at sizes 0..29 never yields 3 or 4 (its range is scaled by size/100); structure
  // yields all 4 values (a miss has probability 4·(3/4)^30 < 0.001 per seed; the seeds are fixed).
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    std::set<int> seen;
    for (int v : sample_cases(structure<int>(1, 4), seed, 30)) seen.insert(v);
    EXPECT_EQ(seen.size(), 4U) << "seed " << seed;
    std::set<int> scaled;
    for (int v : sample_cases(rc::gen::inRange(1, 5), seed, 30)) scaled.insert(v);
    EXPECT_FALSE(scaled.count(3) || scaled.count(4)) << "the scaled draw is why structure exists";
  }
}

TEST(Structure, ShrinksTowardTheFirstChoice) {
  const auto s = structure<int>(2, 8)(rc::Random(7), 0);
  EXPECT_EQ(shrink_while(s, [](int) { return true; }), 2);
  // A failure that needs v >= 5 shrinks to exactly 5.
  auto big = structure<int>(2, 8)(rc::Random(1), 0);
  for (std::uint64_t k = 2; big.value() < 5; ++k) big = structure<int>(2, 8)(rc::Random(k), 0);
  EXPECT_EQ(shrink_while(big, [](int v) { return v >= 5; }), 5);
  const auto w = weightedStructure<std::string>({{1, "simple"}, {5, "b"}, {5, "c"}});
  for (std::uint64_t k = 1; k < 20; ++k) {
    EXPECT_EQ(shrink_while(w(rc::Random(k), 50), [](const std::string&) { return true; }),
              "simple");
  }
}

TEST(Structure, SweepDrawsEveryChoiceInTheFirstCasesAndShrinksToTheFirst) {
  const std::vector<int> choices{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120};
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    std::set<int> seen;
    for (int v : sample_cases(sweepOf(choices), seed, 12)) seen.insert(v);
    EXPECT_EQ(seen.size(), choices.size()) << "seed " << seed;
  }
  EXPECT_EQ(shrink_while(sweepOf(choices)(rc::Random(1), 7), [](int) { return true; }), 10);
  EXPECT_EQ(shrink_while(sweepOf(choices)(rc::Random(1), 7), [](int v) { return v >= 40; }), 40);
}

TEST(Structure, ChanceIsUnscaled) {
  int hits = 0;
  for (bool b : sample_cases(chance(50), 3, 400)) hits += b ? 1 : 0;
  EXPECT_GT(hits, 140);
  EXPECT_LT(hits, 260);
  int early = 0;
  for (bool b : sample_cases(chance(50), 3, 10)) early += b ? 1 : 0;
  EXPECT_GT(early, 0) << "true must be drawable at size 0..9";
}

TEST(Structure, DimensionsShrinkTowardOneThePrimesToo) {
  for (std::uint64_t k = 1; k < 200; ++k) {
    const auto d = genDim(31)(rc::Random(k), 100);
    EXPECT_EQ(shrink_while(d, [](std::size_t) { return true; }), 1U) << "drew " << d.value();
  }
}

TEST(Structure, WorldSizesReachTheLargestFromTheStart) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    std::set<int> seen;
    for (int v : sample_cases(genWorld(8), seed, 30)) seen.insert(v);
    EXPECT_TRUE(seen.count(8)) << "seed " << seed;
  }
}

TEST(Structure, MissingConfigurationsNamesTheLabelsNeverDrawn) {
  const auto missing =
      missing_configurations(structure<int>(1, 4), {"1", "2", "3", "4", "5"},
                             [](int v) { return std::vector<std::string>{std::to_string(v)}; });
  ASSERT_EQ(missing.size(), 1U);
  EXPECT_EQ(missing.begin()->first, "5");
  EXPECT_EQ(missing.begin()->second.size(), 10U);
}

}  // namespace
}  // namespace shardcheck::gen
