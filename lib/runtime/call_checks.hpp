// The argument checks of one rank's call, written once for every backend: the typed calls of
// communicator.hpp run them on the calling rank before any backend hook, so a bad argument is
// a UsageError on that rank alone (its peers then see PeerAborted), before anything waits.
// Each collective's check returns the call's description, which the backend exchanges and
// Communicator compares across the group (call_desc.hpp: check_agreement).
//
// Every message is "<rank> of group [..], <call>: <problem>; <what to pass>", for example
//   rank 1 of group [0,1,2], all_gather: send has 1 elements but counts[1] = 2 (counts
//   [1,2,2]); pass counts whose entry for this rank is send.size()
// and properties/runtime/misuse_argument_tests.cpp and misuse_mismatch_tests.cpp exercise every one
// of them.
//
// What every check refuses, besides its own list below:
//   - send and recv of different element types (where the call has both on this rank);
//   - avg on an integer type (reduce_op.hpp: supports);
//   - send and recv that overlap, unless in place exactly as documented for the call.
#pragma once

#include "runtime/buffer.hpp"
#include "runtime/call_desc.hpp"
#include "runtime/reduce_op.hpp"

#include <cstddef>
#include <span>

namespace shardcheck {

// barrier has no arguments; its description.
inline CallDesc barrier_call() { return {}; }

// root in [0, p).
CallDesc check_broadcast(const Caller& caller, MutBuffer buf, int root);

// root in [0, p); on the root, recv.size() == send.size() (in place: the same buffer).
CallDesc check_reduce(const Caller& caller, ConstBuffer send, MutBuffer recv, ReduceOp op,
                      int root);

// algo ring or sequential; recv.size() == send.size() (in place: the same buffer).
CallDesc check_all_reduce(const Caller& caller, ConstBuffer send, MutBuffer recv, ReduceOp op,
                          Algorithm algo);

// counts.size() == p, send.size() == counts[r], recv.size() == sum(counts) (in place: send is
// recv's slice at offset sum(counts[0..r))).
CallDesc check_all_gather(const Caller& caller, ConstBuffer send, MutBuffer recv,
                          std::span<const std::size_t> counts);

// counts.size() == p, algo ring or sequential, send.size() == sum(counts),
// recv.size() == counts[r] (in place: recv is send's chunk at offset sum(counts[0..r))).
CallDesc check_reduce_scatter(const Caller& caller, ConstBuffer send, MutBuffer recv,
                              std::span<const std::size_t> counts, ReduceOp op, Algorithm algo);

// send_counts.size() == recv_counts.size() == p, send.size() == sum(send_counts),
// recv.size() == sum(recv_counts); never in place.
CallDesc check_all_to_all(const Caller& caller, ConstBuffer send,
                          std::span<const std::size_t> send_counts, MutBuffer recv,
                          std::span<const std::size_t> recv_counts);

// root in [0, p), counts.size() == p, send.size() == counts[r]; on the root
// recv.size() == sum(counts) (in place: send is recv's slice at offset sum(counts[0..r))).
CallDesc check_gather(const Caller& caller, ConstBuffer send, MutBuffer recv,
                      std::span<const std::size_t> counts, int root);

// root in [0, p), counts.size() == p, recv.size() == counts[r]; on the root
// send.size() == sum(counts), and send and recv overlap only as gather's in-place form (send
// starting sum(counts[0..r)) elements into recv).
CallDesc check_scatter(const Caller& caller, ConstBuffer send, MutBuffer recv,
                       std::span<const std::size_t> counts, int root);

// Never in place. The description holds the shift mod p.
CallDesc check_ring_shift(const Caller& caller, ConstBuffer send, MutBuffer recv, int shift);

// send: dst is another rank of the group. recv: src is another rank of the group.
void check_send(const Caller& caller, int dst);
void check_recv(const Caller& caller, int src);

// group(): ranks non-empty, distinct, in [0, p), and containing the caller.
void check_group(const Caller& caller, std::span<const int> ranks);

}  // namespace shardcheck
