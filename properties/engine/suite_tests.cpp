// Every suite that ships with shardcheck as tests: each property passes on the library's
// implementation, and each mutant of each catalog is killed. The same runner as `shardcheck
// check` / `shardcheck mutants`, with the same default seed (1), so a failure here replays
// there:
//   shardcheck check <suite> --property <p> --seed 1 --cases <n>
//   shardcheck mutants <suite> --seed 1 --cases <n>
// gtest names: Suites/SuiteProperty.HoldsForTheLibrary/<suite>_<property>,
//              Suites/SuiteMutant.IsKilled/<suite>_mutant_<name>
#include "engine/runner.hpp"
#include "engine/suite.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

namespace shardcheck::check {
namespace {

constexpr std::uint64_t seed = 1;

struct Item {
  std::string suite;
  std::string name;  // a property, or a mutant implementation
};

const Suite& suite_named(const std::string& name) {
  register_builtin_suites();
  return *SuiteRegistry::instance().find(name);
}

std::vector<Item> properties() {
  register_builtin_suites();
  std::vector<Item> out;
  for (const auto& s : SuiteRegistry::instance().all()) {
    for (const auto& p : s->properties()) out.push_back({s->name(), p.name});
  }
  return out;
}

std::vector<Item> mutants() {
  register_builtin_suites();
  std::vector<Item> out;
  for (const auto& s : SuiteRegistry::instance().all()) {
    for (const auto& i : s->implementations()) {
      if (i.is_mutant) out.push_back({s->name(), i.name});
    }
  }
  return out;
}

std::string test_name(const testing::TestParamInfo<Item>& info) {
  std::string s = info.param.suite + "_" + info.param.name;
  for (auto& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

RunParams default_params() {
  RunParams params;
  params.seed = seed;
  params.cases = SHARDCHECK_RC_MAX_SUCCESS;
  return params;
}

class SuiteProperty : public testing::TestWithParam<Item> {};

TEST_P(SuiteProperty, HoldsForTheLibrary) {
  const Suite& s = suite_named(GetParam().suite);
  const auto params = default_params();
  Collector collector;
  const auto r = run_property(s, GetParam().name, "shardcheck", RunConfig{}, params, collector);
  std::printf("%s %s: %d cases, worst bound ratio %.3g\n", GetParam().suite.c_str(),
              GetParam().name.c_str(), r.cases, r.max_ratio);
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_EQ(r.cases, params.cases);
  // A bound ratio of exactly 0 over a whole run means nothing was compared numerically (a
  // property that cannot fail); the numeric properties must have measured something.
  for (const auto& p : s.properties()) {
    if (p.name == GetParam().name && p.numeric) {
      EXPECT_GT(r.max_ratio, 0.0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Suites, SuiteProperty, testing::ValuesIn(properties()), test_name);

class SuiteMutant : public testing::TestWithParam<Item> {};

// Each mutant must fail some property of its suite within the case count the test command
// uses. The kill is printed: which property, after how many cases, the shrunk counterexample.
TEST_P(SuiteMutant, IsKilled) {
  const Suite& s = suite_named(GetParam().suite);
  const auto params = default_params();
  Collector collector;
  const auto kill = kill_mutant(s, GetParam().name, RunConfig{}, params, collector);
  if (kill.killed) {
    std::printf("%s killed after %d cases by %s; shrunk counterexample:\n%s\n",
                GetParam().name.c_str(), kill.cases, kill.killed_by.c_str(),
                kill.counterexample.c_str());
    return;
  }
  ADD_FAILURE() << GetParam().name << " SURVIVED " << params.cases << " cases of every property of "
                << GetParam().suite;
}

INSTANTIATE_TEST_SUITE_P(Suites, SuiteMutant, testing::ValuesIn(mutants()), test_name);

}  // namespace
}  // namespace shardcheck::check
