// The linear suite as tests: every property passes on the library's implementation, and every
// mutant in the catalog is killed. The same runner as `shardcheck check` / `shardcheck mutants`,
// with the same default seed (1), so a failure here replays there:
//   shardcheck check linear --property <p> --seed 1 --cases <n>
//   shardcheck mutants linear --seed 1 --cases <n>
// (gtest names: Linear/LinearProperty.HoldsForTheLibrary/<property>,
//  Linear/LinearMutant.IsKilled/mutant_<name>)
#include "engine/runner.hpp"
#include "engine/suite.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace shardcheck::check {
namespace {

constexpr std::uint64_t seed = 1;

const Suite& linear_suite() {
  register_builtin_suites();
  return *SuiteRegistry::instance().find("linear");
}

std::vector<std::string> property_names() {
  std::vector<std::string> out;
  for (const auto& p : linear_suite().properties()) out.push_back(p.name);
  return out;
}

std::vector<std::string> mutant_names() {
  std::vector<std::string> out;
  for (const auto& i : linear_suite().implementations()) {
    if (i.is_mutant) out.push_back(i.name);
  }
  return out;
}

std::string test_name(const testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (auto& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

class LinearProperty : public testing::TestWithParam<std::string> {};

TEST_P(LinearProperty, HoldsForTheLibrary) {
  const Suite& s = linear_suite();
  RunParams params;
  params.seed = seed;
  params.cases = SHARDCHECK_RC_MAX_SUCCESS;
  Collector collector;
  const auto r = run_property(s, GetParam(), "shardcheck", RunConfig{}, params, collector);
  std::printf("%s: %d cases, worst bound ratio %.3g\n", GetParam().c_str(), r.cases, r.max_ratio);
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_EQ(r.cases, params.cases);
  // A bound ratio of exactly 0 over a whole run means nothing was compared numerically (a
  // property that cannot fail); the numeric properties must have measured something.
  if (GetParam() == "matches_reference" || GetParam() == "special_values") {
    EXPECT_GT(r.max_ratio, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Linear, LinearProperty, testing::ValuesIn(property_names()), test_name);

class LinearMutant : public testing::TestWithParam<std::string> {};

// Each mutant must fail some property within the case count the test command uses. The kill
// is printed: which property, after how many cases, and the shrunk counterexample.
TEST_P(LinearMutant, IsKilled) {
  const Suite& s = linear_suite();
  RunParams params;
  params.seed = seed;
  params.cases = SHARDCHECK_RC_MAX_SUCCESS;
  Collector collector;
  for (const auto& p : s.properties()) {
    if (!s.applies(p.name, GetParam())) continue;
    const auto r = run_property(s, p.name, GetParam(), RunConfig{}, params, collector);
    if (!r.passed) {
      std::printf("%s killed after %d cases by %s; shrunk counterexample:\n%s\n",
                  GetParam().c_str(), r.cases + 1, p.name.c_str(), r.message.c_str());
      return;
    }
  }
  ADD_FAILURE() << GetParam() << " SURVIVED " << params.cases << " cases of every property";
}

INSTANTIATE_TEST_SUITE_P(Linear, LinearMutant, testing::ValuesIn(mutant_names()), test_name);

}  // namespace
}  // namespace shardcheck::check
