// run() under an OpenMP thread limit: ctest runs this program with OMP_THREAD_LIMIT=2
// (properties/CMakeLists.txt), so OpenMP cannot start a thread per rank for more than two
// ranks. That must be an error saying what to raise, never a run with ranks missing.
#include "runtime/errors.hpp"
#include "runtime/launcher.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace shardcheck {
namespace {

TEST(thread_limit, the_test_runs_under_a_thread_limit_of_two) {
  const char* limit = std::getenv("OMP_THREAD_LIMIT");
  ASSERT_NE(limit, nullptr) << "run this program with OMP_THREAD_LIMIT=2, as ctest does";
  EXPECT_EQ(std::string(limit), "2");
}

TEST(thread_limit, more_ranks_than_the_limit_is_an_error_saying_what_to_raise) {
  std::atomic<int> ran{0};
  try {
    run(4, [&](Communicator&) { ++ran; });
    FAIL() << "run(4) returned under OMP_THREAD_LIMIT=2";
  } catch (const UsageError&) {
    FAIL() << "a thread limit is not a usage error of run()'s arguments";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const char* part : {"run: OpenMP started 2 threads for 4 ranks", "raise OMP_THREAD_LIMIT",
                             "every rank gets its own thread"}) {
      EXPECT_NE(what.find(part), std::string::npos) << "message lacks \"" << part << "\":\n"
                                                    << what;
    }
  }
  EXPECT_EQ(ran.load(), 0) << "no rank may run when some rank has no thread";
}

TEST(thread_limit, ranks_within_the_limit_run) {
  std::atomic<int> ran{0};
  run(2, [&](Communicator& c) {
    c.barrier();
    ++ran;
  });
  EXPECT_EQ(ran.load(), 2);
}

}  // namespace
}  // namespace shardcheck
