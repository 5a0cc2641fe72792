// The MPI backend of Communicator: each rank is one MPI process, each group one MPI
// communicator (MPI_Comm_create_group over the run's base communicator; the named dimensions
// of a DeviceMesh are such groups too), and every collective is
//
//   1. the exchange (do_exchange): every rank sends a fingerprint of its call (CallDesc: kind,
//      element type, counts, root, op, algorithm, shift, and the group's step number) to every
//      other rank of the group and receives theirs, nonblocking and polled (World::wait), so a
//      rank that never arrives ends in PeerAborted, DeadlockError or TimeoutError naming it;
//      the shared layer then compares the calls (call_desc.hpp: check_agreement), so a
//      mismatch throws on every rank the very message the OpenMP backend gives;
//   2. the data phase, with MPI's nonblocking collectives on bytes (MPI_BYTE): MPI_Ibcast,
//      MPI_Igather, MPI_Iallgatherv, MPI_Ialltoallv, MPI_Igatherv, MPI_Iscatterv; ring_shift,
//      send and recv are point-to-point messages.
//
// Reductions never use MPI's reduction (MPI_Reduce's order is the library's choice): the
// contributions are gathered to the rank that finishes each chunk (reduce: MPI_Igather to the
// root; all_reduce and reduce_scatter: MPI_Ialltoallv of the chunks) and folded there with the
// OpenMP backend's own kernel and order (omp/fold.hpp: fold, fold_order), so results are the
// same bits as the OpenMP backend's for the same inputs. all_reduce then all-gathers the
// finished chunks (MPI_Iallgatherv). The ledger entries are those of wire_bytes.hpp for the
// documented algorithm, recorded exactly as the OpenMP backend records them.
//
// Groups are created lazily: group() never waits (communicator.hpp). Before a group's first
// call, its members meet in a rendezvous (every member tells every other which group, by
// member list and creation index, it is about to create), then commit (every member that got
// every intent says so); only then is MPI_Comm_create_group called, so crossed group creations
// end in DeadlockError and a member that gave up never leaves the others blocked in it.
//
// send/recv go over the run's point-to-point communicator (World::p2p, world ranks), so a
// message never waits for its group's communicator (which needs every member) to exist. The
// sender sends a header (count, element type, tag, the group's key), the receiver compares it
// with what it expects (call_desc.hpp: message_mismatch) and answers; on agreement the data
// follows as a synchronous send. Two ranks that send to each other both end in TimeoutError
// (the OpenMP backend, which sees every rank's state, says DeadlockError at once).
#pragma once

#include "runtime/communicator.hpp"
#include "runtime/mpi/mpi_world.hpp"
#include "runtime/wire_bytes.hpp"

#include <mpi.h>

#include <memory>
#include <vector>

namespace shardcheck::mpi {

class MpiCommunicator final : public Communicator {
 public:
  // Group rank `group_rank` of the `index`-th group this rank created with `members` (world
  // ranks, group order).
  MpiCommunicator(World& world, std::vector<int> members, int group_rank, int index);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;
  MpiCommunicator(MpiCommunicator&&) = delete;
  MpiCommunicator& operator=(MpiCommunicator&&) = delete;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return static_cast<int>(members_.size()); }
  int world_rank() const noexcept override { return members_[static_cast<std::size_t>(rank_)]; }
  const std::vector<int>& members() const noexcept override { return members_; }
  Ledger& ledger() noexcept override { return world_.ledger(); }

 protected:
  SHARDCHECK_COMMUNICATOR_BACKEND_HOOKS

 private:
  // Creates comm_ on first use (the rendezvous described above), waiting as the first call
  // `what` does.
  MPI_Comm comm(std::string_view what);
  // This group's identity in point-to-point headers.
  std::uint64_t group_key() const noexcept;
  // World::wait for requests whose peers are given as group ranks.
  void wait(std::span<MPI_Request> reqs, std::span<const World::Peer> peers, std::string_view what,
            bool collective, int peer = -1, int tag = 0, std::uint64_t step = ~std::uint64_t{0},
            bool peers_only = false);
  // Sends `mine` to every other rank of the group and receives theirs (tag `tag` on `c`,
  // addressed by world rank or by group rank), waiting as `what`; theirs[rank()] is mine.
  std::vector<std::vector<std::uint64_t>> all_exchange(const std::vector<std::uint64_t>& mine,
                                                       MPI_Comm c, bool by_world_rank, int tag,
                                                       std::string_view what, bool peers_only);
  // Waits for one nonblocking collective of the data phase (every peer).
  void wait_collective(MPI_Request& req);
  // The reduce-scatter step: chunk rank() of every rank's send (counts[k] elements per chunk k)
  // gathered here and folded in the order of `algo` into `recv`; no ledger entry.
  void reduce_chunk(ConstBuffer send, void* recv, std::span<const std::size_t> counts, ReduceOp op,
                    Algorithm algo);
  // The end of a collective step: its ledger entry (my_call_'s collective, `count`, `bytes`).
  void record_step(std::uint64_t count, wire::WireBytes bytes);

  World& world_;
  std::vector<int> members_;
  std::shared_ptr<const std::vector<int>> ledger_members_;
  int rank_;
  int index_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool broken_ = false;  // a wait failed: requests may be pending, never free or reuse comm_
  std::uint64_t step_ = 0;
  CallDesc my_call_;
  std::vector<CallDesc> calls_;                 // the last exchange's calls, group order
  std::vector<std::uint64_t> sent_, received_;  // messages per link, by peer group rank
};

}  // namespace shardcheck::mpi
