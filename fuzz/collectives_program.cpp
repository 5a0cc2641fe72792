#include "collectives_program.hpp"

#include "collectives_deviation.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>

namespace shardcheck::fuzz {
namespace {

// Reads decisions from the front of the input; past the end every byte is 0.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> b) : b_(b) {}
  std::uint8_t byte() { return pos_ < b_.size() ? b_[pos_++] : 0; }
  // A choice among n; no byte is spent when there is nothing to choose.
  int pick(int n) { return n <= 1 ? 0 : byte() % n; }
  std::size_t left() const { return b_.size() - pos_; }

 private:
  std::span<const std::uint8_t> b_;
  std::size_t pos_ = 0;
};

std::vector<std::size_t> pick_counts(Reader& in, int p, std::size_t cap) {
  std::vector<std::size_t> c(static_cast<std::size_t>(p));
  for (auto& x : c) x = static_cast<std::size_t>(in.pick(static_cast<int>(cap) + 1));
  return c;
}

ReduceOp pick_op(Reader& in, DType t) {
  const ReduceOp op = all_reduce_ops[in.pick(5)];
  return supports(op, t) ? op : ReduceOp::sum;
}

Call decode_call(Reader& in, const std::vector<Group>& groups) {
  Call c;
  c.group = in.pick(static_cast<int>(groups.size()));
  const int p = static_cast<int>(groups[static_cast<std::size_t>(c.group)].members.size());
  const std::size_t share = max_elements / static_cast<std::size_t>(p);  // keeps sums <= 64
  c.kind = static_cast<Kind>(in.pick(kind_count));
  c.dtype = all_dtypes[in.pick(6)];
  c.values = static_cast<Values>(in.pick(4));
  switch (c.kind) {
    case Kind::barrier: break;
    case Kind::broadcast:
      c.count = static_cast<std::size_t>(in.pick(max_elements + 1));
      c.root = in.pick(p);
      break;
    case Kind::reduce:
      c.count = static_cast<std::size_t>(in.pick(max_elements + 1));
      c.root = in.pick(p);
      c.op = pick_op(in, c.dtype);
      c.in_place = in.pick(2) == 1;
      break;
    case Kind::all_reduce:
      c.count = static_cast<std::size_t>(in.pick(max_elements + 1));
      c.op = pick_op(in, c.dtype);
      c.algo = in.pick(2) == 1 ? Algorithm::sequential : Algorithm::ring;
      c.in_place = in.pick(2) == 1;
      break;
    case Kind::all_gather:
      c.counts = pick_counts(in, p, share);
      c.in_place = in.pick(2) == 1;
      break;
    case Kind::reduce_scatter:
      c.counts = pick_counts(in, p, share);
      c.op = pick_op(in, c.dtype);
      c.algo = in.pick(2) == 1 ? Algorithm::sequential : Algorithm::ring;
      c.in_place = in.pick(2) == 1;
      break;
    case Kind::all_to_all:
      for (int s = 0; s < p; ++s) c.matrix.push_back(pick_counts(in, p, share));
      break;
    case Kind::gather:
    case Kind::scatter:
      c.counts = pick_counts(in, p, share);
      c.root = in.pick(p);
      break;
    case Kind::ring_shift:
      c.shift = in.pick(2 * p + 1) - p;  // negative and multiples of p included
      c.counts = pick_counts(in, p, max_elements);
      break;
    case Kind::send_recv:
      if (p == 1) {  // no peer to talk to
        c.kind = Kind::barrier;
        break;
      }
      c.src = in.pick(p);
      c.dst = mod(c.src + 1 + in.pick(p - 1), p);
      c.tag = in.pick(4);
      c.count = static_cast<std::size_t>(in.pick(max_elements + 1));
      break;
  }
  return c;
}

template <Element T>
T special_value(std::uint8_t b) {
  using L = std::numeric_limits<T>;
  if constexpr (std::is_integral_v<T>) {
    const T table[] = {T(0),
                       T(1),
                       T(-1),
                       T(2),
                       T(-2),
                       L::max(),
                       L::min(),
                       T(L::max() - 1),
                       T(L::min() + 1),
                       T(3),
                       T(T(1) << (sizeof(T) * 4)),
                       T(-7)};
    return table[b % std::size(table)];
  } else {
    const T one = static_cast<T>(1.0f);
    const T u = T(static_cast<float>(L::epsilon()) / 2.0f);  // half an ulp of 1
    const T big = T(std::ldexp(1.0f, L::digits));            // where adding 1 is lost
    const T table[] = {
        // signed zeros (max/min ties keep the left operand), NaNs, infinities
        T(0.0f), -T(0.0f), L::quiet_NaN(), -L::quiet_NaN(), L::signaling_NaN(), L::infinity(),
        -L::infinity(),
        // the edges of the range: subnormals, smallest normal, overflow
        L::denorm_min(), -L::denorm_min(), T(L::min() - L::denorm_min()), L::min(), L::max(),
        L::lowest(),
        // values whose sums round differently in different orders, so a wrong reduction
        // order shows in the bits: 1 + u + u vs u + u + 1, big + 1 - big, 0.1 + 0.2 - 0.3
        one, -one, u, -u, L::epsilon(), T(one + L::epsilon()), big, -big, T(0.1f), T(0.2f),
        T(-0.3f), T(0.5f), T(3.0f), T(-1.5f)};
    return table[b % std::size(table)];
  }
}

template <Element T>
void decode_values(Reader& in, Values mode, std::vector<std::byte>& out, std::size_t n,
                   std::uint64_t salt) {
  out.resize(n * sizeof(T));
  for (std::size_t i = 0; i < n; ++i) {
    T x;
    Values m = mode;
    if (in.left() == 0) {
      // Out of bytes: small integers from the position, so long buffers stay meaningful.
      x = static_cast<T>(static_cast<int>((salt * 7 + i * 3) % 9) - 4);
    } else {
      if (m == Values::mixed) m = static_cast<Values>(in.byte() % 3);
      if (m == Values::raw) {
        std::uint8_t raw[sizeof(T)];
        for (auto& r : raw) r = in.byte();
        std::memcpy(&x, raw, sizeof(T));
      } else if (m == Values::small) {
        x = static_cast<T>(static_cast<int>(in.byte() % 9) - 4);
      } else {
        x = special_value<T>(in.byte());
      }
    }
    std::memcpy(out.data() + i * sizeof(T), &x, sizeof(T));
  }
}

}  // namespace

