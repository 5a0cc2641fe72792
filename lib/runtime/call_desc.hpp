// What one rank called at one collective step, and the comparison of what every rank of the
// group called: the cross-rank half of the checks communicator.hpp promises, written once for
// every backend. The backend only exchanges the descriptions (Communicator::do_exchange);
// Communicator compares them with check_agreement() before any data moves.
#pragma once

#include "runtime/dtype.hpp"
#include "runtime/ledger.hpp"
#include "runtime/reduce_op.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shardcheck {

// What one rank called at one step. Every field that must agree across ranks is here; the
// vectors are copies of the caller's counts, so a backend may keep the description after the
// call's own spans are gone.
struct CallDesc {
  Collective op = Collective::barrier;
  DType dtype = DType::float32;
  ReduceOp reduce_op = ReduceOp::sum;  // reduce, all_reduce, reduce_scatter
  Algorithm algorithm = Algorithm::none;
  int root = -1;                    // broadcast, reduce, gather, scatter
  int shift = 0;                    // ring_shift: the shift mod p
  std::uint64_t count = 0;          // broadcast, reduce, all_reduce: buffer elements
  std::vector<std::size_t> counts;  // all_gather, reduce_scatter, gather, scatter; all_to_all: send
  std::vector<std::size_t> counts2;  // all_to_all: recv counts
  std::uint64_t send_count = 0;      // ring_shift: this rank's message sizes
  std::uint64_t recv_count = 0;

  std::string describe() const;  // "all_reduce(float32, count=16, op=sum, algorithm=ring)"
};

// What every rank of a group called at one step, as a backend's exchange returns it.
struct GroupCalls {
  std::span<const CallDesc> calls;  // calls[k]: group rank k's call; valid until the call ends
  std::uint64_t step = 0;           // the step's number on this group, 0-based
};

// The rank that makes a call, as error messages name it: its group rank and the group's
// members (world ranks, group order). Holds a reference to `members`.
class Caller {
 public:
  Caller(int rank, const std::vector<int>& members) noexcept : rank_(rank), members_(&members) {}

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return static_cast<int>(members_->size()); }
  const std::vector<int>& members() const noexcept { return *members_; }

  // "rank 2", or "rank 1 (world rank 3)" when the group rank is not the world rank.
  std::string who(int group_rank) const;
  // Throws UsageError "<who(rank())> of group [..], <op>: <problem>".
  [[noreturn]] void usage(std::string_view op, const std::string& problem) const;

 private:
  int rank_;
  const std::vector<int>* members_;
};

// "[1,2,0]": how counts are printed in descriptions and messages.
std::string format_counts(std::span<const std::size_t> counts);

// Compares the calls of one step. Every rank of the group must have called the same
// collective, element type, reduce op, algorithm, root, shift, count and per-rank counts; for
// all_to_all, send_counts[d] on rank s must equal recv_counts[s] on rank d, and for
// ring_shift the recv count of rank r the send count of rank r - shift. Every rank compares
// the same calls, so every rank throws the same error.
// @pre group.calls.size() == caller.size(), and every call passed this rank's checks of
//      call_checks.hpp on its own rank (counts have one entry per rank).
// @throws CollectiveMismatch "collective mismatch at step <n> on group [..]: <what differs>",
//         one line per rank with its call (CallDesc::describe), and what to do.
void check_agreement(const Caller& caller, const GroupCalls& group);

// One point-to-point message: as sent, or as its receiver expects it.
struct MessageDesc {
  std::size_t count = 0;  // elements
  DType dtype = DType::float32;
  int tag = 0;
};

// Empty when the message `sent` by group rank `src` matches what `caller`, its receiver,
// `expects` (element type, count and tag); otherwise the CollectiveMismatch message both
// ranks throw: "send/recv mismatch on group [..], message <seq> from <src> to <dst>: the sender
// sent <n> x <type> with tag <t>, the receiver expects ...". `seq` numbers the messages on the
// link src -> receiver, from 0.
std::string message_mismatch(const Caller& caller, std::uint64_t seq, int src,
                             const MessageDesc& sent, const MessageDesc& expects);

}  // namespace shardcheck
