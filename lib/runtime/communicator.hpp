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
//     documented algorithm sends and receives on this rank.
//
// Notation: p = size(), r = rank(), S = bytes of the full buffer, c_k = counts[k] elements,
// "k+1" and "k-1" are taken mod p. Ranks are group ranks unless said otherwise.
#pragma once

#include "runtime/dtype.hpp"
#include "runtime/ledger.hpp"
#include "runtime/reduce_op.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace shardcheck {

// A type-erased view of elements: what the backend sees.
struct ConstBuffer {
  const void* data;
  std::size_t count;
  DType dtype;
};
struct MutBuffer {
  void* data;
  std::size_t count;
  DType dtype;
};

template <Element T>
ConstBuffer erase(std::span<const T> s) noexcept {
  return {s.data(), s.size(), dtype_of<T>};
}
template <Element T>
MutBuffer erase(std::span<T> s) noexcept {
  return {s.data(), s.size(), dtype_of<T>};
}

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
  // waits. @pre ranks non-empty, distinct, in [0, size()), and contains rank().
  virtual std::unique_ptr<Communicator> group(std::span<const int> ranks) = 0;

  // This rank's ledger, shared by all of this rank's communicators.
  virtual Ledger& ledger() noexcept = 0;

  // ---- collectives (typed front ends; the backend implements the do_* hooks) ----

  // Waits until every rank of the group has called barrier(). Ledger: 0 bytes.
  void barrier() { do_barrier(); }

  // buf on `root` is copied to buf on every rank. @pre buf.size() equal on all ranks.
  // Chain from the root along group order (root, root+1, ..., root-1): every rank but the
  // last of the chain sends S, every rank but the root receives S.
  template <Element T>
  void broadcast(std::span<T> buf, int root) {
    do_broadcast(erase(buf), root);
  }

  // On `root`, recv = send_0 (+) ... over all ranks; recv is unused (may be empty) elsewhere.
  // Order: a chain that starts after the root and ends at it, folding left to right:
  // ((send_{root+1} (+) send_{root+2}) (+) ...) (+) send_root. For root = p-1 that is group
  // order. avg divides once at the end. Ledger: every rank but the root sends S; every rank
  // but root+1 receives S (p = 1: nothing moves). In place when send and recv are the same.
  template <Element T>
  void reduce(std::span<const T> send, std::span<T> recv, ReduceOp op, int root) {
    do_reduce(erase(send), erase(recv), op, root);
  }

  // recv = send_0 (+) ... (+) send_{p-1} on every rank, bitwise identical across ranks.
  // The buffer is cut into p chunks by the balanced split (the first n mod p chunks get one
  // more element); chunk k is finished by rank k and then all-gathered on a ring.
  //   ring:       chunk k is folded around the ring starting after its owner:
  //               ((x_{k+1} (+) x_{k+2}) (+) ...) (+) x_k                       (NCCL ring)
  //   sequential: every element is folded in group order ((x_0 (+) x_1) (+) ...) (+) x_{p-1}
  //               (a direct reduce_scatter: each rank receives its chunk from every peer)
  // avg divides once at the end. Ledger, both algorithms: sent = (S - c_r) + (S - c_{r+1}),
  // recv = (p-1)*c_r + (S - c_r) for sequential, recv = (S - c_{r-1}) + (S - c_r) for ring
  // (bytes of the chunks); with p | n both are 2(p-1)/p * S. In place when send and recv are
  // the same buffer.
  template <Element T>
  void all_reduce(std::span<const T> send, std::span<T> recv, ReduceOp op,
                  Algorithm algo = Algorithm::ring) {
    do_all_reduce(erase(send), erase(recv), op, algo);
  }
  template <Element T>
  void all_reduce(std::span<T> buf, ReduceOp op, Algorithm algo = Algorithm::ring) {
    do_all_reduce(erase(std::span<const T>(buf)), erase(buf), op, algo);
  }

  // recv = concat(send_0, ..., send_{p-1}), send_k of counts[k] elements (zeros allowed).
  // @pre counts.size() == p, send.size() == counts[r], recv.size() == sum(counts), counts equal
  // on all ranks. In place when send is recv's own slice at offset sum(counts[0..r)).
  // Ring: rank r sends every chunk but c_{r+1}, receives every chunk but its own:
  // sent = S - c_{r+1}, recv = S - c_r (bytes).
  template <Element T>
  void all_gather(std::span<const T> send, std::span<T> recv, std::span<const std::size_t> counts) {
    do_all_gather(erase(send), erase(recv), counts);
  }
  // Even counts: every rank sends send.size() elements; recv.size() == p * send.size().
  template <Element T>
  void all_gather(std::span<const T> send, std::span<T> recv) {
    const std::vector<std::size_t> counts(static_cast<std::size_t>(size()), send.size());
    do_all_gather(erase(send), erase(recv), counts);
  }

  // recv = chunk r of (send_0 (+) ... (+) send_{p-1}), chunk k being counts[k] elements at
  // offset sum(counts[0..k)). @pre send.size() == sum(counts), recv.size() == counts[r].
  // In place when recv is send's own chunk. Order per algorithm as in all_reduce (ring:
  // starting after the chunk's owner; sequential: group order). avg divides at the end.
  // Ring ledger: sent = S - c_r, recv = S - c_{r-1}. Sequential: sent = S - c_r,
  // recv = (p-1)*c_r.
  template <Element T>
  void reduce_scatter(std::span<const T> send, std::span<T> recv,
                      std::span<const std::size_t> counts, ReduceOp op,
                      Algorithm algo = Algorithm::ring) {
    do_reduce_scatter(erase(send), erase(recv), counts, op, algo);
  }
  template <Element T>
  void reduce_scatter(std::span<const T> send, std::span<T> recv, ReduceOp op,
                      Algorithm algo = Algorithm::ring) {
    const std::vector<std::size_t> counts(static_cast<std::size_t>(size()), recv.size());
    do_reduce_scatter(erase(send), erase(recv), counts, op, algo);
  }

  // Personalized exchange (MPI_Alltoallv): send holds send_counts[d] elements for each
  // destination d, concatenated in rank order; recv receives recv_counts[s] elements from
  // each source s, concatenated in rank order. @pre send_counts[d] on rank r equals
  // recv_counts[r] on rank d (else CollectiveMismatch). Not in place. Ledger (direct):
  // sent = bytes of sum_{d != r} send_counts[d], recv = bytes of sum_{s != r} recv_counts[s].
  template <Element T>
  void all_to_all(std::span<const T> send, std::span<const std::size_t> send_counts,
                  std::span<T> recv, std::span<const std::size_t> recv_counts) {
    do_all_to_all(erase(send), send_counts, erase(recv), recv_counts);
  }

  // On root, recv = concat(send_0, ..., send_{p-1}); recv unused (may be empty) elsewhere.
  // @pre counts equal on all ranks, send.size() == counts[r], recv.size() == sum(counts) on
  // root. Direct: each rank but the root sends its piece; the root receives S - c_root.
  template <Element T>
  void gather(std::span<const T> send, std::span<T> recv, std::span<const std::size_t> counts,
              int root) {
    do_gather(erase(send), erase(recv), counts, root);
  }

  // recv = piece r of the root's send (counts[k] elements per rank, concatenated). send unused
  // (may be empty) off the root. Direct: the root sends S - c_root, each other rank receives
  // its piece.
  template <Element T>
  void scatter(std::span<const T> send, std::span<T> recv, std::span<const std::size_t> counts,
               int root) {
    do_scatter(erase(send), erase(recv), counts, root);
  }

  // Point to point, synchronous: send returns once `dst` has received. The receiver's element
  // type, count and tag must match (else CollectiveMismatch on both). Two ranks that send to
  // each other at once deadlock, and are told so: use ring_shift for exchanges. Ledger: the
  // message's bytes as sent on the sender and as received on the receiver.
  template <Element T>
  void send(std::span<const T> buf, int dst, int tag = 0) {
    do_send(erase(buf), dst, tag);
  }
  template <Element T>
  void recv(std::span<T> buf, int src, int tag = 0) {
    do_recv(erase(buf), src, tag);
  }

  // Every rank sends `send` to rank (r + shift) mod p and receives into `recv` from rank
  // (r - shift) mod p, as one collective step (ring attention passes K/V chunks this way).
  // Counts may differ per rank: recv.size() must equal the source's send.size(). Not in place.
  // Ledger: sent = bytes of send, recv = bytes of recv (0 when the shift is a multiple of p).
  template <Element T>
  void ring_shift(std::span<const T> send, std::span<T> recv, int shift = 1) {
    do_ring_shift(erase(send), erase(recv), shift);
  }

 protected:
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
};

}  // namespace shardcheck
