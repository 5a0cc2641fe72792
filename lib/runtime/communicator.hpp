// The communicator: a rank's handle on a group of ranks, and the collectives it offers.
//
// This is an interface. The OpenMP-thread backend (runtime/omp/) is its first implementation;
// an MPI backend will be the second, so nothing here or above may assume that ranks share
// memory: data moves only through these calls.
//
// Contract common to every collective:
//   - Every rank of the group calls the same collective, with the same element type, counts,
//     root, reduce op and algorithm, at the same step (the n-th collective call on this
//     communicator). Anything else throws CollectiveMismatch on every rank, naming the step
//     and what each rank called.
//   - A rank that never arrives (returned, threw, waits elsewhere) makes the others fail with
//     DeadlockError, PeerAborted or, past RunOptions::timeout, TimeoutError. Never a hang.
//   - Results never depend on thread timing: each reduction's order is fixed and documented
//     below, so the same inputs give the same bits on every run and every rank.
//   - Argument errors of one rank (sizes, root, counts) throw UsageError on that rank.
//   - Buffers: `send` and `recv` either do not overlap or are in place exactly as documented
//     for the call; a partial overlap is a UsageError.
//   - Each call appends one LedgerEntry to this rank's ledger (ledger.hpp) with the bytes the
//     documented algorithm sends and receives on this rank: the functions of wire_bytes.hpp
//     named in each call's "Ledger" line, where the exact formulas live.
//
// Layers. The typed calls below are written once for every backend: each checks this rank's
// arguments (call_checks.hpp; UsageError before anything waits), has the backend exchange the
// call's description with the group (do_exchange), compares what every rank called
// (call_desc.hpp: check_agreement; CollectiveMismatch), and only then calls the backend's do_*
// hook, which moves the data and records the ledger entry. A backend implements only the
// hooks, and writes no argument check or mismatch message of its own.
//
// Notation: p = size(), r = rank(), S = bytes of the full buffer, c_k = counts[k] elements,
// "k+1" and "k-1" are taken mod p. Ranks are group ranks unless said otherwise.
#pragma once

