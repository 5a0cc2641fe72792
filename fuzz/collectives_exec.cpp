#include "collectives_exec.hpp"

#include "collectives_issue.hpp"

#include "runtime/communicator.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>

namespace shardcheck::fuzz {
namespace {

std::vector<std::size_t> offsets(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> off(counts.size() + 1, 0);
  for (std::size_t k = 0; k < counts.size(); ++k) off[k + 1] = off[k] + counts[k];
  return off;
}

std::size_t total(const std::vector<std::size_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

// Copies the rank's decoded input into buf[offset..], filling what the input lacks (a deviant's
// longer or retyped buffer) with a fixed byte.
void fill(std::vector<std::byte>& buf, std::size_t offset_bytes, std::size_t bytes,
          std::span<const std::byte> input) {
  const std::size_t n = std::min(bytes, input.size());
  if (n != 0) std::memcpy(buf.data() + offset_bytes, input.data(), n);
  std::fill(buf.begin() + static_cast<std::ptrdiff_t>(offset_bytes + n),
            buf.begin() + static_cast<std::ptrdiff_t>(offset_bytes + bytes), std::byte{0x3C});
}

RankBuffers prepare(const Program& prog, int w, const Action& act) {
  RankBuffers rb;
  if (act.stop || act.raise) return rb;
  const Call& s = act.spec;
  const Group& g = prog.groups[static_cast<std::size_t>(s.group)];
  const int p = static_cast<int>(g.members.size());
  const int r = rank_in(g, w);
  // A deviation can leave world rank w out of the call's group (a group with a repeated rank):
  // it gets no buffers, and the runtime refuses the group before any buffer is touched.
  if (r < 0) return rb;
  const auto ur = static_cast<std::size_t>(r);
  const std::size_t e = size_of(s.dtype);
  const Call& original = prog.calls[static_cast<std::size_t>(act.call)];
  const int in_rank = rank_in(prog.groups[static_cast<std::size_t>(original.group)], w);
  std::span<const std::byte> input;
  if (in_rank >= 0)
    input = prog.inputs[static_cast<std::size_t>(act.call)][static_cast<std::size_t>(in_rank)];
  const std::size_t extra_send = act.fault == Fault::longer_send ? 1 : 0;
  const std::size_t extra_recv = act.fault == Fault::longer_recv ? 1 : 0;

  auto send_buffer = [&](std::size_t n) {
    rb.a.resize(n * e);
    fill(rb.a, 0, n * e, input);
    rb.a_is_send = true;
  };
  auto recv_buffer = [&](std::size_t n, bool out) {
    rb.b.assign(n * e, sentinel);
    rb.has_out = out;
    rb.out_count = n;
  };
  auto in_place = [&](std::size_t n, std::size_t out_offset, std::size_t out_count) {
    rb.has_out = true;
    rb.out_in_a = true;
    rb.out_offset = out_offset;
    rb.out_count = out_count;
    (void)n;
  };

  switch (s.kind) {
    case Kind::barrier: break;
    case Kind::broadcast:
      rb.a.resize(s.count * e);
      fill(rb.a, 0, s.count * e, input);
      in_place(s.count, 0, s.count);
      break;
    case Kind::reduce:
      send_buffer(s.count);
      if (r == s.root && s.in_place) {
        rb.a_is_send = false;
        in_place(s.count, 0, s.count);
      } else if (r == s.root) {
        recv_buffer(s.count + extra_recv, true);
      }
      break;
    case Kind::all_reduce:
      send_buffer(s.count);
      if (s.in_place) {
        rb.a_is_send = false;
        in_place(s.count, 0, s.count);
      } else {
        recv_buffer(s.count + extra_recv, true);
      }
      break;
    case Kind::all_gather: {
      const auto off = offsets(s.counts);
      if (s.in_place) {
        rb.a.assign(total(s.counts) * e, sentinel);
        fill(rb.a, off[ur] * e, s.counts[ur] * e, input);
        in_place(total(s.counts), 0, total(s.counts));
      } else {
        send_buffer(s.counts[ur] + extra_send);
        recv_buffer(total(s.counts), true);
      }
      break;
    }
    case Kind::reduce_scatter: {
      const auto off = offsets(s.counts);
      send_buffer(total(s.counts));
      if (s.in_place) {
        rb.a_is_send = false;
        in_place(total(s.counts), off[ur], s.counts[ur]);
      } else {
        recv_buffer(s.counts[ur] + extra_recv, true);
      }
      break;
    }
    case Kind::all_to_all: {
      std::size_t col = 0;
      for (const auto& row : s.matrix) col += row[ur];
      send_buffer(total(s.matrix[ur]) + extra_send);
      recv_buffer(col, true);
      break;
    }
    case Kind::gather:
      send_buffer(s.counts[ur] + extra_send);
      if (r == s.root) recv_buffer(total(s.counts), true);
      break;
    case Kind::scatter:
      send_buffer(r == s.root ? total(s.counts) : 0);
      recv_buffer(s.counts[ur] + extra_recv, true);
      break;
    case Kind::ring_shift:
      send_buffer(s.counts[ur]);
      recv_buffer(s.counts[static_cast<std::size_t>(mod(r - s.shift, p))], true);
      break;
    case Kind::send_recv:
      if (r == s.src) send_buffer(s.count);
      if (r == s.dst) recv_buffer(s.count, true);
      break;
  }
  if (rb.a_is_send) rb.a_before = rb.a;
  return rb;
}

// The action on c: in place where the call is (its result in A), else issue() on A and B.
template <Element T>
void call(Communicator& c, const Action& act, RankBuffers& rb) {
  const Call& s = act.spec;
  const int r = c.rank();
  const auto ur = static_cast<std::size_t>(r);
  const std::span<T> A = typed<T>(rb.a), B = typed<T>(rb.b);
  if (s.in_place) {
    switch (s.kind) {
      case Kind::reduce:
        if (r != s.root) break;  // off the root the call has no receive buffer
        c.reduce<T>(A, A, s.op, s.root);
        return;
      case Kind::all_reduce: c.all_reduce(A, s.op, s.algo); return;
      case Kind::all_gather:
        c.all_gather<T>(A.subspan(offsets(s.counts)[ur], s.counts[ur]), A, s.counts);
        return;
      case Kind::reduce_scatter:
        c.reduce_scatter<T>(A, A.subspan(offsets(s.counts)[ur], s.counts[ur]), s.counts, s.op,
                            s.algo);
        return;
      default: break;  // the other kinds have no in-place form
    }
  }
  issue<T>(c, s, A, B, act.fault == Fault::bad_peer ? c.size() : s.dst);
}

}  // namespace

std::span<const std::byte> RankBuffers::output(DType t) const {
  const auto& v = out_in_a ? a : b;
  const std::size_t e = size_of(t);
  return std::span<const std::byte>(v).subspan(out_offset * e, out_count * e);
}

std::vector<RankBuffers> prepare_rank(const Program& prog, int w) {
  std::vector<RankBuffers> bufs;
  for (const Action& a : prog.actions[static_cast<std::size_t>(w)]) {
    bufs.push_back(prepare(prog, w, a));
  }
  return bufs;
}

void run_rank(const Program& prog, Communicator& world, std::vector<RankBuffers>& bufs) {
  const int w = world.world_rank();
  std::vector<std::unique_ptr<Communicator>> owned;
  const std::vector<Communicator*> comms = open_groups(prog, world, owned);
  const auto& acts = prog.actions[static_cast<std::size_t>(w)];
  for (std::size_t j = 0; j < acts.size(); ++j) {
    const Action& act = acts[j];
    if (act.stop) return;
    if (act.raise) throw InjectedFault("injected by the fuzz program: " + prog.deviation_text);
    Communicator& c = *comms[static_cast<std::size_t>(act.spec.group)];
    RankBuffers& rb = bufs[j];
    rb.seen_rank = c.rank();
    rb.seen_size = c.size();
    rb.seen_members = c.members();
    visit_dtype(act.spec.dtype, [&](auto t) { call<decltype(t)>(c, act, rb); });
    rb.executed = true;
  }
}

Execution execute(const Program& prog, std::chrono::milliseconds timeout) {
  Execution ex;
  ex.bufs.resize(static_cast<std::size_t>(prog.world));
  for (int w = 0; w < prog.world; ++w) ex.bufs[static_cast<std::size_t>(w)] = prepare_rank(prog, w);
  auto rank_main = [&](Communicator& world) {
    run_rank(prog, world, ex.bufs[static_cast<std::size_t>(world.world_rank())]);
  };
  RunOptions options;
  options.timeout = timeout;
  const auto start = std::chrono::steady_clock::now();
  try {
    ex.result = run(prog.world, rank_main, options);
  } catch (...) {
    ex.failure = std::current_exception();
  }
  ex.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return ex;
}

}  // namespace shardcheck::fuzz
