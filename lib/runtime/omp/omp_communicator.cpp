#include "runtime/omp/omp_communicator.hpp"

#include "runtime/counts.hpp"
#include "runtime/errors.hpp"
#include "runtime/omp/fold.hpp"
#include "runtime/wire_bytes.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

namespace shardcheck::omp {
namespace {

std::uint64_t sum(std::span<const std::size_t> v) { return counts_total(v); }

std::string join(std::span<const std::size_t> v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i != 0) s += ',';
    s += std::to_string(v[i]);
  }
  return s + ']';
}

std::vector<std::size_t> offsets_of(std::span<const std::size_t> counts) {
  return counts_offsets(counts);
}

int mod(int a, int p) { return wrap_rank(a, p); }

// The fold order of chunk `owner` (group ranks).
std::vector<int> fold_order(Algorithm algo, int owner, int p) {
  std::vector<int> order(static_cast<std::size_t>(p));
  for (int j = 0; j < p; ++j) {
    order[static_cast<std::size_t>(j)] = algo == Algorithm::ring ? mod(owner + 1 + j, p) : j;
  }
  return order;
}

void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes != 0 && dst != src) std::memmove(dst, src, bytes);
}

}  // namespace

std::string CallDesc::describe() const {
  std::ostringstream os;
  os << name(op) << '(' << name(dtype);
  switch (op) {
    case Collective::barrier: break;
    case Collective::broadcast: os << ", count=" << count << ", root=" << root; break;
    case Collective::reduce:
      os << ", count=" << count << ", op=" << name(reduce_op) << ", root=" << root;
      break;
    case Collective::all_reduce:
      os << ", count=" << count << ", op=" << name(reduce_op) << ", algorithm=" << name(algorithm);
      break;
    case Collective::all_gather: os << ", counts=" << join(counts); break;
    case Collective::reduce_scatter:
      os << ", counts=" << join(counts) << ", op=" << name(reduce_op)
         << ", algorithm=" << name(algorithm);
      break;
    case Collective::all_to_all:
      os << ", send_counts=" << join(counts) << ", recv_counts=" << join(counts2);
      break;
    case Collective::gather:
    case Collective::scatter: os << ", counts=" << join(counts) << ", root=" << root; break;
    case Collective::ring_shift:
      os << ", shift=" << shift << ", send=" << send_count << ", recv=" << recv_count;
      break;
    case Collective::send:
    case Collective::recv: os << ", count=" << count; break;
  }
  os << ')';
  return os.str();
}

OmpCommunicator::OmpCommunicator(World& world, std::shared_ptr<GroupState> state, int group_rank)
    : world_(world),
      state_(std::move(state)),
      rank_(group_rank),
      world_rank_((*state_->members)[static_cast<std::size_t>(group_rank)]),
      ledger_members_(std::make_shared<const std::vector<int>>(*state_->members)) {}

std::unique_ptr<Communicator> make_world_communicator(World& world, int world_rank) {
  std::vector<int> all(static_cast<std::size_t>(world.size()));
  std::iota(all.begin(), all.end(), 0);
  // The world is the first group over all ranks: a later group() with the same member list
  // is a new group, not the world again.
  const int index = world.next_group_index(world_rank, all);
  return std::make_unique<OmpCommunicator>(world, world.group_state(all, index), world_rank);
}

// ---- errors ----

std::string OmpCommunicator::who(int group_rank) const {
  const int w = (*state_->members)[static_cast<std::size_t>(group_rank)];
  if (w == group_rank) return "rank " + std::to_string(group_rank);
  return "rank " + std::to_string(group_rank) + " (world rank " + std::to_string(w) + ")";
}

void OmpCommunicator::usage(std::string_view op, const std::string& problem) const {
  throw UsageError(who(rank_) + " of group " + format_group(*state_->members) + ", " +
                   std::string(op) + ": " + problem);
}