#include "runtime/buffer.hpp"
#include "runtime/call_checks.hpp"
#include "runtime/call_desc.hpp"
#include "runtime/dtype.hpp"
#include "runtime/ledger.hpp"
#include "runtime/reduce_op.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace shardcheck {

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This rank's number in the group, 0 <= rank() < size().
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  // This rank's number in the world (the run), and the group's members as world ranks.
  virtual int world_rank() const noexcept = 0;
  virtual const std::vector<int>& members() const noexcept = 0;

  // A sub-communicator over `ranks` (this communicator's rank numbers, in the order that
  // becomes the new group's rank order). Only the members call it, with the same list; the
  // k-th call with a given list on each member yields the same group, and always a new one:
  // the world communicator counts as the first group over all ranks. Not collective: it never
  // waits. @pre ranks non-empty, distinct, in [0, size()), and contains rank() (UsageError).
  std::unique_ptr<Communicator> group(std::span<const int> ranks) {
    check_group(caller(), ranks);
    return do_group(ranks);
  }

  // This rank's ledger, shared by all of this rank's communicators.
  virtual Ledger& ledger() noexcept = 0;

  // ---- collectives (typed front ends; the backend implements the do_* hooks) ----

  // Waits until every rank of the group has called barrier(). Ledger: 0 bytes.
  void barrier() {
    open(barrier_call(), nullptr, nullptr);
    do_barrier();
  }

  // buf on `root` is copied to buf on every rank. @pre buf.size() equal on all ranks.
  // Chain from the root along group order (root, root+1, ..., root-1). Ledger:
  // wire::broadcast (every rank but the last of the chain sends S, every rank but the root
  // receives S).
  template <Element T>
  void broadcast(std::span<T> buf, int root) {
    const MutBuffer b = erase(buf);
    open(check_broadcast(caller(), b, root), b.data, b.data);
    do_broadcast(b, root);
  }

  // On `root`, recv = send_0 (+) ... over all ranks; recv is unused (may be empty) elsewhere.
  // Order: a chain that starts after the root and ends at it, folding left to right:
  // ((send_{root+1} (+) send_{root+2}) (+) ...) (+) send_root. For root = p-1 that is group
  // order. avg divides once at the end. Ledger: wire::reduce (every rank but the root sends
  // S; every rank but root+1 receives S). In place when send and recv are the same.
  template <Element T>
  void reduce(std::span<const T> send, std::span<T> recv, ReduceOp op, int root) {
    const ConstBuffer s = erase(send);
    const MutBuffer d = erase(recv);
    open(check_reduce(caller(), s, d, op, root), s.data, d.data);
    do_reduce(s, d, op, root);
  }

  // recv = send_0 (+) ... (+) send_{p-1} on every rank, bitwise identical across ranks.
  // The buffer is cut into p chunks by the balanced split (the first n mod p chunks get one
  // more element); chunk k is finished by rank k and then all-gathered on a ring.
  //   ring:       chunk k is folded around the ring starting after its owner:
  //               ((x_{k+1} (+) x_{k+2}) (+) ...) (+) x_k                       (NCCL ring)
  //   sequential: every element is folded in group order ((x_0 (+) x_1) (+) ...) (+) x_{p-1}
  //               (a direct reduce_scatter: each rank receives its chunk from every peer)
  // avg divides once at the end. Ledger: wire::all_reduce (with p | n, 2(p-1)/p * S for both
  // algorithms). In place when send and recv are the same buffer.
  template <Element T>
  void all_reduce(std::span<const T> send, std::span<T> recv, ReduceOp op,
                  Algorithm algo = Algorithm::ring) {
    const ConstBuffer s = erase(send);
    const MutBuffer d = erase(recv);
    open(check_all_reduce(caller(), s, d, op, algo), s.data, d.data);
    do_all_reduce(s, d, op, algo);
  }
  template <Element T>
  void all_reduce(std::span<T> buf, ReduceOp op, Algorithm algo = Algorithm::ring) {
    all_reduce(std::span<const T>(buf), buf, op, algo);
  }

  // recv = concat(send_0, ..., send_{p-1}), send_k of counts[k] elements (zeros allowed).
  // @pre counts.size() == p, send.size() == counts[r], recv.size() == sum(counts), counts equal
  // on all ranks. In place when send is recv's own slice at offset sum(counts[0..r)).
  // Ring: rank r sends every chunk but c_{r+1}, receives every chunk but its own. Ledger:
  // wire::all_gather.
  template <Element T>
  void all_gather(std::span<const T> send, std::span<T> recv, std::span<const std::size_t> counts) {
    const ConstBuffer s = erase(send);
    const MutBuffer d = erase(recv);
    open(check_all_gather(caller(), s, d, counts), s.data, d.data);
    do_all_gather(s, d, counts);
  }
  // Even counts: every rank sends send.size() elements; recv.size() == p * send.size().
  template <Element T>
  void all_gather(std::span<const T> send, std::span<T> recv) {
    const std::vector<std::size_t> counts(static_cast<std::size_t>(size()), send.size());
    all_gather(send, recv, std::span<const std::size_t>(counts));
  }

  // recv = chunk r of (send_0 (+) ... (+) send_{p-1}), chunk k being counts[k] elements at
  // offset sum(counts[0..k)). @pre send.size() == sum(counts), recv.size() == counts[r].
  // In place when recv is send's own chunk. Order per algorithm as in all_reduce (ring:
  // starting after the chunk's owner; sequential: group order). avg divides at the end.
  // Ledger: wire::reduce_scatter.
  template <Element T>
  void reduce_scatter(std::span<const T> send, std::span<T> recv,
                      std::span<const std::size_t> counts, ReduceOp op,
                      Algorithm algo = Algorithm::ring) {
    const ConstBuffer s = erase(send);
    const MutBuffer d = erase(recv);
    open(check_reduce_scatter(caller(), s, d, counts, op, algo), s.data, d.data);
    do_reduce_scatter(s, d, counts, op, algo);
  }
  template <Element T>
  void reduce_scatter(std::span<const T> send, std::span<T> recv, ReduceOp op,
                      Algorithm algo = Algorithm::ring) {
    const std::vector<std::size_t> counts(static_cast<std::size_t>(size()), recv.size());
    reduce_scatter(send, recv, std::span<const std::size_t>(counts), op, algo);
  }

  // Personalized exchange (MPI_Alltoallv): send holds send_counts[d] elements for each
  // destination d, concatenated in rank order; recv receives recv_counts[s] elements from
  // each source s, concatenated in rank order. @pre send_counts[d] on rank r equals
  // recv_counts[r] on rank d (else CollectiveMismatch). Not in place. Ledger (direct):
  // wire::all_to_all (everything but the piece a rank keeps for itself).
  template <Element T>
  void all_to_all(std::span<const T> send, std::span<const std::size_t> send_counts,
                  std::span<T> recv, std::span<const std::size_t> recv_counts) {
    const ConstBuffer s = erase(send);
    const MutBuffer d = erase(recv);
    open(check_all_to_all(caller(), s, send_counts, d, recv_counts), s.data, d.data);
    do_all_to_all(s, send_counts, d, recv_counts);
  }

  // On root, recv = concat(send_0, ..., send_{p-1}); recv unused (may be empty) elsewhere.
  // @pre counts equal on all ranks, send.size() == counts[r], recv.size() == sum(counts) on
  // root. Direct: each rank but the root sends its piece. Ledger: wire::gather.
  template <Element T>
  void gather(std::span<const T> send, std::span<T> recv, std::span<const std::size_t> counts,
              int root) {
    const ConstBuffer s = erase(send);
    const MutBuffer d = erase(recv);
    open(check_gather(caller(), s, d, counts, root), s.data, d.data);
    do_gather(s, d, counts, root);
  }

  // recv = piece r of the root's send (counts[k] elements per rank, concatenated). send unused
  // (may be empty) off the root. Direct: the root sends every piece but its own. Ledger:
  // wire::scatter.
  template <Element T>
  void scatter(std::span<const T> send, std::span<T> recv, std::span<const std::size_t> counts,
               int root) {
    const ConstBuffer s = erase(send);
    const MutBuffer d = erase(recv);
    open(check_scatter(caller(), s, d, counts, root), s.data, d.data);
    do_scatter(s, d, counts, root);
  }

  // Point to point, synchronous: send returns once `dst` has received. The receiver's element
  // type, count and tag must match (else CollectiveMismatch on both, the message of
  // call_desc.hpp: message_mismatch). Two ranks that send to each other at once deadlock, and
  // are told so: use ring_shift for exchanges. Ledger: wire::send, wire::recv (the message's
  // bytes as sent on the sender and as received on the receiver).
  template <Element T>
  void send(std::span<const T> buf, int dst, int tag = 0) {
    check_send(caller(), dst);
    do_send(erase(buf), dst, tag);
  }
  template <Element T>
  void recv(std::span<T> buf, int src, int tag = 0) {
    check_recv(caller(), src);
    do_recv(erase(buf), src, tag);
  }

  // Every rank sends `send` to rank (r + shift) mod p and receives into `recv` from rank
  // (r - shift) mod p, as one collective step (ring attention passes K/V chunks this way).
  // Counts may differ per rank: recv.size() must equal the source's send.size(). Not in place.
  // Ledger: wire::ring_shift (bytes of send and of recv; 0 when the shift is a multiple of p).
  template <Element T>
  void ring_shift(std::span<const T> send, std::span<T> recv, int shift = 1) {
    const ConstBuffer s = erase(send);
    const MutBuffer d = erase(recv);
    open(check_ring_shift(caller(), s, d, shift), s.data, d.data);
    do_ring_shift(s, d, shift);
  }

 protected:
  // ---- the backend's hooks ----
  //
  // do_exchange: makes `call` (this rank's call, already checked on this rank) known to every
  // rank of the group, waits for the others' and returns all of them, in group order, with the
  // step's number (the n-th collective on this communicator, from 0). The shared layer then
  // compares them (check_agreement) and calls the collective's do_* hook; every collective
  // makes exactly one exchange. `send` and `recv` are this rank's buffers for the call (null
  // for barrier): a backend whose ranks share memory publishes them with the call, so the data
  // phase needs no second wait; a backend whose ranks do not share memory ignores them. The
  // returned calls stay valid until the do_* hook of the same call returns. Waits like a
  // collective: DeadlockError, PeerAborted or TimeoutError when a peer never arrives.
  virtual GroupCalls do_exchange(const CallDesc& call, const void* send, void* recv) = 0;
  //
  // The collectives' hooks run after the exchange, on arguments checked on every rank and
  // agreed across the group. Each moves the data by the documented algorithm, in the
  // documented order, and appends one LedgerEntry with the bytes of wire_bytes.hpp.
  // Their arguments are the typed call's (do_ring_shift's shift as passed; the call's
  // description holds it mod p). do_send/do_recv run after check_send/check_recv; the receiver
  // compares the message with its own expectation by message_mismatch (call_desc.hpp).
  // do_group runs after check_group.
  virtual std::unique_ptr<Communicator> do_group(std::span<const int> ranks) = 0;
  virtual void do_barrier() = 0;
  virtual void do_broadcast(MutBuffer buf, int root) = 0;
  virtual void do_reduce(ConstBuffer send, MutBuffer recv, ReduceOp op, int root) = 0;
  virtual void do_all_reduce(ConstBuffer send, MutBuffer recv, ReduceOp op, Algorithm algo) = 0;
  virtual void do_all_gather(ConstBuffer send, MutBuffer recv,
                             std::span<const std::size_t> counts) = 0;
  virtual void do_reduce_scatter(ConstBuffer send, MutBuffer recv,
                                 std::span<const std::size_t> counts, ReduceOp op,
                                 Algorithm algo) = 0;
  virtual void do_all_to_all(ConstBuffer send, std::span<const std::size_t> send_counts,
                             MutBuffer recv, std::span<const std::size_t> recv_counts) = 0;
  virtual void do_gather(ConstBuffer send, MutBuffer recv, std::span<const std::size_t> counts,
                         int root) = 0;
  virtual void do_scatter(ConstBuffer send, MutBuffer recv, std::span<const std::size_t> counts,
                          int root) = 0;
  virtual void do_send(ConstBuffer buf, int dst, int tag) = 0;
  virtual void do_recv(MutBuffer buf, int src, int tag) = 0;
  virtual void do_ring_shift(ConstBuffer send, MutBuffer recv, int shift) = 0;

  // This rank as messages name it.
  Caller caller() const noexcept { return {rank(), members()}; }

 private:
  // The exchange and the comparison of one collective (communicator.cpp).
  void open(const CallDesc& call, const void* send, void* recv);
};

