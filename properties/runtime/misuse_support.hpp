// What the runtime's misuse tests share (properties/runtime/misuse_*_tests.cpp, the program
// runtime_misuse_tests): a run that must fail within a short timeout (300 ms, so that a misuse
// the runtime failed to recognise at once shows up as a TimeoutError, the wrong type, rather
// than as a slow pass), the bound on how promptly recognised misuse must be reported, and the
// checks of a RankFailure: which ranks hold which exception and what its messages name.
#pragma once

#include "exception_holds.hpp"
#include "runtime/errors.hpp"
#include "runtime/launcher.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace shardcheck::misuse_testing {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test_support::holds;
using test_support::message_of;

constexpr auto kTimeout = 300ms;
// Recognised misuse (mismatch, deadlock, bad argument) is reported without waiting for the
// timeout; this bound only has to exceed thread start-up and sanitizer slowdown.
constexpr auto kPrompt = 3s;

struct Failure {
  std::optional<RankFailure> error;
  Clock::duration elapsed{};
};

inline Failure run_expecting_failure(int p, const std::function<void(Communicator&)>& fn,
                                     std::chrono::milliseconds timeout = kTimeout) {
  Failure f;
  RunOptions options;
  options.timeout = timeout;
  const auto start = Clock::now();
  try {
    run(p, fn, options);
  } catch (const RankFailure& e) {
    f.error = e;
  }
  f.elapsed = Clock::now() - start;
  return f;
}

inline std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

// The ranks whose exception is an E.
template <class E>
std::vector<int> ranks_with(const RankFailure& f) {
  std::vector<int> r;
  for (const auto& e : f.all()) {
    if (holds<E>(e.error)) r.push_back(e.rank);
  }
  return r;
}

inline void expect_mentions(const std::string& text, const std::vector<std::string>& parts) {
  for (const auto& part : parts) {
    EXPECT_NE(text.find(part), std::string::npos) << "message lacks \"" << part << "\":\n" << text;
  }
}

// The run failed, its primary failure is an E on `rank`, and the message names `parts`.
template <class E>
void expect_primary(const Failure& f, int rank, const std::vector<std::string>& parts) {
  ASSERT_TRUE(f.error.has_value()) << "run() returned normally";
  EXPECT_EQ(f.error->rank(), rank) << f.error->what();
  EXPECT_TRUE(holds<E>(f.error->cause())) << f.error->what();
  expect_mentions(what_of(f.error->cause()), parts);
  expect_mentions(f.error->what(), {"rank"});
}

inline std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace shardcheck::misuse_testing
