#include "runtime/omp/omp_communicator.hpp"

#include "runtime/counts.hpp"
#include "runtime/errors.hpp"
#include "runtime/omp/fold.hpp"

#include <cstring>
#include <numeric>
#include <utility>

namespace shardcheck::omp {
namespace {

void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes != 0 && dst != src) std::memmove(dst, src, bytes);
}

}  // namespace

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

GroupCalls OmpCommunicator::do_exchange(const CallDesc& call, const void* send, void* recv) {
  wait_step_ = step_;
  const auto r = static_cast<std::size_t>(rank_);
  auto& calls = state_->calls[step_ % 2];
  calls[r] = call;
  slots()[r] = {send, recv};
  sync(name(call.op), /*interruptible=*/true);
  return {calls, step_};
}

void OmpCommunicator::record_step(std::uint64_t count, wire::WireBytes bytes) {
  const CallDesc& d = my_call();
  ledger().record({d.op, ledger_members_, d.dtype, count, bytes.sent, bytes.recv, d.algorithm,
                   d.reduce_op, -1, step_});
  ++step_;
  finish();
}

void OmpCommunicator::leave(std::uint64_t count, wire::WireBytes bytes) {
  sync(name(my_call().op), /*interruptible=*/false);
  record_step(count, bytes);
}

// ---- collectives ----

void OmpCommunicator::do_barrier() {
  // One episode, the exchange, suffices: slots are double-buffered (group_state.hpp), so no
  // closing wait.
  record_step(0, wire::barrier());
}

void OmpCommunicator::do_broadcast(MutBuffer buf, int root) {
  const auto es = size_of(buf.dtype);
  if (rank_ != root) {
    copy_bytes(buf.data, slots()[static_cast<std::size_t>(root)].recv, buf.count * es);
  }
  leave(buf.count, wire::broadcast(buf.count, es, size(), rank_, root));
}

void OmpCommunicator::do_reduce(ConstBuffer send, MutBuffer recv, ReduceOp op, int root) {
  const int p = size();
  if (rank_ == root) {
    std::vector<const void*> inputs(static_cast<std::size_t>(p));
    for (int j = 0; j < p; ++j) {
      inputs[static_cast<std::size_t>(j)] =
          slots()[static_cast<std::size_t>(wrap_rank(root + 1 + j, p))].send;
    }
    fold(send.dtype, op, inputs, 0, send.count, recv.data, p);
  }
  leave(send.count, wire::reduce(send.count, size_of(send.dtype), p, rank_, root));
}

// recv is written through every rank's slot (below).
void OmpCommunicator::do_all_reduce(ConstBuffer send, MutBuffer /*recv*/, ReduceOp op,
                                    Algorithm algo) {
  auto& slots = this->slots();
  const int p = size();
  const auto es = size_of(send.dtype);
  const auto chunk = balanced_chunks(send.count, p);
  const auto off = counts_offsets(chunk);
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
  leave(send.count, wire::all_reduce(send.count, es, p, rank_, algo));
}

void OmpCommunicator::do_all_gather(ConstBuffer send, MutBuffer recv,
                                    std::span<const std::size_t> counts) {
  auto& slots = this->slots();
  const auto off = counts_offsets(counts);
  const auto es = size_of(send.dtype);
  for (std::size_t k = 0; k < counts.size(); ++k) {
    copy_bytes(static_cast<std::byte*>(recv.data) + off[k] * es, slots[k].send, counts[k] * es);
  }
  leave(off.back(), wire::all_gather(counts, es, rank_));
}

void OmpCommunicator::do_reduce_scatter(ConstBuffer send, MutBuffer recv,
                                        std::span<const std::size_t> counts, ReduceOp op,
                                        Algorithm algo) {
  auto& slots = this->slots();
  const int p = size();
  const auto r = static_cast<std::size_t>(rank_);
  const auto off = counts_offsets(counts);
  std::vector<const void*> inputs(static_cast<std::size_t>(p));
  const auto order = fold_order(algo, rank_, p);
  for (std::size_t j = 0; j < inputs.size(); ++j) {
    inputs[j] = slots[static_cast<std::size_t>(order[j])].send;
  }
  fold(send.dtype, op, inputs, off[r], counts[r], recv.data, p);
  leave(off.back(), wire::reduce_scatter(counts, size_of(send.dtype), rank_, algo));
}

