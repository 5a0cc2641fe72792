// The ledger: one per rank, one entry per collective or point-to-point call that rank made,
// on any of its communicators, in call order. Later checks compare it with the traffic an op
// declares, so its byte counts are exact, integer, and defined by the algorithm's schedule
// (communicator.hpp documents each), not measured.
//
// The bytes of every entry are those of wire_bytes.hpp, the one place the formulas live: with
// the buffer split evenly over p ranks they are nccl-tests' bus-bandwidth factors (PERFORMANCE.md:
// all_reduce 2(p-1)/p * S; all_gather, reduce_scatter, all_to_all (p-1)/p * S; broadcast,
// reduce S), and with uneven per-rank counts the exact per-rank integers of the ring, which
// depend on which chunk a rank does not send or receive.
#pragma once

#include "runtime/dtype.hpp"
#include "runtime/enum_names.hpp"
#include "runtime/reduce_op.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace shardcheck {

enum class Collective : std::uint8_t {
  barrier,
  broadcast,
  reduce,
  all_reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  gather,
  scatter,
  send,
  recv,
  ring_shift
};

// How the data moves, which fixes both the reduction order and the ledger's bytes.
enum class Algorithm : std::uint8_t {
  none,        // barrier: nothing moves
  ring,        // NCCL ring: reduce_scatter then all_gather around the group
  sequential,  // reduction in group-rank order 0, 1, ..., p-1 (see communicator.hpp)
  chain,       // broadcast and reduce: a pipeline along the group starting at the root
  direct,      // gather, scatter, all_to_all, send/recv, ring_shift: each piece sent once
};

SHARDCHECK_ENUM_NAMES(Collective, "barrier", "broadcast", "reduce", "all_reduce", "all_gather",
                      "reduce_scatter", "all_to_all", "gather", "scatter", "send", "recv",
                      "ring_shift");
SHARDCHECK_ENUM_NAMES(Algorithm, "none", "ring", "sequential", "chain", "direct");

struct LedgerEntry {
  Collective op = Collective::barrier;
  std::shared_ptr<const std::vector<int>> group;  // world ranks, in group order
  DType dtype = DType::float32;
  // Elements of the op's full buffer: all_reduce, broadcast, reduce: the buffer; all_gather,
  // reduce_scatter, gather, scatter: the sum of the per-rank counts; all_to_all: what this
  // rank sends; send, recv, ring_shift: this rank's message.
  std::uint64_t count = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_recv = 0;
  Algorithm algorithm = Algorithm::none;
  ReduceOp reduce_op = ReduceOp::sum;  // meaningful for reduce, all_reduce, reduce_scatter
  int peer = -1;                       // send/recv: the other rank's group rank; otherwise -1
  std::uint64_t step = 0;              // this call's sequence number on its group (0-based)

  std::string to_string()
      const;  // e.g. "all_reduce ring float32 x1024 [0,1,2,3] sent 6144 recv 6144"
};

class Ledger {
 public:
  void record(LedgerEntry e) { entries_.push_back(std::move(e)); }
  void clear() noexcept { entries_.clear(); }

  const std::vector<LedgerEntry>& entries() const noexcept { return entries_; }
  std::size_t size() const noexcept { return entries_.size(); }

  std::uint64_t bytes_sent() const noexcept;
  std::uint64_t bytes_recv() const noexcept;
  std::uint64_t bytes_sent(Collective op) const noexcept;
  std::uint64_t bytes_recv(Collective op) const noexcept;
  std::size_t calls(Collective op) const noexcept;

  std::string to_string() const;  // one line per entry

 private:
  std::vector<LedgerEntry> entries_;
};

// "[0,1,2,3]": the printed notation of a group everywhere (logs, errors, reports).
std::string format_group(const std::vector<int>& world_ranks);

}  // namespace shardcheck
