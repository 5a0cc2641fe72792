// What the layout tests share: mesh-dimension names, a check that a call throws a UsageError
// whose message holds given words, and a test of an exception's type.
#pragma once

#include "runtime/errors.hpp"
#include "runtime/exception_holds.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace shardcheck::layout_test {

inline const char* const kMeshNames[] = {"pp", "dp", "cp", "tp"};

inline void expect_usage_error(const std::function<void()>& f,
                               const std::vector<std::string>& words) {
  try {
    f();
    ADD_FAILURE() << "no UsageError";
  } catch (const UsageError& e) {
    for (const auto& w : words) {
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
  }
}

// Whether the exception `e` is an E (../runtime/exception_holds.hpp).
using test_support::holds;

}  // namespace shardcheck::layout_test
