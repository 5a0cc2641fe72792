// The OpenMP-thread backend of Communicator: ranks are threads of one team, and a collective is
// "publish what I called and where my buffers are; wait for the group (do_exchange; the shared
// layer then checks that everyone called the same thing); read peers' buffers in the
// documented order; wait again so nobody reuses a buffer a peer still reads". Every arithmetic
// step follows the order documented in communicator.hpp, so results are the same bits on every
// run; the ledger records the bytes the documented algorithm would move between processes
// (wire_bytes.hpp). Argument checks and mismatch messages are the shared layer's
// (call_checks.hpp, call_desc.hpp); this backend has none of its own.
#pragma once

#include "runtime/communicator.hpp"
#include "runtime/omp/group_state.hpp"
#include "runtime/omp/world.hpp"
#include "runtime/wire_bytes.hpp"

#include <exception>
#include <memory>
#include <string_view>
#include <vector>

namespace shardcheck::omp {

class OmpCommunicator final : public Communicator {
 public:
  OmpCommunicator(World& world, std::shared_ptr<GroupState> state, int group_rank);

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return state_->size; }
  int world_rank() const noexcept override { return world_rank_; }
  const std::vector<int>& members() const noexcept override { return *state_->members; }
  Ledger& ledger() noexcept override { return world_.ledger(world_rank_); }

 protected:
  SHARDCHECK_COMMUNICATOR_BACKEND_HOOKS

 private:
  // The current step's buffer slots (one per group rank) and this rank's own call, as
  // do_exchange published them.
  std::vector<Slot>& slots() { return state_->slots[step_ % 2]; }
  const CallDesc& my_call() const {
    return state_->calls[step_ % 2][static_cast<std::size_t>(rank_)];
  }
  // Waits until every rank of the group has arrived (one barrier episode). An interruptible
  // sync that is aborted abandons the episode (no late rank can complete it) and rethrows; if
  // the episode completed meanwhile, it returns and keeps the error in `pending_` for
  // finish(), because peers may now be reading this rank's buffers. A non-interruptible sync
  // (the closing barrier) waits for the peers whatever happens.
  void sync(std::string_view what, bool interruptible);
  // Rethrows an error kept by sync() once the collective is over.
  void finish();
  // The end of a collective step: its ledger entry (my_call()'s collective, `count` as
  // LedgerEntry::count, `bytes` from wire_bytes.hpp), the next step, and any kept error.
  void record_step(std::uint64_t count, wire::WireBytes bytes);
  // The closing wait of a collective, then record_step().
  void leave(std::uint64_t count, wire::WireBytes bytes);

  World& world_;
  std::shared_ptr<GroupState> state_;
  int rank_;
  int world_rank_;
  std::uint64_t step_ = 0;       // collective steps completed on this group
  std::uint64_t wait_step_ = 0;  // the step being waited for (for messages)
  std::exception_ptr pending_;   // an abort that came after the opening barrier completed
  // This rank's own copy of the member list for its ledger entries: copying the shared one
  // would bump a reference count every rank of the group writes, once per call.
  std::shared_ptr<const std::vector<int>> ledger_members_;
};

// The world communicator of `world_rank` (used by run()).
std::unique_ptr<Communicator> make_world_communicator(World& world, int world_rank);

}  // namespace shardcheck::omp
