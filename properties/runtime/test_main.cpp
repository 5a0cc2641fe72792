// The main of the runtime's test programs. It fixes RapidCheck's parameters so that every run
// of a suite draws the same cases (the seed is per suite, set in properties/CMakeLists.txt and
// read from rc_defaults.hpp's variables),
// unless RC_PARAMS is already set, and prints them so a run can be repeated.
//
//   replay a failure:
//     RC_PARAMS="reproduce=<string printed by the failure>" <program> --gtest_filter=<test>
//   another seed:
//     RC_PARAMS="seed=123 max_success=1000" <program>
//
// RapidCheck reads RC_PARAMS when it first needs its configuration (the first property), so
// setting it here, before any test runs, takes effect.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "rc_defaults.hpp"

int main(int argc, char** argv) {
  const char* given = std::getenv("RC_PARAMS");
  const std::string params = given != nullptr
                                 ? std::string(given)
                                 : "seed=" + std::to_string(shardcheck_rc_seed) +
                                       " max_success=" + std::to_string(shardcheck_rc_max_success);
  if (given == nullptr) setenv("RC_PARAMS", params.c_str(), 1);
  bool listing = false;  // ctest parses --gtest_list_tests output: print nothing else then
  for (int i = 1; i < argc; ++i) listing = listing || std::string(argv[i]) == "--gtest_list_tests";
  if (!listing) {
    std::printf("RapidCheck: RC_PARAMS=\"%s\"%s\n", params.c_str(),
                given != nullptr ? " (from the environment)"
                                 : " (suite default; set RC_PARAMS to override)");
    std::fflush(stdout);
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
