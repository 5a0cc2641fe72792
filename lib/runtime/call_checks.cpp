#include "runtime/call_checks.hpp"

#include "runtime/counts.hpp"

#include <optional>
#include <set>
#include <string>

namespace shardcheck {
namespace {

void check_root(const Caller& c, std::string_view op, int root) {
  if (root < 0 || root >= c.size()) {
    c.usage(op, "root " + std::to_string(root) + " is not a rank of this group of " +
                    std::to_string(c.size()) + "; pass a root in [0, " + std::to_string(c.size()) +
                    ")");
  }
}

void check_counts(const Caller& c, std::string_view op, std::span<const std::size_t> counts,
                  std::string_view what) {
  if (counts.size() != static_cast<std::size_t>(c.size())) {
    c.usage(op, std::string(what) + " has " + std::to_string(counts.size()) +
                    " entries but the group has " + std::to_string(c.size()) +
                    " ranks; pass one count per rank");
  }
}

void check_dtype(const Caller& c, std::string_view op, DType a, DType b) {
  if (a != b) {
    c.usage(op, "send is " + std::string(name(a)) + " but recv is " + std::string(name(b)) +
                    "; both buffers must have the same element type");
  }
}

void check_reduce_op(const Caller& c, std::string_view op, ReduceOp rop, DType t) {
  if (!supports(rop, t)) {
    c.usage(op, "reduce op " + std::string(name(rop)) + " is not defined for " +
                    std::string(name(t)) +
                    " (avg needs a floating-point type); use sum and divide");
  }
}

// all_reduce and reduce_scatter: `what` is "an all_reduce" or "a reduce_scatter".
void check_ring_or_sequential(const Caller& c, std::string_view op, Algorithm algo,
                              std::string_view what) {
  if (algo != Algorithm::ring && algo != Algorithm::sequential) {
    c.usage(op, "algorithm " + std::string(name(algo)) + " is not " + std::string(what) +
                    " algorithm; use Algorithm::ring or Algorithm::sequential");
  }
}

// Whether send and recv share a byte (both of send's element type).
bool overlap(ConstBuffer send, MutBuffer recv) {
  if (send.count == 0 || recv.count == 0) return false;
  const auto es = size_of(send.dtype);
  const auto* s = static_cast<const std::byte*>(send.data);
  const auto* r = static_cast<const std::byte*>(recv.data);
  return s < r + recv.count * es && r < s + send.count * es;
}

// Refuses send/recv that overlap unless send sits exactly `in_place_offset` elements into
// recv (the call's in-place form); nullopt: the call has no in-place form.
void check_no_partial_overlap(const Caller& c, std::string_view op, ConstBuffer send,
                              MutBuffer recv, std::optional<std::size_t> in_place_offset) {
  const auto* s = static_cast<const std::byte*>(send.data);
  const auto* r = static_cast<const std::byte*>(recv.data);
  if (!overlap(send, recv)) return;
  if (in_place_offset && s == r + *in_place_offset * size_of(send.dtype)) return;
  c.usage(op, in_place_offset ? "send and recv overlap without being in place; use separate "
                                "buffers, or pass send at exactly the in-place position "
                                "documented for " +
                                    std::string(op)
                              : "send and recv overlap; " + std::string(op) +
                                    " has no in-place form, use separate buffers");
}

// The description of a call, its other fields left at their defaults.
CallDesc call_of(Collective op, DType dtype, Algorithm algo) {
  CallDesc d;
  d.op = op;
  d.dtype = dtype;
  d.algorithm = algo;
  return d;
}

// broadcast and reduce: a chain of `count` elements from or to `root`.
CallDesc chain_call_of(Collective op, DType dtype, int root, std::uint64_t count) {
  CallDesc d = call_of(op, dtype, Algorithm::chain);
  d.root = root;
  d.count = count;
  return d;
}

// gather and scatter: `counts` is valid, this rank's own buffer (gather: send, scatter: recv)
// holds counts[rank], and on the root the rooted buffer (gather: recv, scatter: send) holds
// their sum, with send and recv of one type and placed apart or in place.
CallDesc check_rooted(const Caller& c, Collective op, ConstBuffer send, MutBuffer recv,
                      std::span<const std::size_t> counts, int root) {
  const std::string_view opname = name(op);
  const bool gather = op == Collective::gather;
  const std::string_view local_name = gather ? "send" : "recv";
  const std::string_view rooted_name = gather ? "recv" : "send";
  const std::size_t local_count = gather ? send.count : recv.count;
  const std::size_t rooted_count = gather ? recv.count : send.count;
  check_root(c, opname, root);
  check_counts(c, opname, counts, "counts");
  const auto r = static_cast<std::size_t>(c.rank());
  if (local_count != counts[r]) {
    c.usage(opname, std::string(local_name) + " has " + std::to_string(local_count) +
                        " elements but counts[" + std::to_string(r) +
                        "] = " + std::to_string(counts[r]) + " (counts " + format_counts(counts) +
                        "); pass counts whose entry for this rank is " + std::string(local_name) +
                        ".size()");
  }
  if (c.rank() == root) {
    check_dtype(c, opname, send.dtype, recv.dtype);
    const auto total = counts_total(counts);
    if (rooted_count != total) {
      c.usage(opname, std::string(rooted_name) + " on the root has " +
                          std::to_string(rooted_count) + " elements but the counts " +
                          format_counts(counts) + " add up to " + std::to_string(total) +
                          "; the root's " + std::string(rooted_name) +
                          " must hold every rank's piece");
    }
    check_no_partial_overlap(c, opname, send, recv, counts_offsets(counts)[r]);
  }
  CallDesc d = call_of(op, gather ? send.dtype : recv.dtype, Algorithm::direct);
  d.root = root;
  d.counts.assign(counts.begin(), counts.end());
  return d;
}

void check_peer(const Caller& c, std::string_view op, int peer, std::string_view role,
                std::string_view self) {
  if (peer < 0 || peer >= c.size() || peer == c.rank()) {
    c.usage(op, std::string(role) + " " + std::to_string(peer) +
                    " is not another rank of this group of " + std::to_string(c.size()) +
                    "; a rank cannot " + std::string(self));
  }
}

}  // namespace

CallDesc check_broadcast(const Caller& caller, MutBuffer buf, int root) {
  check_root(caller, "broadcast", root);
  return chain_call_of(Collective::broadcast, buf.dtype, root, buf.count);
}

CallDesc check_reduce(const Caller& caller, ConstBuffer send, MutBuffer recv, ReduceOp op,
                      int root) {
  constexpr std::string_view opname = "reduce";
  check_root(caller, opname, root);
  check_reduce_op(caller, opname, op, send.dtype);
  if (caller.rank() == root) {
    check_dtype(caller, opname, send.dtype, recv.dtype);
    if (recv.count != send.count) {
      caller.usage(opname, "recv on the root has " + std::to_string(recv.count) +
                               " elements but send has " + std::to_string(send.count) +
                               "; the root's recv must hold the whole result");
    }
    check_no_partial_overlap(caller, opname, send, recv, 0);
  }
  CallDesc d = chain_call_of(Collective::reduce, send.dtype, root, send.count);
  d.reduce_op = op;
  return d;
}

CallDesc check_all_reduce(const Caller& caller, ConstBuffer send, MutBuffer recv, ReduceOp op,
                          Algorithm algo) {
  constexpr std::string_view opname = "all_reduce";
  check_dtype(caller, opname, send.dtype, recv.dtype);
  check_reduce_op(caller, opname, op, send.dtype);
  check_ring_or_sequential(caller, opname, algo, "an all_reduce");
  if (recv.count != send.count) {
    caller.usage(opname, "send has " + std::to_string(send.count) + " elements but recv has " +
                             std::to_string(recv.count) + "; they must be the same size");
  }
  check_no_partial_overlap(caller, opname, send, recv, 0);
  CallDesc d = call_of(Collective::all_reduce, send.dtype, algo);
  d.reduce_op = op;
  d.count = send.count;
  return d;
}

CallDesc check_all_gather(const Caller& caller, ConstBuffer send, MutBuffer recv,
                          std::span<const std::size_t> counts) {
  constexpr std::string_view opname = "all_gather";
  check_dtype(caller, opname, send.dtype, recv.dtype);
  check_counts(caller, opname, counts, "counts");
  const auto r = static_cast<std::size_t>(caller.rank());
  if (send.count != counts[r]) {
    caller.usage(opname, "send has " + std::to_string(send.count) + " elements but counts[" +
                             std::to_string(r) + "] = " + std::to_string(counts[r]) + " (counts " +
                             format_counts(counts) +
                             "); pass counts whose entry for this rank is send.size()");
  }
  const auto total = counts_total(counts);
  if (recv.count != total) {
    caller.usage(opname, "recv has " + std::to_string(recv.count) + " elements but the counts " +
                             format_counts(counts) + " add up to " + std::to_string(total) +
                             "; recv must hold every rank's piece");
  }
  check_no_partial_overlap(caller, opname, send, recv, counts_offsets(counts)[r]);
  CallDesc d = call_of(Collective::all_gather, send.dtype, Algorithm::ring);
  d.counts.assign(counts.begin(), counts.end());
  return d;
}

CallDesc check_reduce_scatter(const Caller& caller, ConstBuffer send, MutBuffer recv,
                              std::span<const std::size_t> counts, ReduceOp op, Algorithm algo) {
  constexpr std::string_view opname = "reduce_scatter";
  check_dtype(caller, opname, send.dtype, recv.dtype);
  check_reduce_op(caller, opname, op, send.dtype);
  check_counts(caller, opname, counts, "counts");
  check_ring_or_sequential(caller, opname, algo, "a reduce_scatter");
  const auto r = static_cast<std::size_t>(caller.rank());
  const auto total = counts_total(counts);
  if (send.count != total) {
    caller.usage(opname, "send has " + std::to_string(send.count) + " elements but the counts " +
                             format_counts(counts) + " add up to " + std::to_string(total) +
                             "; send must hold the whole buffer");
  }
  if (recv.count != counts[r]) {
    caller.usage(opname, "recv has " + std::to_string(recv.count) + " elements but counts[" +
                             std::to_string(r) + "] = " + std::to_string(counts[r]) + " (counts " +
                             format_counts(counts) + "); recv must hold this rank's chunk");
  }
  // In place: recv is send's own chunk, i.e. send starts offsets[r] elements before recv.
  const auto* s = static_cast<const std::byte*>(send.data);
  const auto* rv = static_cast<const std::byte*>(recv.data);
  if (overlap(send, recv) && rv != s + counts_offsets(counts)[r] * size_of(send.dtype)) {
    caller.usage(opname,
                 "send and recv overlap without being in place; recv must be send's own "
                 "chunk (offset sum(counts[0..rank))) or a separate buffer");
  }
  CallDesc d = call_of(Collective::reduce_scatter, send.dtype, algo);
  d.reduce_op = op;
  d.counts.assign(counts.begin(), counts.end());
  return d;
}

CallDesc check_all_to_all(const Caller& caller, ConstBuffer send,
                          std::span<const std::size_t> send_counts, MutBuffer recv,
                          std::span<const std::size_t> recv_counts) {
  constexpr std::string_view opname = "all_to_all";
  check_dtype(caller, opname, send.dtype, recv.dtype);
  check_counts(caller, opname, send_counts, "send_counts");
  check_counts(caller, opname, recv_counts, "recv_counts");
  if (send.count != counts_total(send_counts)) {
    caller.usage(opname, "send has " + std::to_string(send.count) + " elements but send_counts " +
                             format_counts(send_counts) + " add up to " +
                             std::to_string(counts_total(send_counts)));
  }
  if (recv.count != counts_total(recv_counts)) {
    caller.usage(opname, "recv has " + std::to_string(recv.count) + " elements but recv_counts " +
                             format_counts(recv_counts) + " add up to " +
                             std::to_string(counts_total(recv_counts)));
  }
  check_no_partial_overlap(caller, opname, send, recv, std::nullopt);
  CallDesc d = call_of(Collective::all_to_all, send.dtype, Algorithm::direct);
  d.counts.assign(send_counts.begin(), send_counts.end());
  d.counts2.assign(recv_counts.begin(), recv_counts.end());
  return d;
}

CallDesc check_gather(const Caller& caller, ConstBuffer send, MutBuffer recv,
                      std::span<const std::size_t> counts, int root) {
  return check_rooted(caller, Collective::gather, send, recv, counts, root);
}

CallDesc check_scatter(const Caller& caller, ConstBuffer send, MutBuffer recv,
                       std::span<const std::size_t> counts, int root) {
  return check_rooted(caller, Collective::scatter, send, recv, counts, root);
}

CallDesc check_ring_shift(const Caller& caller, ConstBuffer send, MutBuffer recv, int shift) {
  constexpr std::string_view opname = "ring_shift";
  check_dtype(caller, opname, send.dtype, recv.dtype);
  check_no_partial_overlap(caller, opname, send, recv, std::nullopt);
  CallDesc d = call_of(Collective::ring_shift, send.dtype, Algorithm::direct);
  d.shift = wrap_rank(shift, caller.size());
  d.send_count = send.count;
  d.recv_count = recv.count;
  return d;
}

void check_send(const Caller& caller, int dst) {
  check_peer(caller, "send", dst, "destination", "send to itself");
}

void check_recv(const Caller& caller, int src) {
  check_peer(caller, "recv", src, "source", "receive from itself");
}

void check_group(const Caller& caller, std::span<const int> ranks) {
  std::string problem;
  std::set<int> seen;
  bool has_self = false;
  for (const int k : ranks) {
    if (k < 0 || k >= caller.size())
      problem = "rank " + std::to_string(k) + " is not in this group";
    else if (!seen.insert(k).second) problem = "rank " + std::to_string(k) + " appears twice";
    if (k == caller.rank()) has_self = true;
  }
  if (ranks.empty()) problem = "the list is empty";
  if (problem.empty() && !has_self) problem = "it does not contain the calling rank";
  if (problem.empty()) return;
  std::string list = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    list += (i != 0 ? "," : "") + std::to_string(ranks[i]);
  }
  caller.usage("group", "cannot form a group of " + list + "]: " + problem +
                            ". Pass distinct ranks of this group (0.." +
                            std::to_string(caller.size() - 1) +
                            "), including the caller; only members call group()");
}

}  // namespace shardcheck