void OmpCommunicator::do_all_to_all(ConstBuffer send, std::span<const std::size_t> send_counts,
                                    MutBuffer recv, std::span<const std::size_t> recv_counts) {
  auto& slots = this->slots();
  const auto& calls = state_->calls[step_ % 2];
  const auto es = size_of(send.dtype);
  const auto r = static_cast<std::size_t>(rank_);
  const auto recv_off = counts_offsets(recv_counts);
  for (std::size_t s = 0; s < slots.size(); ++s) {
    const auto send_off = counts_offsets(calls[s].counts);
    copy_bytes(static_cast<std::byte*>(recv.data) + recv_off[s] * es,
               static_cast<const std::byte*>(slots[s].send) + send_off[r] * es,
               recv_counts[s] * es);
  }
  leave(send.count, wire::all_to_all(send_counts, recv_counts, es, rank_));
}

void OmpCommunicator::do_gather(ConstBuffer send, MutBuffer recv,
                                std::span<const std::size_t> counts, int root) {
  auto& slots = this->slots();
  const auto off = counts_offsets(counts);
  const auto es = size_of(send.dtype);
  if (rank_ == root) {
    for (std::size_t k = 0; k < counts.size(); ++k) {
      copy_bytes(static_cast<std::byte*>(recv.data) + off[k] * es, slots[k].send, counts[k] * es);
    }
  }
  leave(off.back(), wire::gather(counts, es, rank_, root));
}

// The root's send is read through its slot.
void OmpCommunicator::do_scatter(ConstBuffer /*send*/, MutBuffer recv,
                                 std::span<const std::size_t> counts, int root) {
  const auto r = static_cast<std::size_t>(rank_);
  const auto off = counts_offsets(counts);
  const auto es = size_of(recv.dtype);
  copy_bytes(
      recv.data,
      static_cast<const std::byte*>(slots()[static_cast<std::size_t>(root)].send) + off[r] * es,
      counts[r] * es);
  leave(off.back(), wire::scatter(counts, es, rank_, root));
}

void OmpCommunicator::do_ring_shift(ConstBuffer send, MutBuffer recv, int /*shift*/) {
  const int p = size();
  const int shift = my_call().shift;  // already mod p
  const auto es = size_of(send.dtype);
  const int src = wrap_rank(rank_ - shift, p);
  copy_bytes(recv.data, slots()[static_cast<std::size_t>(src)].send, recv.count * es);
  leave(send.count, wire::ring_shift(send.count, recv.count, es, p, shift));
}

// ---- point to point ----

void OmpCommunicator::do_send(ConstBuffer buf, int dst, int tag) {
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
  Channel& ch = state_->channel(src, rank_);
  const std::uint64_t seq = ch.consumed.load(std::memory_order_relaxed);
  const WaitSite site{"recv", seq, state_->members.get(), src, tag};
  world_.wait_change(world_rank_, ch.posted, seq, site);
  int expected = Channel::open;
  if (!ch.claim.compare_exchange_strong(expected, Channel::claimed, std::memory_order_acq_rel)) {
    world_.throw_fatal(world_rank_, site);  // the sender gave up and unwound
  }
  std::string error = message_mismatch(caller(), seq, src, {ch.count, ch.dtype, ch.tag},
                                       {buf.count, buf.dtype, tag});
  if (error.empty()) copy_bytes(buf.data, ch.data, buf.count * size_of(buf.dtype));
  ch.error = error;
  ch.consumed.store(seq + 1, std::memory_order_release);
  world_.notify();
  if (!error.empty()) throw CollectiveMismatch(error);
  const auto bytes = wire::recv(buf.count, size_of(buf.dtype));
  ledger().record({Collective::recv, ledger_members_, buf.dtype, buf.count, bytes.sent, bytes.recv,
                   Algorithm::direct, ReduceOp::sum, src, seq});
}

// ---- groups ----

std::unique_ptr<Communicator> OmpCommunicator::do_group(std::span<const int> ranks) {
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
