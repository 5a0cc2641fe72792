// Misuse of the runtime (issue 2), collective mismatches: ranks that call different collectives,
// counts, roots, reduce ops, element types or algorithms at one step (on the world or on a
// subgroup), and a send and recv that disagree, each raise CollectiveMismatch on every rank
// promptly, with a message naming the step, the group, what each rank called and the ranks
// that differ.
#include "misuse_programs.hpp"
#include "misuse_support.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shardcheck::misuse_testing {
namespace {

// What every mismatch here must raise: rank 0's primary failure is a CollectiveMismatch whose
// message mentions each of `parts`, ranks 0 to ranks - 1 (the callers) all hold one, and the run
// stopped within kPrompt.
void expect_mismatch_on_ranks(const Failure& f, int ranks, const std::vector<std::string>& parts) {
  expect_primary<CollectiveMismatch>(f, 0, parts);
  EXPECT_EQ(ranks_with<CollectiveMismatch>(*f.error), iota(ranks));
  EXPECT_LT(f.elapsed, kPrompt);
}

TEST(misuse, different_collectives_at_one_step_raise_collective_mismatch_on_every_rank) {
  const auto f = run_expecting_failure(3, misuse_programs::different_collectives);
  expect_mismatch_on_ranks(f, 3, {"step 0", "[0,1,2]", "all_reduce", "all_gather", "rank 2"});
}

TEST(misuse, different_counts_raise_collective_mismatch_naming_the_step) {
  const auto f = run_expecting_failure(3, misuse_programs::different_counts_at_step_1);
  expect_mismatch_on_ranks(f, 3, {"step 1", "count", "rank 1", "5", "4"});
}

TEST(misuse, different_roots_raise_collective_mismatch) {
  const auto f = run_expecting_failure(3, misuse_programs::different_roots);
  expect_mismatch_on_ranks(f, 3, {"step 0", "root", "broadcast", "rank 2"});
}

TEST(misuse, different_reduce_ops_raise_collective_mismatch) {
  const auto f = run_expecting_failure(4, misuse_programs::different_reduce_ops);
  expect_mismatch_on_ranks(f, 4, {"step 0", "reduce op", "sum", "max", "rank 3"});
}

TEST(misuse, different_element_types_raise_collective_mismatch) {
  const auto f = run_expecting_failure(2, misuse_programs::different_element_types);
  expect_mismatch_on_ranks(f, 2, {"step 0", "element type", "float32", "float64"});
}

TEST(misuse, different_algorithms_raise_collective_mismatch) {
  const auto f = run_expecting_failure(3, misuse_programs::different_algorithms);
  expect_mismatch_on_ranks(f, 3, {"step 0", "algorithm", "ring", "sequential"});
}

TEST(misuse, a_mismatch_on_a_subgroup_names_its_members_and_world_ranks) {
  const auto f = run_expecting_failure(4, misuse_programs::mismatch_on_a_subgroup);
  // Group rank 1 is world rank 0.
  expect_mismatch_on_ranks(f, 3, {"step 0", "[2,0,1]", "rank 1 (world rank 0)", "all_gather"});
}

TEST(misuse, send_and_recv_that_disagree_raise_collective_mismatch_on_both) {
  const auto f = run_expecting_failure(2, misuse_programs::send_and_recv_that_disagree);
  expect_mismatch_on_ranks(f, 2, {"send", "recv", "4", "5", "rank 0", "rank 1"});
}

}  // namespace
}  // namespace shardcheck::misuse_testing