void OmpCommunicator::mismatch(const std::vector<Slot>& slots, const std::string& detail) const {
  std::string msg = "collective mismatch at step " + std::to_string(step_) + " on group " +
                    format_group(*state_->members) + ": " + detail + "\n";
  for (int k = 0; k < size(); ++k) {
    msg += "  " + who(k) + ": " + slots[static_cast<std::size_t>(k)].desc.describe() + "\n";
  }
  msg +=
      "Every rank of a group must call the same collective with the same element type, counts, "
      "root, reduce op and algorithm at the same step.";
  throw CollectiveMismatch(msg);
}

void OmpCommunicator::check_root(std::string_view op, int root) const {
  if (root < 0 || root >= size()) {
    usage(op, "root " + std::to_string(root) + " is not a rank of this group of " +
                  std::to_string(size()) + "; pass a root in [0, " + std::to_string(size()) + ")");
  }
}

void OmpCommunicator::check_counts(std::string_view op, std::span<const std::size_t> counts,
                                   std::string_view what) const {
  if (counts.size() != static_cast<std::size_t>(size())) {
    usage(op, std::string(what) + " has " + std::to_string(counts.size()) +
                  " entries but the group has " + std::to_string(size()) +
                  " ranks; pass one count per rank");
  }
}

void OmpCommunicator::check_dtype(std::string_view op, DType a, DType b) const {
  if (a != b) {
    usage(op, "send is " + std::string(name(a)) + " but recv is " + std::string(name(b)) +
                  "; both buffers must have the same element type");
  }
}

void OmpCommunicator::check_reduce_op(std::string_view op, ReduceOp rop, DType t) const {
  if (!supports(rop, t)) {
    usage(op, "reduce op " + std::string(name(rop)) + " is not defined for " +
                  std::string(name(t)) + " (avg needs a floating-point type); use sum and divide");
  }
}

void OmpCommunicator::check_no_partial_overlap(std::string_view op, ConstBuffer send,
                                               MutBuffer recv,
                                               std::optional<std::size_t> in_place_offset) const {
  const auto es = size_of(send.dtype);
  const auto* s = static_cast<const std::byte*>(send.data);
  const auto* r = static_cast<const std::byte*>(recv.data);
  if (send.count == 0 || recv.count == 0) return;
  const bool overlap = s < r + recv.count * es && r < s + send.count * es;
  if (overlap && (!in_place_offset || s != r + *in_place_offset * es)) {
    usage(op, in_place_offset ? "send and recv overlap without being in place; use separate "
                                "buffers, or pass send at exactly the in-place position "
                                "documented for " +
                                    std::string(op)
                              : "send and recv overlap; " + std::string(op) +
                                    " has no in-place form, use separate buffers");
  }
}

// ---- the synchronization skeleton ----

void OmpCommunicator::sync(std::string_view what, bool interruptible) {
  GroupState& g = *state_;
  const WaitSite site{what, wait_step_, g.members.get()};
  const auto size = static_cast<std::uint64_t>(g.size);
  std::uint64_t w = g.barrier.load(std::memory_order_acquire);
  std::uint64_t next = 0;
  do {
    if ((w & GroupState::barrier_abandoned) != 0) world_.throw_fatal(world_rank_, site);
    next = (w & GroupState::barrier_count_mask) + 1 == size
               ? ((w >> GroupState::barrier_gen_shift) + 1) << GroupState::barrier_gen_shift
               : w + 1;
  } while (!g.barrier.compare_exchange_weak(w, next, std::memory_order_acq_rel,
                                            std::memory_order_acquire));
  const std::uint64_t gen = w >> GroupState::barrier_gen_shift;
  if ((next >> GroupState::barrier_gen_shift) != gen) {
    world_.notify();
    return;
  }
  w = next;
  for (;;) {
    try {
      world_.wait_change(world_rank_, g.barrier, w, site, interruptible);
    } catch (...) {
      w = g.barrier.load(std::memory_order_acquire);
      while ((w >> GroupState::barrier_gen_shift) == gen) {
        if (g.barrier.compare_exchange_weak(w, w | GroupState::barrier_abandoned,
                                            std::memory_order_acq_rel, std::memory_order_acquire)) {
          world_.notify();
          throw;
        }
      }
      pending_ = std::current_exception();
      return;
    }
    w = g.barrier.load(std::memory_order_acquire);
    if ((w >> GroupState::barrier_gen_shift) != gen) return;
    if ((w & GroupState::barrier_abandoned) != 0) world_.throw_fatal(world_rank_, site);
  }
}

