// A tracker of live activation bytes, per rank: what the library's ops hold for their
// collectives and free before returning (the temporary peaks), and what a caller keeps for the
// backward. Compared, byte for byte, with the library's own model (budget/library_activations.hpp).
//
// The ops never count bytes themselves: they take their collective buffers from their rank's
// workspace (ops/workspace.hpp), which counts them into the tracker installed on the rank's
// thread. This header gives the budget layer's names for the workspace's count:
//   - LiveBytes (ops' LiveByteCount): live bytes, their peak, the buffers taken, what is kept;
//   - LiveBytesScope (Workspace::CountingScope): installs a rank's tracker for a scope;
//   - HeldBytes (CountedBytes): bytes counted while the object lives, for a test's own notes.
//
// What the workspace counts (the "collective buffers"; docs/budget.md lists every site):
//   - gather receive buffers and their reordered copies (all_gather of x or dy along tokens under
//     sequence parallelism, the [rows, cols] blocks of all_gather_last_axis, the all-gathered K/V
//     of all-gather context parallelism);
//   - full-size partials whose only use is to be reduce_scattered (the sequence-parallel dx of the
//     column-parallel backward, y of the row-parallel forward, the embedding's partial rows, the
//     all-gather CP backward's dK/dV and their per-rank reordering);
//   - the ring's K/V (and dK/dV) chunk buffers, held and received;
//   - packed all_reduce buffers that are not the op's result (the norm's [dgamma | dbeta], the
//     cross-entropy's sums, the head-parallel layer's gradient packs).
// Not counted: results returned to the caller (they are the caller's, and what it keeps is
// recorded with keep()), in-place all_reduces of a result, and the kernels' own working memory.
//
// Ranks are OpenMP threads: the active tracker is thread_local, so each rank installs its own
// (LiveBytesScope) and its ops' buffers are counted in the tracker of the rank that runs them.
// With no tracker installed a buffer costs one thread_local load and a branch.
#pragma once

#include "ops/workspace.hpp"

#include <cstdint>

namespace shardcheck::budget {

using LiveBytes = LiveByteCount;
using LiveBytesScope = Workspace::CountingScope;
using HeldBytes = CountedBytes;

inline LiveBytes* active_tracker() noexcept { return workspace_detail::current; }

inline void note_alloc(std::uint64_t bytes) noexcept {
  if (LiveBytes* t = workspace_detail::current) t->on_alloc(bytes);
}
inline void note_free(std::uint64_t bytes) noexcept {
  if (LiveBytes* t = workspace_detail::current) t->on_free(bytes);
}

}  // namespace shardcheck::budget