Collective collective_of(Kind k, bool sender) noexcept {
  switch (k) {
    case Kind::barrier: return Collective::barrier;
    case Kind::broadcast: return Collective::broadcast;
    case Kind::reduce: return Collective::reduce;
    case Kind::all_reduce: return Collective::all_reduce;
    case Kind::all_gather: return Collective::all_gather;
    case Kind::reduce_scatter: return Collective::reduce_scatter;
    case Kind::all_to_all: return Collective::all_to_all;
    case Kind::gather: return Collective::gather;
    case Kind::scatter: return Collective::scatter;
    case Kind::ring_shift: return Collective::ring_shift;
    case Kind::send_recv: break;
  }
  return sender ? Collective::send : Collective::recv;
}

std::string_view name(Kind k) noexcept {
  return k == Kind::send_recv ? "send_recv" : name(collective_of(k));
}

std::string_view name(Deviation d) noexcept {
  constexpr std::string_view names[] = {
      "none", "kind",         "count",  "root",        "dtype",     "reduce_op",   "algorithm",
      "tag",  "early_return", "throws", "usage_local", "usage_all", "wrong_group", "usage_group"};
  return names[static_cast<int>(d)];
}

std::size_t send_count(const Call& c, int r, int p) {
  const auto ur = static_cast<std::size_t>(r);
  switch (c.kind) {
    case Kind::barrier: return 0;
    case Kind::broadcast:
    case Kind::reduce:
    case Kind::all_reduce: return c.count;
    case Kind::all_gather:
    case Kind::gather:
    case Kind::ring_shift: return c.counts[ur];
    case Kind::reduce_scatter:
      return std::accumulate(c.counts.begin(), c.counts.end(), std::size_t{0});
    case Kind::all_to_all:
      return std::accumulate(c.matrix[ur].begin(), c.matrix[ur].end(), std::size_t{0});
    case Kind::scatter:
      return r == c.root ? std::accumulate(c.counts.begin(), c.counts.end(), std::size_t{0}) : 0;
    case Kind::send_recv: return r == c.src ? c.count : 0;
  }
  (void)p;
  return 0;
}