void OmpCommunicator::finish() {
  if (pending_) std::rethrow_exception(std::exchange(pending_, nullptr));
}

std::vector<Slot>& OmpCommunicator::enter(CallDesc desc, const void* send, void* recv) {
  wait_step_ = step_;
  auto& slots = state_->slots[step_ % 2];
  auto& mine = slots[static_cast<std::size_t>(rank_)];
  const std::string_view op = name(desc.op);
  mine.desc = std::move(desc);
  mine.send = send;
  mine.recv = recv;
  sync(op, /*interruptible=*/true);
  check_agreement(slots);
  return slots;
}

void OmpCommunicator::check_agreement(const std::vector<Slot>& slots) const {
  const CallDesc& a = slots[0].desc;
  for (const auto& s : slots) {
    const CallDesc& b = s.desc;
    if (b.op != a.op) mismatch(slots, "different collectives");
    if (b.dtype != a.dtype) mismatch(slots, "different element types");
    if (b.reduce_op != a.reduce_op) mismatch(slots, "different reduce ops");
    if (b.algorithm != a.algorithm) mismatch(slots, "different algorithms");
    if (b.root != a.root) mismatch(slots, "different roots");
    if (b.shift != a.shift) mismatch(slots, "different shifts");
    if (b.count != a.count) mismatch(slots, "different counts");
    if (b.counts != a.counts && a.op != Collective::all_to_all) {
      mismatch(slots, "different per-rank counts");
    }
  }
  const int p = size();
  if (a.op == Collective::all_to_all) {
    for (int s = 0; s < p; ++s) {
      for (int d = 0; d < p; ++d) {
        const auto sent =
            slots[static_cast<std::size_t>(s)].desc.counts[static_cast<std::size_t>(d)];
        const auto got =
            slots[static_cast<std::size_t>(d)].desc.counts2[static_cast<std::size_t>(s)];
        if (sent != got) {
          mismatch(slots, who(s) + " sends " + std::to_string(sent) + " elements to " + who(d) +
                              ", which expects " + std::to_string(got));
        }
      }
    }
  }
  if (a.op == Collective::ring_shift) {
    for (int r = 0; r < p; ++r) {
      const int src = mod(r - a.shift, p);
      const auto expect = slots[static_cast<std::size_t>(src)].desc.send_count;
      const auto got = slots[static_cast<std::size_t>(r)].desc.recv_count;
      if (expect != got) {
        mismatch(slots, who(r) + " receives " + std::to_string(got) + " elements from " + who(src) +
                            ", which sends " + std::to_string(expect));
      }
    }
  }
}

void OmpCommunicator::leave(const CallDesc& desc, std::uint64_t count, wire::WireBytes bytes) {
  sync(name(desc.op), /*interruptible=*/false);
  ledger().record({desc.op, ledger_members_, desc.dtype, count, bytes.sent, bytes.recv,
                   desc.algorithm, desc.reduce_op, -1, step_});
  ++step_;
  finish();
}

// ---- collectives ----

void OmpCommunicator::do_barrier() {
  CallDesc d;
  d.op = Collective::barrier;
  d.dtype = DType::float32;
  enter(std::move(d), nullptr, nullptr);
  // One episode suffices: slots are double-buffered (group_state.hpp), so no closing wait.
  const auto bytes = wire::barrier();
  ledger().record({Collective::barrier, ledger_members_, DType::float32, 0, bytes.sent, bytes.recv,
                   Algorithm::none, ReduceOp::sum, -1, step_});
  ++step_;
  finish();
}

