// A test of an exception's type, shared by the runtime and layout tests: whether a captured
// exception (RankFailure::cause(), RankError::error) is an E.
#pragma once

#include <exception>

namespace shardcheck::test_support {

// Whether the exception `e` is an E (or derives from it).
template <class E>
bool holds(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace shardcheck::test_support
