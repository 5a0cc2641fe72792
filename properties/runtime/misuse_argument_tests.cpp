// Misuse of the runtime (issue 2), bad arguments: every argument check of the collectives, the
// point-to-point calls, group() and run() (buffer sizes, counts, roots, algorithms, overlap,
// reduce ops on integers, group lists, world sizes, SHARDCHECK_TIMEOUT_MS, run() inside a rank)
// is a UsageError from the rank whose arguments are wrong, naming the rank, the call, the sizes
// involved and what to pass instead.
#include "misuse_programs.hpp"
#include "misuse_support.hpp"
#include "testing/usage_cases.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace shardcheck::misuse_testing {
namespace {

TEST(misuse, recv_too_small_is_a_usage_error_on_that_rank) {
  const auto f = run_expecting_failure(3, [](Communicator& c) {
    std::vector<float> x(4), y(c.rank() == 1 ? 3 : 4);
    c.all_reduce(std::span<const float>(x), std::span<float>(y), ReduceOp::sum);
  });
  expect_primary<UsageError>(f, 1, {"rank 1", "[0,1,2]", "all_reduce", "4", "3"});
  EXPECT_EQ(ranks_with<PeerAborted>(*f.error), (std::vector<int>{0, 2}));
  EXPECT_LT(f.elapsed, kPrompt);
}

// Every argument check of the collectives and point-to-point calls: the error comes from the
// rank whose arguments are wrong, and its message names the rank, the call, the sizes involved
// and what to pass instead.
TEST(misuse, every_bad_argument_is_a_usage_error_that_says_what_to_pass) {
  using Counts = std::vector<std::size_t>;
  const std::vector<test::RankUsageCase> cases = {
      {"all_reduce: send and recv partially overlap",
       2,
       [](Communicator& c) {
         std::vector<float> buf(5);
         c.all_reduce(std::span<const float>(buf.data(), 4), std::span<float>(buf.data() + 1, 4),
                      ReduceOp::sum);
       },
       0,
       {"all_reduce", "overlap"}},
      {"ring_shift: send and recv are the same buffer",
       2,
       [](Communicator& c) {
         std::vector<float> buf(4);
         c.ring_shift(std::span<const float>(buf.data(), 2), std::span<float>(buf.data(), 2));
       },
       0,
       {"ring_shift", "overlap"}},
      {"broadcast: root out of range",
       3,
       misuse_programs::root_out_of_range,
       0,
       {"broadcast", "root 3"}},
      {"all_gather: counts of the wrong length",
       3,
       misuse_programs::counts_of_the_wrong_length,
       0,
       {"all_gather", "2 entries", "3 ranks"}},
      {"all_gather: send differs from its count",
       3,
       [](Communicator& c) {
         const Counts counts = {1, 2, 2};
         std::vector<float> x(c.rank() == 2 ? 1 : counts[static_cast<std::size_t>(c.rank())]), y(5);
         c.all_gather(std::span<const float>(x), std::span<float>(y), counts);
       },
       2,
       {"rank 2", "all_gather", "counts[2] = 2"}},
      {"all_reduce: avg on integers", 2, misuse_programs::avg_on_integers, 0, {"avg", "int32"}},
      {"send: to oneself", 1, misuse_programs::sending_to_oneself, 0, {"send", "itself"}},
      {"reduce: root recv too small",
       2,
       misuse_programs::reduce_root_recv_too_small,
       1,
       {"rank 1", "reduce", "recv on the root has 3", "send has 4", "whole result"}},
      {"reduce: root out of range",
       2,
       [](Communicator& c) {
         std::vector<float> x(4), y(4);
         c.reduce(std::span<const float>(x), std::span<float>(y), ReduceOp::sum, -1);
       },
       0,
       {"reduce", "root -1", "[0, 2)"}},
      {"all_reduce: direct is not an algorithm of it",
       2,
       [](Communicator& c) {
         std::vector<float> x(4);
         c.all_reduce(std::span<float>(x), ReduceOp::sum, Algorithm::direct);
       },
       0,
       {"all_reduce", "algorithm direct", "Algorithm::ring or Algorithm::sequential"}},
      {"all_gather: recv does not hold every piece",
       2,
       misuse_programs::all_gather_recv_missing_a_piece,
       0,
       {"rank 0", "all_gather", "recv has 2", "[1,2]", "add up to 3", "every rank's piece"}},
      {"reduce_scatter: send is not the whole buffer",
       2,
       [](Communicator& c) {
         const Counts counts = {2, 1};
         std::vector<float> x(c.rank() == 1 ? 2 : 3), y(counts[static_cast<std::size_t>(c.rank())]);
         c.reduce_scatter(std::span<const float>(x), std::span<float>(y), counts, ReduceOp::sum);
       },
       1,
       {"rank 1", "reduce_scatter", "send has 2", "add up to 3", "whole buffer"}},
      {"reduce_scatter: recv is not this rank's chunk",
       2,
       [](Communicator& c) {
         const Counts counts = {2, 1};
         std::vector<float> x(3), y(2);
         c.reduce_scatter(std::span<const float>(x), std::span<float>(y), counts, ReduceOp::sum);
       },
       1,
       {"rank 1", "reduce_scatter", "recv has 2", "counts[1] = 1", "this rank's chunk"}},
      {"reduce_scatter: direct is not an algorithm of it",
       2,
       [](Communicator& c) {
         const Counts counts = {1, 1};
         std::vector<float> x(2), y(1);
         c.reduce_scatter(std::span<const float>(x), std::span<float>(y), counts, ReduceOp::sum,
                          Algorithm::direct);
       },
       0,
       {"reduce_scatter", "algorithm direct", "Algorithm::ring or Algorithm::sequential"}},
      {"reduce_scatter: recv inside send but not its own chunk",
       2,
       [](Communicator& c) {
         const Counts counts = {2, 2};
         std::vector<float> x(4);
         c.reduce_scatter(std::span<const float>(x.data(), 4), std::span<float>(x.data() + 1, 2),
                          counts, ReduceOp::sum);
       },
       0,
       {"reduce_scatter", "overlap", "own chunk"}},
      {"all_to_all: send_counts do not add up to send",
       2,
       [](Communicator& c) {
         const Counts counts = {1, 1};
         std::vector<float> x(c.rank() == 1 ? 3 : 2), y(2);
         c.all_to_all(std::span<const float>(x), counts, std::span<float>(y), counts);
       },
       1,
       {"rank 1", "all_to_all", "send has 3", "send_counts [1,1] add up to 2"}},
      {"all_to_all: recv_counts do not add up to recv",
       2,
       [](Communicator& c) {
         const Counts counts = {1, 1};
         std::vector<float> x(2), y(c.rank() == 0 ? 1 : 2);
         c.all_to_all(std::span<const float>(x), counts, std::span<float>(y), counts);
       },
       0,
       {"rank 0", "all_to_all", "recv has 1", "recv_counts [1,1] add up to 2"}},
      {"all_to_all: recv_counts of the wrong length",
       2,
       [](Communicator& c) {
         const Counts send_counts = {1, 1}, recv_counts = {2};
         std::vector<float> x(2), y(2);
         c.all_to_all(std::span<const float>(x), send_counts, std::span<float>(y), recv_counts);
       },
       0,
       {"all_to_all", "recv_counts has 1 entries", "2 ranks", "one count per rank"}},
      {"gather: send differs from its count",
       3,
       [](Communicator& c) {
         const Counts counts = {1, 2, 0};
         std::vector<float> x(c.rank() == 1 ? 1 : counts[static_cast<std::size_t>(c.rank())]), y(3);
         c.gather(std::span<const float>(x), std::span<float>(y), counts, 0);
       },
       1,
       {"rank 1", "gather", "send has 1", "counts[1] = 2", "send.size()"}},
      {"gather: the root's recv does not hold every piece",
       3,
       [](Communicator& c) {
         const Counts counts = {1, 2, 0};
         std::vector<float> x(counts[static_cast<std::size_t>(c.rank())]), y(2);
         c.gather(std::span<const float>(x), std::span<float>(y), counts, 2);
       },
       2,
       {"rank 2", "gather", "recv on the root has 2", "add up to 3", "every rank's piece"}},
      {"gather: root out of range",
       2,
       [](Communicator& c) {
         const Counts counts = {1, 1};
         std::vector<float> x(1), y(2);
         c.gather(std::span<const float>(x), std::span<float>(y), counts, 2);
       },
       0,
       {"gather", "root 2", "[0, 2)"}},
      {"scatter: recv differs from its count",
       3,
       [](Communicator& c) {
         const Counts counts = {0, 2, 1};
         std::vector<float> x(3), y(c.rank() == 2 ? 2 : counts[static_cast<std::size_t>(c.rank())]);
         c.scatter(std::span<const float>(x), std::span<float>(y), counts, 0);
       },
       2,
       {"rank 2", "scatter", "recv has 2", "counts[2] = 1", "recv.size()"}},
      {"scatter: the root's send does not hold every piece",
       2,
       [](Communicator& c) {
         const Counts counts = {1, 1};
         std::vector<float> x(c.rank() == 1 ? 1 : 2), y(1);
         c.scatter(std::span<const float>(x), std::span<float>(y), counts, 1);
       },
       1,
       {"rank 1", "scatter", "send on the root has 1", "add up to 2", "every rank's piece"}},
      {"scatter: counts of the wrong length",
       2,
       [](Communicator& c) {
         const Counts counts = {1, 1, 1};
         std::vector<float> x(3), y(1);
         c.scatter(std::span<const float>(x), std::span<float>(y), counts, 0);
       },
       0,
       {"scatter", "counts has 3 entries", "2 ranks"}},
      {"send: destination out of range",
       2,
       [](Communicator& c) {
         std::vector<float> x(1);
         if (c.rank() == 0) c.send(std::span<const float>(x), 5);
       },
       0,
       {"rank 0", "send", "destination 5", "group of 2"}},
      {"recv: source out of range",
       2,
       [](Communicator& c) {
         std::vector<float> x(1);
         if (c.rank() == 1) c.recv(std::span<float>(x), -1);
       },
       1,
       {"rank 1", "recv", "source -1", "cannot receive from itself"}},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    const auto f = run_expecting_failure(k.p, k.call);
    expect_primary<UsageError>(f, k.rank, k.parts);
    EXPECT_LT(f.elapsed, kPrompt);
  }
}

TEST(misuse, bad_group_lists_are_usage_errors) {
  const std::vector<std::vector<int>> bad = {{0, 0}, {0, 5}, {-1, 0}, {}};
  const std::vector<const char*> why = {"twice", "5", "-1", "empty"};
  for (std::size_t i = 0; i < bad.size(); ++i) {
    const auto f = run_expecting_failure(3, [&](Communicator& c) { c.group(bad[i]); });
    expect_primary<UsageError>(f, 0, {"group", why[i]});
  }
  // Missing self: rank 0 asks for a group of the others.
  const auto f = run_expecting_failure(3, [](Communicator& c) {
    const std::vector<int> others = {1, 2};
    if (c.rank() == 0) c.group(others);
  });
  expect_primary<UsageError>(f, 0, {"group", "calling rank"});
}

TEST(misuse, run_with_no_ranks_or_too_many_is_a_usage_error) {
  const std::string range = "; use 1 to " + std::to_string(max_world_size) + " ranks";
  for (const int p : {0, -1, max_world_size + 1}) {
    SCOPED_TRACE(p);
    const std::string message = message_of<UsageError>([p] { run(p, [](Communicator&) {}); });
    expect_mentions(message, {"run: world size ", "is out of range", range});
    EXPECT_NE(message.find(std::to_string(p)), std::string::npos) << message;
  }
}

// A malformed SHARDCHECK_TIMEOUT_MS is refused when the default timeout is read, naming it.
TEST(misuse, a_timeout_variable_that_is_not_a_positive_number_is_a_usage_error) {
  const char* saved = std::getenv("SHARDCHECK_TIMEOUT_MS");
  const std::string restore = saved != nullptr ? saved : "";
  for (const char* bad : {"abc", "0", "-5", "12ms"}) {
    SCOPED_TRACE(bad);
    ASSERT_EQ(setenv("SHARDCHECK_TIMEOUT_MS", bad, 1), 0);
    const std::string message = message_of<UsageError>([] { (void)RunOptions::default_timeout(); });
    expect_mentions(
        message, {"is not a positive number of milliseconds", "set it to e.g. 60000 or unset it"});
    EXPECT_NE(message.find("SHARDCHECK_TIMEOUT_MS='" + std::string(bad) + "'"), std::string::npos)
        << message;
  }
  if (saved != nullptr) {
    setenv("SHARDCHECK_TIMEOUT_MS", restore.c_str(), 1);
  } else {
    unsetenv("SHARDCHECK_TIMEOUT_MS");
  }
}

TEST(misuse, run_inside_a_rank_is_a_usage_error) {
  for (const int outer : {2, 1}) {
    const auto f =
        run_expecting_failure(outer, [](Communicator&) { run(2, [](Communicator&) {}); });
    expect_primary<UsageError>(f, 0,
                               {"run: called from inside a parallel region",
                                "ranks cannot start ranks", "Call run() from the main thread"});
  }
}

}  // namespace
}  // namespace shardcheck::misuse_testing
