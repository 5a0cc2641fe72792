// Misuse of the runtime is an error, never a hang and never silent garbage (issue 2): each test
// provokes one misuse and checks the exception's type on every rank, the identifying parts of
// its message (step, ranks, group, what each called), and that it came in bounded time. The
// run timeout is short (300 ms) so that a misuse the runtime failed to recognise at once shows
// up as a TimeoutError (wrong type) rather than a slow pass.
//
// Also here: the limits that are not misuse (P = 16 on 2 cores, P = 1 for every collective).
#include "exception_holds.hpp"
#include "runtime/errors.hpp"
#include "runtime/launcher.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace shardcheck {
namespace {

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

Failure run_expecting_failure(int p, const std::function<void(Communicator&)>& fn,
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

std::string what_of(const std::exception_ptr& e) {
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

void expect_mentions(const std::string& text, const std::vector<std::string>& parts) {
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

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// ---------------------------------------------------------------- collective mismatches

TEST(misuse, different_collectives_at_one_step_raise_collective_mismatch_on_every_rank) {
  const auto f = run_expecting_failure(3, [](Communicator& c) {
    std::vector<float> x(4), y(12);
    if (c.rank() == 2) c.all_gather(std::span<const float>(x), std::span<float>(y));
    else c.all_reduce(std::span<float>(x), ReduceOp::sum);
  });
  expect_primary<CollectiveMismatch>(f, 0,
                                     {"step 0", "[0,1,2]", "all_reduce", "all_gather", "rank 2"});
  EXPECT_EQ(ranks_with<CollectiveMismatch>(*f.error), iota(3));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, different_counts_raise_collective_mismatch_naming_the_step) {
  const auto f = run_expecting_failure(3, [](Communicator& c) {
    c.barrier();  // the mismatch is at step 1
    std::vector<double> x(c.rank() == 1 ? 5 : 4);
    c.all_reduce(std::span<double>(x), ReduceOp::sum);
  });
  expect_primary<CollectiveMismatch>(f, 0, {"step 1", "count", "rank 1", "5", "4"});
  EXPECT_EQ(ranks_with<CollectiveMismatch>(*f.error), iota(3));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, different_roots_raise_collective_mismatch) {
  const auto f = run_expecting_failure(3, [](Communicator& c) {
    std::vector<int> x(3);
    c.broadcast(std::span<int>(x), c.rank() == 2 ? 1 : 0);
  });
  expect_primary<CollectiveMismatch>(f, 0, {"step 0", "root", "broadcast", "rank 2"});
  EXPECT_EQ(ranks_with<CollectiveMismatch>(*f.error), iota(3));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, different_reduce_ops_raise_collective_mismatch) {
  const auto f = run_expecting_failure(4, [](Communicator& c) {
    std::vector<float> x(8);
    c.all_reduce(std::span<float>(x), c.rank() == 3 ? ReduceOp::max : ReduceOp::sum);
  });
  expect_primary<CollectiveMismatch>(f, 0, {"step 0", "reduce op", "sum", "max", "rank 3"});
  EXPECT_EQ(ranks_with<CollectiveMismatch>(*f.error), iota(4));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, different_element_types_raise_collective_mismatch) {
  const auto f = run_expecting_failure(2, [](Communicator& c) {
    std::vector<float> x(8);
    std::vector<double> y(8);
    if (c.rank() == 0) c.all_reduce(std::span<float>(x), ReduceOp::sum);
    else c.all_reduce(std::span<double>(y), ReduceOp::sum);
  });
  expect_primary<CollectiveMismatch>(f, 0, {"step 0", "element type", "float32", "float64"});
  EXPECT_EQ(ranks_with<CollectiveMismatch>(*f.error), iota(2));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, different_algorithms_raise_collective_mismatch) {
  const auto f = run_expecting_failure(3, [](Communicator& c) {
    std::vector<float> x(8);
    c.all_reduce(std::span<float>(x), ReduceOp::sum,
                 c.rank() == 0 ? Algorithm::sequential : Algorithm::ring);
  });
  expect_primary<CollectiveMismatch>(f, 0, {"step 0", "algorithm", "ring", "sequential"});
  EXPECT_EQ(ranks_with<CollectiveMismatch>(*f.error), iota(3));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, a_mismatch_on_a_subgroup_names_its_members_and_world_ranks) {
  const auto f = run_expecting_failure(4, [](Communicator& c) {
    if (c.rank() == 3) return;
    const std::vector<int> ranks = {2, 0, 1};
    auto g = c.group(ranks);
    std::vector<float> x(4), y(12);
    if (g->rank() == 1) g->all_gather(std::span<const float>(x), std::span<float>(y));
    else g->all_reduce(std::span<float>(x), ReduceOp::sum);
  });
  // Group rank 1 is world rank 0.
  expect_primary<CollectiveMismatch>(f, 0,
                                     {"step 0", "[2,0,1]", "rank 1 (world rank 0)", "all_gather"});
  EXPECT_EQ(ranks_with<CollectiveMismatch>(*f.error), iota(3));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, send_and_recv_that_disagree_raise_collective_mismatch_on_both) {
  const auto f = run_expecting_failure(2, [](Communicator& c) {
    std::vector<float> x(4);
    std::vector<float> y(5);
    if (c.rank() == 0) c.send(std::span<const float>(x), 1, 3);
    else c.recv(std::span<float>(y), 0, 3);
  });
  expect_primary<CollectiveMismatch>(f, 0, {"send", "recv", "4", "5", "rank 0", "rank 1"});
  EXPECT_EQ(ranks_with<CollectiveMismatch>(*f.error), iota(2));
  EXPECT_LT(f.elapsed, kPrompt);
}

// ---------------------------------------------------------------- ranks that never arrive

TEST(misuse, a_rank_that_returns_early_makes_the_others_fail_with_deadlock_error) {
  const auto f = run_expecting_failure(3, [](Communicator& c) {
    if (c.rank() == 2) return;
    c.barrier();
  });
  expect_primary<DeadlockError>(f, 0, {"rank 2", "returned", "barrier", "step 0", "[0,1,2]"});
  EXPECT_EQ(ranks_with<DeadlockError>(*f.error), (std::vector<int>{0, 1}));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, a_rank_that_throws_surfaces_with_its_rank_and_the_others_are_peer_aborted) {
  const auto f = run_expecting_failure(3, [](Communicator& c) {
    if (c.rank() == 1) throw std::runtime_error("boom on rank 1");
    c.barrier();
  });
  ASSERT_TRUE(f.error.has_value());
  EXPECT_EQ(f.error->rank(), 1);
  EXPECT_THROW(f.error->rethrow_cause(), std::runtime_error);
  EXPECT_EQ(what_of(f.error->cause()), "boom on rank 1");
  expect_mentions(f.error->what(), {"rank 1", "boom on rank 1"});
  EXPECT_EQ(ranks_with<PeerAborted>(*f.error), (std::vector<int>{0, 2}));
  ASSERT_EQ(f.error->all().size(), 3u);
  expect_mentions(f.error->all()[0].what,
                  {"rank 0 stopped waiting in", "barrier", "rank 1 failed first (see its error)"});
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, two_ranks_sending_to_each_other_raise_deadlock_error) {
  const auto f = run_expecting_failure(2, [](Communicator& c) {
    std::vector<float> x(4), y(4);
    c.send(std::span<const float>(x), 1 - c.rank());
    c.recv(std::span<float>(y), 1 - c.rank());
  });
  expect_primary<DeadlockError>(f, 0, {"send to rank 1", "send to rank 0", "ring_shift"});
  EXPECT_EQ(ranks_with<DeadlockError>(*f.error), iota(2));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, crossed_groups_raise_deadlock_error_naming_both_groups) {
  // Rank 0 waits on the world; rank 1 on [1,2]; rank 2 on the world first, then [1,2].
  const auto f = run_expecting_failure(3, [](Communicator& c) {
    if (c.rank() == 0) {
      c.barrier();
      return;
    }
    const std::vector<int> ranks = {1, 2};
    auto sub = c.group(ranks);
    if (c.rank() == 2) c.barrier();
    sub->barrier();
    if (c.rank() == 1) c.barrier();
  });
  expect_primary<DeadlockError>(f, 0, {"[0,1,2]", "[1,2]", "barrier"});
  EXPECT_EQ(ranks_with<DeadlockError>(*f.error), iota(3));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, a_rank_stuck_computing_makes_the_others_time_out) {
  constexpr auto stuck = 1000ms;
  const auto f = run_expecting_failure(3, [&](Communicator& c) {
    if (c.rank() == 1) std::this_thread::sleep_for(stuck);
    c.barrier();
  });
  ASSERT_TRUE(f.error.has_value());
  // Ranks 0 and 2 wait with the same deadline; the first to reach it reports TimeoutError and
  // releases the other with PeerAborted. The message names the rank that never arrived.
  const int first = f.error->rank();
  EXPECT_TRUE(first == 0 || first == 2) << f.error->what();
  expect_primary<TimeoutError>(f, first, {"300 ms", "barrier", "[0,1,2]", "rank 1: running"});
  EXPECT_EQ(ranks_with<TimeoutError>(*f.error), std::vector<int>{first});
  for (const auto& e : f.error->all()) {
    if (e.rank != first) {
      EXPECT_TRUE(holds<PeerAborted>(e.error)) << e.rank << ": " << e.what;
    }
  }
  EXPECT_LT(f.elapsed, stuck + kPrompt);
}

// After its peers timed out and unwound, a late rank must not complete the collective: the
// peers' buffers are gone (ASan sees a use-after-free if it reads them) and they never got
// the result.
TEST(misuse, a_late_rank_does_not_complete_a_collective_its_peers_abandoned) {
  const auto f = run_expecting_failure(2, [](Communicator& c) {
    if (c.rank() == 1) std::this_thread::sleep_for(900ms);
    std::vector<double> x(4096, 1.0);
    c.all_reduce(std::span<double>(x), ReduceOp::sum);
  });
  expect_primary<TimeoutError>(f, 0, {"all_reduce"});
  EXPECT_EQ(ranks_with<PeerAborted>(*f.error), (std::vector<int>{1}));
}

// The same for point to point: a sender that timed out retracts its message, so a late
// receiver gets PeerAborted instead of copying from the sender's freed buffer.
TEST(misuse, a_late_receiver_does_not_read_a_message_whose_sender_gave_up) {
  const auto f = run_expecting_failure(2, [](Communicator& c) {
    std::vector<double> x(4096, 1.0);
    if (c.rank() == 0) {
      c.send(std::span<const double>(x), 1);
    } else {
      std::this_thread::sleep_for(900ms);
      c.recv(std::span<double>(x), 0);
    }
  });
  expect_primary<TimeoutError>(f, 0, {"send"});
  EXPECT_EQ(ranks_with<PeerAborted>(*f.error), (std::vector<int>{1}));
}

// ---------------------------------------------------------------- bad arguments

TEST(misuse, recv_too_small_is_a_usage_error_on_that_rank) {
  const auto f = run_expecting_failure(3, [](Communicator& c) {
    std::vector<float> x(4), y(c.rank() == 1 ? 3 : 4);
    c.all_reduce(std::span<const float>(x), std::span<float>(y), ReduceOp::sum);
  });
  expect_primary<UsageError>(f, 1, {"rank 1", "[0,1,2]", "all_reduce", "4", "3"});
  EXPECT_EQ(ranks_with<PeerAborted>(*f.error), (std::vector<int>{0, 2}));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, root_out_of_range_is_a_usage_error) {
  const auto f = run_expecting_failure(3, [](Communicator& c) {
    std::vector<float> x(4);
    c.broadcast(std::span<float>(x), 3);
  });
  expect_primary<UsageError>(f, 0, {"broadcast", "root 3"});
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, counts_of_the_wrong_length_are_a_usage_error) {
  const auto f = run_expecting_failure(3, [](Communicator& c) {
    const std::vector<std::size_t> counts = {1, 1};
    std::vector<float> x(1), y(2);
    c.all_gather(std::span<const float>(x), std::span<float>(y), counts);
  });
  expect_primary<UsageError>(f, 0, {"all_gather", "2 entries", "3 ranks"});
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, send_size_differing_from_its_count_is_a_usage_error_on_that_rank) {
  const auto f = run_expecting_failure(3, [](Communicator& c) {
    const std::vector<std::size_t> counts = {1, 2, 2};
    std::vector<float> x(c.rank() == 2 ? 1 : counts[static_cast<std::size_t>(c.rank())]), y(5);
    c.all_gather(std::span<const float>(x), std::span<float>(y), counts);
  });
  expect_primary<UsageError>(f, 2, {"rank 2", "all_gather", "counts[2] = 2"});
  EXPECT_LT(f.elapsed, kPrompt);
}

// Every argument check of the collectives and point-to-point calls: the error comes from the
// rank whose arguments are wrong, and its message names the rank, the call, the sizes involved
// and what to pass instead.
TEST(misuse, every_bad_argument_is_a_usage_error_that_says_what_to_pass) {
  struct Case {
    const char* what;
    int p;
    std::function<void(Communicator&)> body;
    int rank;
    // Owned strings: an initializer_list member would dangle once the Case is copied.
    std::vector<std::string> parts;
  };
  using Counts = std::vector<std::size_t>;
  const std::vector<Case> cases = {
      {"reduce: root recv too small",
       2,
       [](Communicator& c) {
         std::vector<float> x(4), y(c.rank() == 1 ? 3 : 4);
         c.reduce(std::span<const float>(x), std::span<float>(y), ReduceOp::sum, 1);
       },
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
       [](Communicator& c) {
         const Counts counts = {1, 2};
         std::vector<float> x(counts[static_cast<std::size_t>(c.rank())]), y(c.rank() == 0 ? 2 : 3);
         c.all_gather(std::span<const float>(x), std::span<float>(y), counts);
       },
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
    SCOPED_TRACE(k.what);
    const auto f = run_expecting_failure(k.p, k.body);
    expect_primary<UsageError>(f, k.rank, k.parts);
    EXPECT_LT(f.elapsed, kPrompt);
  }
}

TEST(misuse, avg_on_integers_is_a_usage_error) {
  const auto f = run_expecting_failure(2, [](Communicator& c) {
    std::vector<std::int32_t> x(4);
    c.all_reduce(std::span<std::int32_t>(x), ReduceOp::avg);
  });
  expect_primary<UsageError>(f, 0, {"avg", "int32"});
  EXPECT_LT(f.elapsed, kPrompt);
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

TEST(misuse, partially_overlapping_send_and_recv_are_a_usage_error) {
  const auto f = run_expecting_failure(2, [](Communicator& c) {
    std::vector<float> buf(5);
    c.all_reduce(std::span<const float>(buf.data(), 4), std::span<float>(buf.data() + 1, 4),
                 ReduceOp::sum);
  });
  expect_primary<UsageError>(f, 0, {"all_reduce", "overlap"});
  const auto g = run_expecting_failure(2, [](Communicator& c) {
    std::vector<float> buf(4);
    c.ring_shift(std::span<const float>(buf.data(), 2), std::span<float>(buf.data(), 2));
  });
  expect_primary<UsageError>(g, 0, {"ring_shift", "overlap"});
}

TEST(misuse, sending_to_oneself_is_a_usage_error) {
  const auto f = run_expecting_failure(1, [](Communicator& c) {
    std::vector<float> x(1);
    c.send(std::span<const float>(x), 0);
  });
  expect_primary<UsageError>(f, 0, {"send", "itself"});
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

// ---------------------------------------------------------------- limits that are not misuse

// 16 ranks on 2 cores: waiting ranks must give their core to the rank being waited for.
TEST(limits, sixteen_ranks_run_every_kind_of_collective) {
  constexpr int p = 16;
  std::vector<std::int64_t> sums(p), gathered_ok(p);
  const auto start = Clock::now();
  run(p, [&](Communicator& c) {
    const auto r = static_cast<std::size_t>(c.rank());
    for (int round = 0; round < 5; ++round) {
      std::vector<std::int64_t> x(100, c.rank() + 1), y(100, c.rank() + 1);
      c.all_reduce(std::span<std::int64_t>(x), ReduceOp::sum, Algorithm::ring);
      c.all_reduce(std::span<std::int64_t>(y), ReduceOp::sum, Algorithm::sequential);
      std::vector<std::int64_t> mine(3, c.rank()), all(3 * p);
      c.all_gather(std::span<const std::int64_t>(mine), std::span<std::int64_t>(all));
      c.barrier();
      sums[r] = x[99] + y[0];
      gathered_ok[r] = all[3 * 7 + 1] == 7 && all[3 * 15 + 2] == 15;
    }
  });
  const auto elapsed = Clock::now() - start;
  for (int r = 0; r < p; ++r) {
    EXPECT_EQ(sums[static_cast<std::size_t>(r)], 2 * (p * (p + 1) / 2)) << r;
    EXPECT_TRUE(gathered_ok[static_cast<std::size_t>(r)]) << r;
  }
  EXPECT_LT(elapsed, 20s);
}

// P = 1: every collective is a copy (or nothing), and the ledger records no traffic.
TEST(limits, one_rank_runs_every_collective) {
  std::vector<std::string> failures;
  const auto result = run(1, [&](Communicator& c) {
    const std::vector<double> x = {1.5, -0.0, 3.0};
    const std::vector<std::size_t> counts = {3};
    auto check = [&](const char* what, const std::vector<double>& got) {
      if (got.size() != x.size() ||
          std::memcmp(got.data(), x.data(), x.size() * sizeof(double)) != 0)
        failures.push_back(what);
    };
    c.barrier();
    std::vector<double> b = x;
    c.broadcast(std::span<double>(b), 0);
    check("broadcast", b);
    std::vector<double> out(3);
    c.reduce(std::span<const double>(x), std::span<double>(out), ReduceOp::sum, 0);
    check("reduce", out);
    for (const auto algo : {Algorithm::ring, Algorithm::sequential}) {
      for (const auto op :
           {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min, ReduceOp::product}) {
        std::vector<double> a = x;
        c.all_reduce(std::span<double>(a), op, algo);
        check("all_reduce", a);
        std::vector<double> rs(3);
        c.reduce_scatter(std::span<const double>(x), std::span<double>(rs), counts, op, algo);
        check("reduce_scatter", rs);
      }
    }
    std::vector<double> ag(3), a2a(3), ga(3), sc(3), rs(3);
    c.all_gather(std::span<const double>(x), std::span<double>(ag), counts);
    check("all_gather", ag);
    c.all_to_all(std::span<const double>(x), counts, std::span<double>(a2a), counts);
    check("all_to_all", a2a);
    c.gather(std::span<const double>(x), std::span<double>(ga), counts, 0);
    check("gather", ga);
    c.scatter(std::span<const double>(x), std::span<double>(sc), counts, 0);
    check("scatter", sc);
    for (const int shift : {0, 1, -3}) {
      c.ring_shift(std::span<const double>(x), std::span<double>(rs), shift);
      check("ring_shift", rs);
    }
  });
  EXPECT_TRUE(failures.empty()) << failures.front();
  EXPECT_EQ(result.ledgers.at(0).bytes_sent(), 0u);
  EXPECT_EQ(result.ledgers.at(0).bytes_recv(), 0u);
  EXPECT_EQ(result.ledgers.at(0).size(), 1u + 1 + 1 + 20 + 4 + 3);
}

}  // namespace
}  // namespace shardcheck
