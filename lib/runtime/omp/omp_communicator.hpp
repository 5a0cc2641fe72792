// The OpenMP-thread backend of Communicator: ranks are threads of one team, and a collective is
// "publish what I called and where my buffers are; wait for the group; check that everyone
// called the same thing; read peers' buffers in the documented order; wait again so nobody
// reuses a buffer a peer still reads". Every arithmetic step follows the order documented in
// communicator.hpp, so results are the same bits on every run; the ledger records the bytes
// the documented algorithm would move between processes.
#pragma once

#include "runtime/communicator.hpp"
#include "runtime/omp/group_state.hpp"
#include "runtime/omp/world.hpp"
#include "runtime/wire_bytes.hpp"

#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
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
  std::unique_ptr<Communicator> group(std::span<const int> ranks) override;
  Ledger& ledger() noexcept override { return world_.ledger(world_rank_); }

 protected:
  void do_barrier() override;
  void do_broadcast(MutBuffer buf, int root) override;
  void do_reduce(ConstBuffer send, MutBuffer recv, ReduceOp op, int root) override;
  void do_all_reduce(ConstBuffer send, MutBuffer recv, ReduceOp op, Algorithm algo) override;
  void do_all_gather(ConstBuffer send, MutBuffer recv,
                     std::span<const std::size_t> counts) override;
  void do_reduce_scatter(ConstBuffer send, MutBuffer recv, std::span<const std::size_t> counts,
                         ReduceOp op, Algorithm algo) override;
  void do_all_to_all(ConstBuffer send, std::span<const std::size_t> send_counts, MutBuffer recv,
                     std::span<const std::size_t> recv_counts) override;
  void do_gather(ConstBuffer send, MutBuffer recv, std::span<const std::size_t> counts,
                 int root) override;
  void do_scatter(ConstBuffer send, MutBuffer recv, std::span<const std::size_t> counts,
                  int root) override;
  void do_send(ConstBuffer buf, int dst, int tag) override;
  void do_recv(MutBuffer buf, int src, int tag) override;
  void do_ring_shift(ConstBuffer send, MutBuffer recv, int shift) override;

 private:
  // Publishes `desc` and the buffers, waits for the group, and checks that every rank called
  // the same thing. Returns the step's slots (one per group rank).
  std::vector<Slot>& enter(CallDesc desc, const void* send, void* recv);
  // Waits until every rank of the group has arrived (one barrier episode). An interruptible
  // sync that is aborted abandons the episode (no late rank can complete it) and rethrows; if
  // the episode completed meanwhile, it returns and keeps the error in `pending_` for
  // finish(), because peers may now be reading this rank's buffers. A non-interruptible sync
  // (the closing barrier) waits for the peers whatever happens.
  void sync(std::string_view what, bool interruptible);
  // Rethrows an error kept by sync() once the collective is over.
  void finish();
  // The closing wait of a collective, then its ledger entry.
  void leave(const CallDesc& desc, std::uint64_t count, wire::WireBytes bytes);
  void check_agreement(const std::vector<Slot>& slots) const;
  [[noreturn]] void mismatch(const std::vector<Slot>& slots, const std::string& detail) const;
  [[noreturn]] void usage(std::string_view op, const std::string& problem) const;
  std::string who(int group_rank) const;  // "rank 2" or "rank 1 (world rank 3)"

  void check_root(std::string_view op, int root) const;
  void check_counts(std::string_view op, std::span<const std::size_t> counts,
                    std::string_view name) const;
  void check_dtype(std::string_view op, DType a, DType b) const;
  void check_reduce_op(std::string_view op, ReduceOp rop, DType t) const;
  // Refuses send/recv that overlap unless send sits exactly `in_place_offset` elements into
  // recv (the call's in-place form); nullopt: the call has no in-place form.
  void check_no_partial_overlap(std::string_view op, ConstBuffer send, MutBuffer recv,
                                std::optional<std::size_t> in_place_offset) const;
  // gather and scatter: `counts` is valid, this rank's own buffer (`local_name`, `local_count`
  // elements) holds counts[rank], and on the root the rooted buffer (`rooted_name`,
  // `rooted_count`) holds their sum, with send and recv of one type and placed apart or
  // in place. Returns the counts' offsets.
  std::vector<std::size_t> check_rooted_counts(std::string_view op, ConstBuffer send,
                                               MutBuffer recv, std::span<const std::size_t> counts,
                                               int root, std::string_view local_name,
                                               std::size_t local_count,
                                               std::string_view rooted_name,
                                               std::size_t rooted_count) const;

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
