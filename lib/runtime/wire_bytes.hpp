// Bytes on the wire: what one rank of a group sends and receives in each call, by collective,
// algorithm, element counts, element size, group size p and the rank's position r. The one
// place these formulas live: every backend's ledger records them (the byte counts of a
// LedgerEntry, ledger.hpp) and the budget model (lib/budget/traffic.hpp) predicts them.
//
// Two kinds, both from the algorithms documented in communicator.hpp:
//   - bus_bytes(): nccl-tests' bus-bandwidth factors (github.com/NVIDIA/nccl-tests,
//     doc/PERFORMANCE.md), bytes per rank for a full buffer of S bytes that splits evenly
//     over the n ranks: all_reduce 2(n-1)/n·S; all_gather, reduce_scatter, all_to_all
//     (n-1)/n·S; broadcast, reduce S.
//   - the exact per-rank integers this runtime's algorithms send for any counts, uneven and
//     empty pieces included: a ring moves whole chunks, so a rank's bytes depend on which
//     chunk it does not send or receive. With p dividing the count they equal bus_bytes();
//     summed over the ranks, all_gather and reduce_scatter always move (p-1)·S.
//
// Notation: S = bytes of the full buffer, c_k = bytes of rank k's piece (or all_reduce's chunk
// k), "r+1" and "r-1" taken mod p. Counts are in elements, `element_bytes` is size_of(dtype).
// The properties (properties/runtime/collective_model.hpp) transcribe these formulas
// independently and compare them with every rank's ledger.
#pragma once

#include "runtime/counts.hpp"
#include "runtime/ledger.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace shardcheck::wire {

// What one rank sends and receives in one call, in bytes.
struct WireBytes {
  std::uint64_t sent = 0;
  std::uint64_t recv = 0;
  friend bool operator==(const WireBytes&, const WireBytes&) = default;
};

// ---------------------------------------------------------------- bus-bandwidth factors

// True for the collectives with a bus-bandwidth factor: all_reduce, all_gather,
// reduce_scatter, all_to_all, broadcast, reduce.
constexpr bool has_bus_factor(Collective op) noexcept {
  switch (op) {
    case Collective::all_reduce:
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
    case Collective::broadcast:
    case Collective::reduce: return true;
    default: return false;
  }
}

// Bytes one rank sends (and receives) in `op` over n ranks on a full buffer of S bytes split
// evenly (nccl-tests PERFORMANCE.md): all_reduce 2(n-1)/n·S; all_gather, reduce_scatter,
// all_to_all (n-1)/n·S; broadcast, reduce S, and 0 for n = 1 where the chain moves nothing.
// Computed as (n-1)·S/n rather than ((n-1)/n)·S: exact whenever n divides S.
// @pre has_bus_factor(op), n >= 1 (otherwise 0).
constexpr double bus_bytes(Collective op, int n, double S) noexcept {
  if (n < 1) return 0;
  const double f = static_cast<double>(n - 1) * S / n;
  switch (op) {
    case Collective::all_reduce: return 2 * f;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all: return f;
    case Collective::broadcast:
    case Collective::reduce: return n > 1 ? S : 0;
    default: return 0;
  }
}

// ---------------------------------------------------------------- exact, per rank

// barrier: nothing moves.
constexpr WireBytes barrier() noexcept { return {}; }

// broadcast, chain root -> root+1 -> ... -> root-1 of `count` elements: every rank but the
// chain's last (root-1) sends S, every rank but the root receives S. p = 1: 0, 0.
constexpr WireBytes broadcast(std::uint64_t count, std::uint64_t element_bytes, int p, int r,
                              int root) noexcept {
  const std::uint64_t S = count * element_bytes;
  return {r == wrap_rank(root - 1, p) ? 0 : S, r == root ? 0 : S};
}

// reduce, chain root+1 -> root+2 -> ... -> root of `count` elements: every rank but the root
// sends S, every rank but root+1 (the chain's start) receives S. p = 1: 0, 0.
constexpr WireBytes reduce(std::uint64_t count, std::uint64_t element_bytes, int p, int r,
                           int root) noexcept {
  const std::uint64_t S = count * element_bytes;
  return {r == root ? 0 : S, r == wrap_rank(root + 1, p) ? 0 : S};
}

