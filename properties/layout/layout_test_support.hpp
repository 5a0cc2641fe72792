// What the layout tests share: mesh-dimension names, a check that a call throws a UsageError
// whose message holds given words, and a test of an exception's type.
#pragma once

#include "runtime/errors.hpp"
#include "runtime/exception_holds.hpp"

#include <gtest/gtest.h>

#include <cstddef>
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

// The assembled partial term that the rank at mesh coordinates c holds: its coordinates along the
// partial mesh dimensions `partial`, read as one mixed-radix number.
template <class Mesh, class Coordinates>
std::size_t partial_term(const Mesh& mesh, const std::vector<std::size_t>& partial,
                         const Coordinates& c) {
  std::size_t t = 0;
  for (const auto i : partial) {
    t = t * static_cast<std::size_t>(mesh.size(i)) + static_cast<std::size_t>(c[i]);
  }
  return t;
}

}  // namespace shardcheck::layout_test
