// Misuse of the runtime (issue 2), ranks that never arrive: a rank that returns early, throws,
// deadlocks in point to point or on crossed groups, or is stuck computing gives DeadlockError,
// PeerAborted or TimeoutError on the others instead of a hang, with messages naming the ranks,
// the call and the group; and a late rank never completes a collective or reads a message its
// peers abandoned.
#include "misuse_programs.hpp"
#include "misuse_support.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace shardcheck::misuse_testing {
namespace {

TEST(misuse, a_rank_that_returns_early_makes_the_others_fail_with_deadlock_error) {
  const auto f = run_expecting_failure(3, misuse_programs::rank_2_returns_early);
  expect_primary<DeadlockError>(f, 0, {"rank 2", "returned", "barrier", "step 0", "[0,1,2]"});
  EXPECT_EQ(ranks_with<DeadlockError>(*f.error), (std::vector<int>{0, 1}));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, a_rank_that_throws_surfaces_with_its_rank_and_the_others_are_peer_aborted) {
  const auto f = run_expecting_failure(3, misuse_programs::rank_1_throws);
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
  const auto f = run_expecting_failure(2, misuse_programs::two_ranks_sending_to_each_other);
  expect_primary<DeadlockError>(f, 0, {"send to rank 1", "send to rank 0", "ring_shift"});
  EXPECT_EQ(ranks_with<DeadlockError>(*f.error), iota(2));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, crossed_groups_raise_deadlock_error_naming_both_groups) {
  const auto f = run_expecting_failure(3, misuse_programs::crossed_groups);
  expect_primary<DeadlockError>(f, 0, {"[0,1,2]", "[1,2]", "barrier"});
  EXPECT_EQ(ranks_with<DeadlockError>(*f.error), iota(3));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, a_rank_stuck_computing_makes_the_others_time_out) {
  const auto f = run_expecting_failure(3, misuse_programs::rank_1_stuck_computing);
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
  EXPECT_LT(f.elapsed, misuse_programs::stuck_for + kPrompt);
}

// After its peers timed out and unwound, a late rank must not complete the collective: the
// peers' buffers are gone (ASan sees a use-after-free if it reads them) and they never got
// the result.
TEST(misuse, a_late_rank_does_not_complete_a_collective_its_peers_abandoned) {
  const auto f = run_expecting_failure(2, misuse_programs::late_rank_in_an_all_reduce);
  expect_primary<TimeoutError>(f, 0, {"all_reduce"});
  EXPECT_EQ(ranks_with<PeerAborted>(*f.error), (std::vector<int>{1}));
}

// The same for point to point: a sender that timed out retracts its message, so a late
// receiver gets PeerAborted instead of copying from the sender's freed buffer.
TEST(misuse, a_late_receiver_does_not_read_a_message_whose_sender_gave_up) {
  const auto f = run_expecting_failure(2, misuse_programs::late_receiver);
  expect_primary<TimeoutError>(f, 0, {"send"});
  EXPECT_EQ(ranks_with<PeerAborted>(*f.error), (std::vector<int>{1}));
}

}  // namespace
}  // namespace shardcheck::misuse_testing