void OmpCommunicator::do_broadcast(MutBuffer buf, int root) {
  check_root("broadcast", root);
  CallDesc d;
  d.op = Collective::broadcast;
  d.dtype = buf.dtype;
  d.algorithm = Algorithm::chain;
  d.root = root;
  d.count = buf.count;
  auto& slots = enter(d, buf.data, buf.data);
  const auto es = size_of(buf.dtype);
  if (rank_ != root) {
    copy_bytes(buf.data, slots[static_cast<std::size_t>(root)].recv, buf.count * es);
  }
  leave(d, buf.count, wire::broadcast(buf.count, es, size(), rank_, root));
}

void OmpCommunicator::do_reduce(ConstBuffer send, MutBuffer recv, ReduceOp op, int root) {
  check_root("reduce", root);
  check_reduce_op("reduce", op, send.dtype);
  if (rank_ == root) {
    check_dtype("reduce", send.dtype, recv.dtype);
    if (recv.count != send.count) {
      usage("reduce", "recv on the root has " + std::to_string(recv.count) +
                          " elements but send has " + std::to_string(send.count) +
                          "; the root's recv must hold the whole result");
    }
    check_no_partial_overlap("reduce", send, recv, 0);
  }
  CallDesc d;
  d.op = Collective::reduce;
  d.dtype = send.dtype;
  d.reduce_op = op;
  d.algorithm = Algorithm::chain;
  d.root = root;
  d.count = send.count;
  auto& slots = enter(d, send.data, recv.data);
  const int p = size();
  if (rank_ == root) {
    std::vector<const void*> inputs(static_cast<std::size_t>(p));
    for (int j = 0; j < p; ++j) {
      inputs[static_cast<std::size_t>(j)] =
          slots[static_cast<std::size_t>(mod(root + 1 + j, p))].send;
    }
    fold(send.dtype, op, inputs, 0, send.count, recv.data, p);
  }
  leave(d, send.count, wire::reduce(send.count, size_of(send.dtype), p, rank_, root));
}

void OmpCommunicator::do_all_reduce(ConstBuffer send, MutBuffer recv, ReduceOp op, Algorithm algo) {
  constexpr std::string_view opname = "all_reduce";
  check_dtype(opname, send.dtype, recv.dtype);
  check_reduce_op(opname, op, send.dtype);
  if (algo != Algorithm::ring && algo != Algorithm::sequential) {
    usage(opname, "algorithm " + std::string(name(algo)) +
                      " is not an all_reduce algorithm; "
                      "use Algorithm::ring or Algorithm::sequential");
  }
  if (recv.count != send.count) {
    usage(opname, "send has " + std::to_string(send.count) + " elements but recv has " +
                      std::to_string(recv.count) + "; they must be the same size");
  }
  check_no_partial_overlap(opname, send, recv, 0);
  CallDesc d;
  d.op = Collective::all_reduce;
  d.dtype = send.dtype;
  d.reduce_op = op;
  d.algorithm = algo;
  d.count = send.count;
  auto& slots = enter(d, send.data, recv.data);
  const int p = size();
  const auto es = size_of(send.dtype);
  const auto chunk = balanced_chunks(send.count, p);
  const auto off = offsets_of(chunk);
  const auto r = static_cast<std::size_t>(rank_);

  // Rank r finishes chunk r from every rank's send, in the algorithm's order, and writes it
  // straight into every rank's recv: in shared memory the all_gather phase then costs no second
  // pass over the chunk and no second wait. Only rank r touches chunk r of any buffer, and each
  // block is read from every input before it is written, so in-place calls are safe.
  std::vector<const void*> inputs(static_cast<std::size_t>(p));
  const auto order = fold_order(algo, rank_, p);
  for (std::size_t j = 0; j < inputs.size(); ++j) {
    inputs[j] = slots[static_cast<std::size_t>(order[j])].send;
  }
  std::vector<void*> outs(static_cast<std::size_t>(p));
  for (std::size_t k = 0; k < outs.size(); ++k) {
    outs[k] = static_cast<std::byte*>(slots[k].recv) + off[r] * es;
  }
  fold_to(send.dtype, op, inputs, off[r], chunk[r], outs, p);
  leave(d, send.count, wire::all_reduce(send.count, es, p, rank_, algo));
}

