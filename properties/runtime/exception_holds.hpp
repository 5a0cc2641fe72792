// Tests of an exception's type, shared by the runtime, layout and ops tests: whether a captured
// exception (RankFailure::cause(), RankError::error) is an E, and the message of a call that
// must throw an E.
#pragma once

#include "runtime/errors.hpp"

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>

namespace shardcheck::test_support {

// Whether the exception `e` is an E (or derives from it): runtime/errors.hpp.
using shardcheck::holds;

// The message of fn()'s exception, which must be an E ("" and a test failure otherwise).
template <class E>
std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception of the expected type was thrown";
  return {};
}

}  // namespace shardcheck::test_support