// The backend's half of the contract above (do_exchange and the do_* hooks), as every backend
// declares it in its protected section (omp_communicator.hpp, mpi_communicator.hpp): one list,
// so a hook added to Communicator is added to every backend's declaration at once.
#define SHARDCHECK_COMMUNICATOR_BACKEND_HOOKS                                                      \
  GroupCalls do_exchange(const CallDesc& call, const void* send, void* recv) override;             \
  std::unique_ptr<Communicator> do_group(std::span<const int> ranks) override;                     \
  void do_barrier() override;                                                                      \
  void do_broadcast(MutBuffer buf, int root) override;                                             \
  void do_reduce(ConstBuffer send, MutBuffer recv, ReduceOp op, int root) override;                \
  void do_all_reduce(ConstBuffer send, MutBuffer recv, ReduceOp op, Algorithm algo) override;      \
  void do_all_gather(ConstBuffer send, MutBuffer recv, std::span<const std::size_t> counts)        \
      override;                                                                                    \
  void do_reduce_scatter(ConstBuffer send, MutBuffer recv, std::span<const std::size_t> counts,    \
                         ReduceOp op, Algorithm algo) override;                                    \
  void do_all_to_all(ConstBuffer send, std::span<const std::size_t> send_counts, MutBuffer recv,   \
                     std::span<const std::size_t> recv_counts) override;                           \
  void do_gather(ConstBuffer send, MutBuffer recv, std::span<const std::size_t> counts, int root)  \
      override;                                                                                    \
  void do_scatter(ConstBuffer send, MutBuffer recv, std::span<const std::size_t> counts, int root) \
      override;                                                                                    \
  void do_send(ConstBuffer buf, int dst, int tag) override;                                        \
  void do_recv(MutBuffer buf, int src, int tag) override;                                          \
  void do_ring_shift(ConstBuffer send, MutBuffer recv, int shift) override;

}  // namespace shardcheck