void OmpCommunicator::do_all_gather(ConstBuffer send, MutBuffer recv,
                                    std::span<const std::size_t> counts) {
  constexpr std::string_view opname = "all_gather";
  check_dtype(opname, send.dtype, recv.dtype);
  check_counts(opname, counts, "counts");
  const auto r = static_cast<std::size_t>(rank_);
  if (send.count != counts[r]) {
    usage(opname, "send has " + std::to_string(send.count) + " elements but counts[" +
                      std::to_string(r) + "] = " + std::to_string(counts[r]) + " (counts " +
                      join(counts) + "); pass counts whose entry for this rank is send.size()");
  }
  const auto total = sum(counts);
  if (recv.count != total) {
    usage(opname, "recv has " + std::to_string(recv.count) + " elements but the counts " +
                      join(counts) + " add up to " + std::to_string(total) +
                      "; recv must hold every rank's piece");
  }
  const auto off = offsets_of(counts);
  check_no_partial_overlap(opname, send, recv, off[r]);
  CallDesc d;
  d.op = Collective::all_gather;
  d.dtype = send.dtype;
  d.algorithm = Algorithm::ring;
  d.counts.assign(counts.begin(), counts.end());
  auto& slots = enter(d, send.data, recv.data);
  const auto es = size_of(send.dtype);
  for (std::size_t k = 0; k < counts.size(); ++k) {
    copy_bytes(static_cast<std::byte*>(recv.data) + off[k] * es, slots[k].send, counts[k] * es);
  }
  leave(d, total, wire::all_gather(counts, es, rank_));
}

void OmpCommunicator::do_reduce_scatter(ConstBuffer send, MutBuffer recv,
                                        std::span<const std::size_t> counts, ReduceOp op,
                                        Algorithm algo) {
  constexpr std::string_view opname = "reduce_scatter";
  check_dtype(opname, send.dtype, recv.dtype);
  check_reduce_op(opname, op, send.dtype);
  check_counts(opname, counts, "counts");
  if (algo != Algorithm::ring && algo != Algorithm::sequential) {
    usage(opname, "algorithm " + std::string(name(algo)) +
                      " is not a reduce_scatter "
                      "algorithm; use Algorithm::ring or Algorithm::sequential");
  }
  const auto r = static_cast<std::size_t>(rank_);
  const auto total = sum(counts);
  if (send.count != total) {
    usage(opname, "send has " + std::to_string(send.count) + " elements but the counts " +
                      join(counts) + " add up to " + std::to_string(total) +
                      "; send must hold the whole buffer");
  }
  if (recv.count != counts[r]) {
    usage(opname, "recv has " + std::to_string(recv.count) + " elements but counts[" +
                      std::to_string(r) + "] = " + std::to_string(counts[r]) + " (counts " +
                      join(counts) + "); recv must hold this rank's chunk");
  }
  const auto off = offsets_of(counts);
  // In place: recv is send's own chunk, i.e. send starts off[r] elements before recv.
  {
    const auto es = size_of(send.dtype);
    const auto* s = static_cast<const std::byte*>(send.data);
    const auto* rv = static_cast<const std::byte*>(recv.data);
    const bool overlap =
        send.count != 0 && recv.count != 0 && s < rv + recv.count * es && rv < s + send.count * es;
    if (overlap && rv != s + off[r] * es) {
      usage(opname,
            "send and recv overlap without being in place; recv must be send's own "
            "chunk (offset sum(counts[0..rank))) or a separate buffer");
    }
  }
  CallDesc d;
  d.op = Collective::reduce_scatter;
  d.dtype = send.dtype;
  d.reduce_op = op;
  d.algorithm = algo;
  d.counts.assign(counts.begin(), counts.end());
  auto& slots = enter(d, send.data, recv.data);
  const int p = size();
  std::vector<const void*> inputs(static_cast<std::size_t>(p));
  const auto order = fold_order(algo, rank_, p);
  for (std::size_t j = 0; j < inputs.size(); ++j) {
    inputs[j] = slots[static_cast<std::size_t>(order[j])].send;
  }
  fold(send.dtype, op, inputs, off[r], counts[r], recv.data, p);
  leave(d, total, wire::reduce_scatter(counts, size_of(send.dtype), rank_, algo));
}

