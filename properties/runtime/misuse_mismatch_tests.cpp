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

// Each row: a program whose ranks disagree at one step, the world it runs on, how many ranks
// call (the first `callers` world ranks: all of them but on a subgroup), and what the message
// must mention.
struct MismatchCase {
  const char* what;
  int world;
  void (*program)(Communicator&);
  int callers;
  std::vector<std::string> parts;
};

TEST(misuse, every_disagreement_raises_collective_mismatch_on_every_caller) {
  using namespace misuse_programs;
  const std::vector<MismatchCase> cases = {
      {"different collectives at one step",
       3,
       different_collectives,
       3,
       {"step 0", "[0,1,2]", "all_reduce", "all_gather", "rank 2"}},
      {"different counts, named by their step",
       3,
       different_counts_at_step_1,
       3,
       {"step 1", "count", "rank 1", "5", "4"}},
      {"different roots", 3, different_roots, 3, {"step 0", "root", "broadcast", "rank 2"}},
      {"different reduce ops",
       4,
       different_reduce_ops,
       4,
       {"step 0", "reduce op", "sum", "max", "rank 3"}},
      {"different element types",
       2,
       different_element_types,
       2,
       {"step 0", "element type", "float32", "float64"}},
      {"different algorithms",
       3,
       different_algorithms,
       3,
       {"step 0", "algorithm", "ring", "sequential"}},
      // Group rank 1 is world rank 0: the subgroup's members and their world ranks are named.
      {"a mismatch on a subgroup",
       4,
       mismatch_on_a_subgroup,
       3,
       {"step 0", "[2,0,1]", "rank 1 (world rank 0)", "all_gather"}},
      {"a send and a recv that disagree",
       2,
       send_and_recv_that_disagree,
       2,
       {"send", "recv", "4", "5", "rank 0", "rank 1"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    expect_mismatch_on_ranks(run_expecting_failure(c.world, c.program), c.callers, c.parts);
  }
}

}  // namespace
}  // namespace shardcheck::misuse_testing