// all_reduce of `count` elements cut into the balanced chunks c_k (balanced_chunk(), rank k
// finishes chunk k), then all-gathered on the ring.
//   ring:       reduce_scatter on the ring + all_gather on the ring
//               sent = (S - c_r) + (S - c_{r+1}), recv = (S - c_{r-1}) + (S - c_r)
//   sequential: direct reduce_scatter (every peer sends rank r its chunk) + ring all_gather
//               sent = (S - c_r) + (S - c_{r+1}), recv = (p-1)·c_r + (S - c_r)
// With p | count both are 2(p-1)/p·S. @pre algo is ring or sequential, 0 <= r < p.
constexpr WireBytes all_reduce(std::uint64_t count, std::uint64_t element_bytes, int p, int r,
                               Algorithm algo = Algorithm::ring) noexcept {
  const std::uint64_t S = count * element_bytes;
  const std::uint64_t c_r = balanced_chunk(count, p, r) * element_bytes;
  const std::uint64_t c_next = balanced_chunk(count, p, wrap_rank(r + 1, p)) * element_bytes;
  const std::uint64_t c_prev = balanced_chunk(count, p, wrap_rank(r - 1, p)) * element_bytes;
  const std::uint64_t recv = algo == Algorithm::ring
                                 ? (S - c_prev) + (S - c_r)
                                 : static_cast<std::uint64_t>(p - 1) * c_r + (S - c_r);
  return {(S - c_r) + (S - c_next), recv};
}

// all_gather on the ring of pieces counts[0..p): rank r sends every piece but c_{r+1} and
// receives every piece but its own: sent = S - c_{r+1}, recv = S - c_r.
// @pre counts.size() = p >= 1, 0 <= r < p.
constexpr WireBytes all_gather(std::span<const std::size_t> counts, std::uint64_t element_bytes,
                               int r) noexcept {
  const int p = static_cast<int>(counts.size());
  const std::uint64_t S = counts_total(counts) * element_bytes;
  return {S - counts[static_cast<std::size_t>(wrap_rank(r + 1, p))] * element_bytes,
          S - counts[static_cast<std::size_t>(r)] * element_bytes};
}

// reduce_scatter into chunks counts[0..p):
//   ring:       sent = S - c_r, recv = S - c_{r-1}
//   sequential: sent = S - c_r, recv = (p-1)·c_r (every peer sends rank r its chunk)
// @pre counts.size() = p >= 1, 0 <= r < p, algo is ring or sequential.
constexpr WireBytes reduce_scatter(std::span<const std::size_t> counts, std::uint64_t element_bytes,
                                   int r, Algorithm algo = Algorithm::ring) noexcept {
  const int p = static_cast<int>(counts.size());
  const std::uint64_t S = counts_total(counts) * element_bytes;
  const std::uint64_t c_r = counts[static_cast<std::size_t>(r)] * element_bytes;
  const std::uint64_t recv =
      algo == Algorithm::ring
          ? S - counts[static_cast<std::size_t>(wrap_rank(r - 1, p))] * element_bytes
          : static_cast<std::uint64_t>(p - 1) * c_r;
  return {S - c_r, recv};
}

// all_to_all, direct: everything but the piece a rank keeps for itself:
// sent = bytes of sum_{d != r} send_counts[d], recv = bytes of sum_{s != r} recv_counts[s].
// @pre both spans have p entries, 0 <= r < p.
constexpr WireBytes all_to_all(std::span<const std::size_t> send_counts,
                               std::span<const std::size_t> recv_counts,
                               std::uint64_t element_bytes, int r) noexcept {
  const auto ur = static_cast<std::size_t>(r);
  return {(counts_total(send_counts) - send_counts[ur]) * element_bytes,
          (counts_total(recv_counts) - recv_counts[ur]) * element_bytes};
}

// gather, direct: every rank but the root sends its piece c_r; the root receives S - c_root.
// @pre counts.size() = p, 0 <= r, root < p.
constexpr WireBytes gather(std::span<const std::size_t> counts, std::uint64_t element_bytes, int r,
                           int root) noexcept {
  const auto ur = static_cast<std::size_t>(r);
  if (r == root) return {0, (counts_total(counts) - counts[ur]) * element_bytes};
  return {counts[ur] * element_bytes, 0};
}

// scatter, direct: the root sends S - c_root; every other rank receives its piece c_r.
// @pre counts.size() = p, 0 <= r, root < p.
constexpr WireBytes scatter(std::span<const std::size_t> counts, std::uint64_t element_bytes, int r,
                            int root) noexcept {
  const auto ur = static_cast<std::size_t>(r);
  if (r == root) return {(counts_total(counts) - counts[ur]) * element_bytes, 0};
  return {0, counts[ur] * element_bytes};
}

// ring_shift by `shift`: this rank's message out (send_count elements) and the source's in
// (recv_count); nothing moves when shift is a multiple of p (p = 1 included).
constexpr WireBytes ring_shift(std::uint64_t send_count, std::uint64_t recv_count,
                               std::uint64_t element_bytes, int p, int shift = 1) noexcept {
  if (wrap_rank(shift, p) == 0) return {};
  return {send_count * element_bytes, recv_count * element_bytes};
}

// send and recv: the message's bytes, as sent on the sender and as received on the receiver.
constexpr WireBytes send(std::uint64_t count, std::uint64_t element_bytes) noexcept {
  return {count * element_bytes, 0};
}
constexpr WireBytes recv(std::uint64_t count, std::uint64_t element_bytes) noexcept {
  return {0, count * element_bytes};
}

}  // namespace shardcheck::wire