void OmpCommunicator::do_all_to_all(ConstBuffer send, std::span<const std::size_t> send_counts,
                                    MutBuffer recv, std::span<const std::size_t> recv_counts) {
  constexpr std::string_view opname = "all_to_all";
  check_dtype(opname, send.dtype, recv.dtype);
  check_counts(opname, send_counts, "send_counts");
  check_counts(opname, recv_counts, "recv_counts");
  if (send.count != sum(send_counts)) {
    usage(opname, "send has " + std::to_string(send.count) + " elements but send_counts " +
                      join(send_counts) + " add up to " + std::to_string(sum(send_counts)));
  }
  if (recv.count != sum(recv_counts)) {
    usage(opname, "recv has " + std::to_string(recv.count) + " elements but recv_counts " +
                      join(recv_counts) + " add up to " + std::to_string(sum(recv_counts)));
  }
  check_no_partial_overlap(opname, send, recv, std::nullopt);
  CallDesc d;
  d.op = Collective::all_to_all;
  d.dtype = send.dtype;
  d.algorithm = Algorithm::direct;
  d.counts.assign(send_counts.begin(), send_counts.end());
  d.counts2.assign(recv_counts.begin(), recv_counts.end());
  auto& slots = enter(d, send.data, recv.data);
  const auto es = size_of(send.dtype);
  const auto r = static_cast<std::size_t>(rank_);
  const auto recv_off = offsets_of(recv_counts);
  for (std::size_t s = 0; s < slots.size(); ++s) {
    const auto send_off = offsets_of(slots[s].desc.counts);
    copy_bytes(static_cast<std::byte*>(recv.data) + recv_off[s] * es,
               static_cast<const std::byte*>(slots[s].send) + send_off[r] * es,
               recv_counts[s] * es);
  }
  leave(d, send.count, wire::all_to_all(send_counts, recv_counts, es, rank_));
}

std::vector<std::size_t> OmpCommunicator::check_rooted_counts(
    std::string_view op, ConstBuffer send, MutBuffer recv, std::span<const std::size_t> counts,
    int root, std::string_view local_name, std::size_t local_count, std::string_view rooted_name,
    std::size_t rooted_count) const {
  check_root(op, root);
  check_counts(op, counts, "counts");
  const auto r = static_cast<std::size_t>(rank_);
  if (local_count != counts[r]) {
    usage(op, std::string(local_name) + " has " + std::to_string(local_count) +
                  " elements but counts[" + std::to_string(r) + "] = " + std::to_string(counts[r]) +
                  " (counts " + join(counts) + "); pass counts whose entry for this rank is " +
                  std::string(local_name) + ".size()");
  }
  auto off = offsets_of(counts);
  if (rank_ == root) {
    check_dtype(op, send.dtype, recv.dtype);
    if (rooted_count != sum(counts)) {
      usage(op, std::string(rooted_name) + " on the root has " + std::to_string(rooted_count) +
                    " elements but the counts " + join(counts) + " add up to " +
                    std::to_string(sum(counts)) + "; the root's " + std::string(rooted_name) +
                    " must hold every rank's piece");
    }
    check_no_partial_overlap(op, send, recv, off[r]);
  }
  return off;
}

