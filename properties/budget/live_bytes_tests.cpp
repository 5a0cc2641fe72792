// The live-bytes tracker itself (budget/live_bytes.hpp): notes of allocations and frees go to the
// tracker of the rank that makes them, never another rank's, and nothing is recorded without a
// tracker in scope.
#include "budget/live_bytes.hpp"
#include "runtime/launcher.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace shardcheck::budget {
namespace {

TEST(live_bytes, notes_go_to_the_rank_that_makes_them_and_nothing_without_a_tracker) {
  note_alloc(100);  // no tracker: nothing happens
  std::vector<std::uint64_t> peaks(4);
  run(4, [&](Communicator& c) {
    LiveBytes t;
    {
      LiveBytesScope scope(t);
      HeldBytes a(10 * static_cast<std::uint64_t>(c.rank() + 1));
      HeldBytes b(1);
      c.barrier();  // every rank's notes are live at once: none may reach another's tracker
      a = std::move(b);
    }
    peaks[static_cast<std::size_t>(c.rank())] = t.peak() * 1000 + t.live();
  });
  for (std::size_t r = 0; r < 4; ++r) EXPECT_EQ(peaks[r], (10 * (r + 1) + 1) * 1000) << r;
}

}  // namespace
}  // namespace shardcheck::budget