std::size_t recv_count(const Call& c, int r, int p) {
  const auto ur = static_cast<std::size_t>(r);
  switch (c.kind) {
    case Kind::barrier:
    case Kind::broadcast: return 0;
    case Kind::reduce: return r == c.root ? c.count : 0;
    case Kind::all_reduce: return c.count;
    case Kind::all_gather: return std::accumulate(c.counts.begin(), c.counts.end(), std::size_t{0});
    case Kind::gather:
      return r == c.root ? std::accumulate(c.counts.begin(), c.counts.end(), std::size_t{0}) : 0;
    case Kind::reduce_scatter:
    case Kind::scatter: return c.counts[ur];
    case Kind::all_to_all: {
      std::size_t n = 0;
      for (const auto& row : c.matrix) n += row[ur];
      return n;
    }
    case Kind::ring_shift: return c.counts[static_cast<std::size_t>(mod(r - c.shift, p))];
    case Kind::send_recv: return r == c.dst ? c.count : 0;
  }
  return 0;
}

Program decode(std::span<const std::uint8_t> bytes) {
  Reader in(bytes);
  Program prog;
  prog.world = 1 + in.pick(max_world);
  Group world;
  world.members.resize(static_cast<std::size_t>(prog.world));
  std::iota(world.members.begin(), world.members.end(), 0);
  world.ranks_in_parent = world.members;
  prog.groups.push_back(world);
  const int extra = in.pick(max_extra_groups + 1);
  for (int i = 1; i <= extra; ++i) {
    Group g;
    g.parent = in.pick(i);
    const auto& parent = prog.groups[static_cast<std::size_t>(g.parent)].members;
    const int pp = static_cast<int>(parent.size());
    // A quarter of the groups are the whole parent in its own order (MPI_Comm_dup; a mesh
    // dimension spanning the world): random picks would almost never produce one.
    const bool whole = in.pick(4) == 0;
    const int m = whole ? pp : 1 + in.pick(pp);
    std::vector<int> pool(static_cast<std::size_t>(pp));
    std::iota(pool.begin(), pool.end(), 0);
    for (int j = 0; j < m; ++j) {
      if (whole) {
        g.ranks_in_parent.push_back(j);
        g.members.push_back(parent[static_cast<std::size_t>(j)]);
        continue;
      }
      const auto at = pool.begin() + in.pick(static_cast<int>(pool.size()));
      g.ranks_in_parent.push_back(*at);
      g.members.push_back(parent[static_cast<std::size_t>(*at)]);
      pool.erase(at);
    }
    prog.groups.push_back(std::move(g));
  }
  const int ncalls = 1 + in.pick(max_calls);
  for (int i = 0; i < ncalls; ++i) prog.calls.push_back(decode_call(in, prog.groups));

  const int dv = in.pick(2 * (deviation_count - 1));
  prog.deviation = dv < deviation_count - 1 ? Deviation::none
                                            : static_cast<Deviation>(dv - (deviation_count - 2));
  prog.deviant_call = in.pick(ncalls);
  detail::Choice ch;
  ch.who = in.byte();
  ch.aux = in.byte();
  ch.aux2 = in.byte();
  Call deviant_spec;
  Fault fault = Fault::none;
  detail::choose_deviation(prog, ch, deviant_spec, fault);
  detail::build_actions(prog, deviant_spec, fault);

  prog.inputs.resize(prog.calls.size());
  for (std::size_t i = 0; i < prog.calls.size(); ++i) {
    const Call& c = prog.calls[i];
    const int p = static_cast<int>(prog.groups[static_cast<std::size_t>(c.group)].members.size());
    prog.inputs[i].resize(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r) {
      const std::size_t n = c.kind == Kind::broadcast ? c.count : send_count(c, r, p);
      visit_dtype(c.dtype, [&](auto t) {
        decode_values<decltype(t)>(in, c.values, prog.inputs[i][static_cast<std::size_t>(r)], n,
                                   i * 131 + static_cast<std::size_t>(r));
      });
    }
  }
  return prog;
}

}  // namespace shardcheck::fuzz