void OmpCommunicator::do_gather(ConstBuffer send, MutBuffer recv,
                                std::span<const std::size_t> counts, int root) {
  const auto off = check_rooted_counts("gather", send, recv, counts, root, "send", send.count,
                                       "recv", recv.count);
  const auto total = sum(counts);
  CallDesc d;
  d.op = Collective::gather;
  d.dtype = send.dtype;
  d.algorithm = Algorithm::direct;
  d.root = root;
  d.counts.assign(counts.begin(), counts.end());
  auto& slots = enter(d, send.data, recv.data);
  const auto es = size_of(send.dtype);
  if (rank_ == root) {
    for (std::size_t k = 0; k < counts.size(); ++k) {
      copy_bytes(static_cast<std::byte*>(recv.data) + off[k] * es, slots[k].send, counts[k] * es);
    }
  }
  leave(d, total, wire::gather(counts, es, rank_, root));
}

void OmpCommunicator::do_scatter(ConstBuffer send, MutBuffer recv,
                                 std::span<const std::size_t> counts, int root) {
  const auto off = check_rooted_counts("scatter", send, recv, counts, root, "recv", recv.count,
                                       "send", send.count);
  const auto r = static_cast<std::size_t>(rank_);
  const auto total = sum(counts);
  CallDesc d;
  d.op = Collective::scatter;
  d.dtype = recv.dtype;
  d.algorithm = Algorithm::direct;
  d.root = root;
  d.counts.assign(counts.begin(), counts.end());
  auto& slots = enter(d, send.data, recv.data);
  const auto es = size_of(recv.dtype);
  copy_bytes(
      recv.data,
      static_cast<const std::byte*>(slots[static_cast<std::size_t>(root)].send) + off[r] * es,
      counts[r] * es);
  leave(d, total, wire::scatter(counts, es, rank_, root));
}

void OmpCommunicator::do_ring_shift(ConstBuffer send, MutBuffer recv, int shift) {
  constexpr std::string_view opname = "ring_shift";
  check_dtype(opname, send.dtype, recv.dtype);
  check_no_partial_overlap(opname, send, recv, std::nullopt);
  const int p = size();
  CallDesc d;
  d.op = Collective::ring_shift;
  d.dtype = send.dtype;
  d.algorithm = Algorithm::direct;
  d.shift = mod(shift, p);
  d.send_count = send.count;
  d.recv_count = recv.count;
  auto& slots = enter(d, send.data, recv.data);
  const auto es = size_of(send.dtype);
  const int src = mod(rank_ - d.shift, p);
  copy_bytes(recv.data, slots[static_cast<std::size_t>(src)].send, recv.count * es);
  leave(d, send.count, wire::ring_shift(send.count, recv.count, es, p, d.shift));
}

// ---- point to point ----

void OmpCommunicator::do_send(ConstBuffer buf, int dst, int tag) {
  if (dst < 0 || dst >= size() || dst == rank_) {
    usage("send", "destination " + std::to_string(dst) + " is not another rank of this group of " +
                      std::to_string(size()) + "; a rank cannot send to itself");
  }
  Channel& ch = state_->channel(rank_, dst);
  const std::uint64_t seq = ch.posted.load(std::memory_order_relaxed);
  ch.data = buf.data;
  ch.count = buf.count;
  ch.dtype = buf.dtype;
  ch.tag = tag;
  ch.error.clear();
  ch.claim.store(Channel::open, std::memory_order_relaxed);
  ch.posted.store(seq + 1, std::memory_order_release);
  world_.notify();
  const WaitSite site{"send", seq, state_->members.get(), dst, tag};
  try {
    world_.wait_change(world_rank_, ch.consumed, seq, site);
  } catch (...) {
    // Giving up: retract the message, or, if the receiver already claimed it and is copying
    // from `buf`, wait for it to finish before unwinding frees `buf`.
    int expected = Channel::open;
    if (!ch.claim.compare_exchange_strong(expected, Channel::retracted,
                                          std::memory_order_acq_rel)) {
      world_.wait_change(world_rank_, ch.consumed, seq, site, /*interruptible=*/false);
    }
    world_.notify();
    throw;
  }
  if (!ch.error.empty()) throw CollectiveMismatch(ch.error);
  const auto bytes = wire::send(buf.count, size_of(buf.dtype));
  ledger().record({Collective::send, ledger_members_, buf.dtype, buf.count, bytes.sent, bytes.recv,
                   Algorithm::direct, ReduceOp::sum, dst, seq});
}

void OmpCommunicator::do_recv(MutBuffer buf, int src, int tag) {
  if (src < 0 || src >= size() || src == rank_) {
    usage("recv", "source " + std::to_string(src) + " is not another rank of this group of " +
                      std::to_string(size()) + "; a rank cannot receive from itself");
  }
  Channel& ch = state_->channel(src, rank_);
  const std::uint64_t seq = ch.consumed.load(std::memory_order_relaxed);
  const WaitSite site{"recv", seq, state_->members.get(), src, tag};
  world_.wait_change(world_rank_, ch.posted, seq, site);
  int expected = Channel::open;
  if (!ch.claim.compare_exchange_strong(expected, Channel::claimed, std::memory_order_acq_rel)) {
    world_.throw_fatal(world_rank_, site);  // the sender gave up and unwound
  }
  std::string error;
  if (ch.dtype != buf.dtype || ch.count != buf.count || ch.tag != tag) {
    error = "send/recv mismatch on group " + format_group(*state_->members) + ", message " +
            std::to_string(seq) + " from " + who(src) + " to " + who(rank_) + ": the sender sent " +
            std::to_string(ch.count) + " x " + std::string(name(ch.dtype)) + " with tag " +
            std::to_string(ch.tag) + ", the receiver expects " + std::to_string(buf.count) + " x " +
            std::string(name(buf.dtype)) + " with tag " + std::to_string(tag) +
            ". Matching send and recv calls must agree on element type, count and tag.";
  } else {
    copy_bytes(buf.data, ch.data, buf.count * size_of(buf.dtype));
  }
  ch.error = error;
  ch.consumed.store(seq + 1, std::memory_order_release);
  world_.notify();
  if (!error.empty()) throw CollectiveMismatch(error);
  const auto bytes = wire::recv(buf.count, size_of(buf.dtype));
  ledger().record({Collective::recv, ledger_members_, buf.dtype, buf.count, bytes.sent, bytes.recv,
                   Algorithm::direct, ReduceOp::sum, src, seq});
}

// ---- groups ----

std::unique_ptr<Communicator> OmpCommunicator::group(std::span<const int> ranks) {
  std::string problem;
  std::set<int> seen;
  bool has_self = false;
  for (const int k : ranks) {
    if (k < 0 || k >= size()) problem = "rank " + std::to_string(k) + " is not in this group";
    else if (!seen.insert(k).second) problem = "rank " + std::to_string(k) + " appears twice";
    if (k == rank_) has_self = true;
  }
  if (ranks.empty()) problem = "the list is empty";
  if (problem.empty() && !has_self) problem = "it does not contain the calling rank";
  if (!problem.empty()) {
    std::string list = "[";
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      list += (i != 0 ? "," : "") + std::to_string(ranks[i]);
    }
    usage("group", "cannot form a group of " + list + "]: " + problem +
                       ". Pass distinct ranks "
                       "of this group (0.." +
                       std::to_string(size() - 1) +
                       "), including the caller; "
                       "only members call group()");
  }
  std::vector<int> world_members;
  world_members.reserve(ranks.size());
  int my_index = 0;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    world_members.push_back((*state_->members)[static_cast<std::size_t>(ranks[i])]);
    if (ranks[i] == rank_) my_index = static_cast<int>(i);
  }
  const int index = world_.next_group_index(world_rank_, world_members);
  return std::make_unique<OmpCommunicator>(world_, world_.group_state(world_members, index),
                                           my_index);
}

}  // namespace shardcheck::omp
