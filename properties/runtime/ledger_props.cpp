// The ledger against the byte formulas documented in runtime/wire_bytes.hpp, exactly.
//
// The property runs one call of every collective (and a few messages) on a generated group
// with generated counts, and compares each rank's entries field by field with what the
// formulas, transcribed independently in collective_model.hpp, say. The unit tests pin the
// nccl-tests bus-bandwidth factors (all_reduce 2(p-1)/p*S; all_gather, reduce_scatter,
// all_to_all (p-1)/p*S; broadcast S) as concrete numbers for evenly divisible sizes, so a
// wrong formula in both the model and the library would still be caught.
#include "runtime_gen.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace shardcheck::props {
namespace {

// The fields of one expected entry (group is the topology's, dtype the case's).
struct Expected {
  Collective op;
  std::uint64_t count;
  model::Traffic bytes;
  Algorithm algorithm;
  std::optional<ReduceOp> reduce_op;  // only for the reductions
  int peer;
  std::uint64_t step;
};

std::string describe(const Expected& e) {
  return std::string(name(e.op)) + " " + std::string(name(e.algorithm)) + " x" +
         std::to_string(e.count) + " step " + std::to_string(e.step) + " peer " +
         std::to_string(e.peer) + " sent " + std::to_string(e.bytes.sent) + " recv " +
         std::to_string(e.bytes.recv);
}

// What one case calls (all but the messages need every member).
struct LedgerCase {
  DType dtype{};
  std::size_t n = 0;                // broadcast, reduce, all_reduce
  std::vector<std::size_t> counts;  // all_gather, reduce_scatter, gather, scatter, ring_shift sizes
  std::vector<std::vector<std::size_t>> a2a;  // a2a[s][d]
  int root = 0;
  ReduceOp op{};
  int shift = 0;
  int a = -1, b = -1;  // messages a->b (twice) and b->a, when p >= 2
  std::size_t m1 = 0, m2 = 0, m3 = 0;
};

template <class T>
void run_every_collective(Communicator& g, const LedgerCase& c) {
  const int p = g.size();
  const auto r = static_cast<std::size_t>(g.rank());
  const auto total = model::total(c.counts);
  const auto off = model::offsets_of(c.counts);
  std::vector<T> buf(c.n), out(c.n), big(total), piece(c.counts[r]);
  g.barrier();
  g.broadcast(std::span<T>(buf), c.root);
  g.reduce(std::span<const T>(buf), std::span<T>(out), c.op, c.root);
  g.all_reduce(std::span<const T>(buf), std::span<T>(out), c.op, Algorithm::ring);
  g.all_reduce(std::span<T>(buf), c.op, Algorithm::sequential);
  g.all_gather(std::span<const T>(piece), std::span<T>(big), c.counts);
  g.reduce_scatter(std::span<const T>(big), std::span<T>(piece), c.counts, c.op, Algorithm::ring);
  g.reduce_scatter(std::span<const T>(big), std::span<T>(big.data() + off[r], c.counts[r]),
                   c.counts, c.op, Algorithm::sequential);
  std::vector<std::size_t> rcounts;
  rcounts.reserve(static_cast<std::size_t>(p));
  for (int s = 0; s < p; ++s) rcounts.push_back(c.a2a[static_cast<std::size_t>(s)][r]);
  std::vector<T> a2a_send(model::total(c.a2a[r])), a2a_recv(model::total(rcounts));
  g.all_to_all(std::span<const T>(a2a_send), c.a2a[r], std::span<T>(a2a_recv), rcounts);
  g.gather(std::span<const T>(piece), std::span<T>(big), c.counts, c.root);
  g.scatter(std::span<const T>(big), std::span<T>(piece), c.counts, c.root);
  std::vector<T> shifted(c.counts[model::mod(g.rank() - c.shift, p)]);
  g.ring_shift(std::span<const T>(piece), std::span<T>(shifted), c.shift);
  if (c.a >= 0) {
    std::vector<T> v1(c.m1), v2(c.m2), v3(c.m3);
    if (g.rank() == c.a) {
      g.send(std::span<const T>(v1), c.b);
      g.send(std::span<const T>(v2), c.b, 7);
      g.recv(std::span<T>(v3), c.b);
    }
    if (g.rank() == c.b) {
      g.recv(std::span<T>(v1), c.a);
      g.recv(std::span<T>(v2), c.a, 7);
      g.send(std::span<const T>(v3), c.a);
    }
  }
  g.barrier();  // messages do not take a collective step: this is step 12
}

// The entries rank r must have after run_every_collective, from the formulas alone.
std::vector<Expected> expected_entries(const LedgerCase& c, int p, int r) {
  using model::Order;
  const std::size_t e = size_of(c.dtype);
  const auto ur = static_cast<std::size_t>(r);
  const std::uint64_t S = c.n * e;
  const auto total = model::total(c.counts);
  std::vector<std::size_t> rcounts;
  rcounts.reserve(static_cast<std::size_t>(p));
  for (int s = 0; s < p; ++s) rcounts.push_back(c.a2a[static_cast<std::size_t>(s)][ur]);
  const std::size_t src = model::mod(r - c.shift, p);
  std::vector<Expected> x = {
      {Collective::barrier, 0, {0, 0}, Algorithm::none, {}, -1, 0},
      {Collective::broadcast,
       c.n,
       model::broadcast_traffic(p, r, c.root, S),
       Algorithm::chain,
       {},
       -1,
       1},
      {Collective::reduce, c.n, model::reduce_traffic(p, r, c.root, S), Algorithm::chain, c.op, -1,
       2},
      {Collective::all_reduce, c.n, model::all_reduce_traffic(Order::ring, p, r, c.n, e),
       Algorithm::ring, c.op, -1, 3},
      {Collective::all_reduce, c.n, model::all_reduce_traffic(Order::sequential, p, r, c.n, e),
       Algorithm::sequential, c.op, -1, 4},
      {Collective::all_gather,
       total,
       model::all_gather_traffic(c.counts, r, e),
       Algorithm::ring,
       {},
       -1,
       5},
      {Collective::reduce_scatter, total,
       model::reduce_scatter_traffic(Order::ring, c.counts, r, e), Algorithm::ring, c.op, -1, 6},
      {Collective::reduce_scatter, total,
       model::reduce_scatter_traffic(Order::sequential, c.counts, r, e), Algorithm::sequential,
       c.op, -1, 7},
      {Collective::all_to_all,
       model::total(c.a2a[ur]),
       model::all_to_all_traffic(c.a2a[ur], rcounts, r, e),
       Algorithm::direct,
       {},
       -1,
       8},
      {Collective::gather,
       total,
       model::gather_traffic(c.counts, r, c.root, e),
       Algorithm::direct,
       {},
       -1,
       9},
      {Collective::scatter,
       total,
       model::scatter_traffic(c.counts, r, c.root, e),
       Algorithm::direct,
       {},
       -1,
       10},
      {Collective::ring_shift,
       c.counts[ur],
       model::ring_shift_traffic(p, c.shift, c.counts[ur], c.counts[src], e),
       Algorithm::direct,
       {},
       -1,
       11},
  };
  // Messages: the step of a send/recv entry is the message's number on its (src, dst) link.
  if (r == c.a) {
    x.push_back({Collective::send, c.m1, {c.m1 * e, 0}, Algorithm::direct, {}, c.b, 0});
    x.push_back({Collective::send, c.m2, {c.m2 * e, 0}, Algorithm::direct, {}, c.b, 1});
    x.push_back({Collective::recv, c.m3, {0, c.m3 * e}, Algorithm::direct, {}, c.b, 0});
  }
  if (r == c.b) {
    x.push_back({Collective::recv, c.m1, {0, c.m1 * e}, Algorithm::direct, {}, c.a, 0});
    x.push_back({Collective::recv, c.m2, {0, c.m2 * e}, Algorithm::direct, {}, c.a, 1});
    x.push_back({Collective::send, c.m3, {c.m3 * e, 0}, Algorithm::direct, {}, c.a, 0});
  }
  x.push_back({Collective::barrier, 0, {0, 0}, Algorithm::none, {}, -1, 12});
  return x;
}

// Empty when `got` matches; otherwise the first differing field.
std::string entry_difference(const Expected& want, const LedgerEntry& got, DType dtype,
                             const std::vector<int>& members) {
  auto field = [&](const char* what, auto w, auto g) {
    return std::string(what) + " is " + std::to_string(g) + ", expected " + std::to_string(w);
  };
  if (got.op != want.op) return "op is " + std::string(name(got.op));
  if (!got.group || *got.group != members)
    return "group is " + (got.group ? format_group(*got.group) : "null");
  if (want.op != Collective::barrier && got.dtype != dtype)
    return "dtype is " + std::string(name(got.dtype));
  if (got.count != want.count) return field("count", want.count, got.count);
  if (got.bytes_sent != want.bytes.sent)
    return field("bytes_sent", want.bytes.sent, got.bytes_sent);
  if (got.bytes_recv != want.bytes.recv)
    return field("bytes_recv", want.bytes.recv, got.bytes_recv);
  if (got.algorithm != want.algorithm) return "algorithm is " + std::string(name(got.algorithm));
  if (want.reduce_op && got.reduce_op != *want.reduce_op)
    return "reduce_op is " + std::string(name(got.reduce_op));
  if (got.peer != want.peer) return field("peer", want.peer, got.peer);
  if (got.step != want.step) return field("step", want.step, got.step);
  return {};
}

RC_GTEST_PROP(ledger, every_entry_equals_the_documented_formulas, ()) {
  const auto topo = *genTopology();
  const int p = topo.size();
  LedgerCase c;
  c.dtype = *genDType();
  c.n = *genLength(p);
  c.counts = *genCounts(p);
  for (int s = 0; s < p; ++s) c.a2a.push_back(*genCounts(p, 8));
  c.root = *uniform(0, p - 1);
  c.op = *genReduceOp(c.dtype);
  c.shift = *uniform(-2 * p, 2 * p);
  if (p >= 2) {
    c.a = *uniform(0, p - 1);
    c.b = (c.a + *uniform(1, p - 1)) % p;
    c.m1 = *genCount();
    c.m2 = *genCount();
    c.m3 = *genCount();
  }
  RC_TAG(name(c.dtype), p_bucket(p));
  const auto run = run_on_group(topo, [&](Communicator& g) {
    visit_dtype(c.dtype, [&](auto tag) { run_every_collective<decltype(tag)>(g, c); });
  });
  assert_group_seen(topo, run.seen);
  const auto members = topo.members();
  for (int w = 0; w < topo.world; ++w) {
    const auto& entries = run.result.ledgers[static_cast<std::size_t>(w)].entries();
    const auto it = std::find(members.begin(), members.end(), w);
    if (it == members.end()) {
      RC_ASSERT(entries.empty());  // creating a group is not a call
      continue;
    }
    const int r = static_cast<int>(it - members.begin());
    const auto want = expected_entries(c, p, r);
    if (entries.size() != want.size()) {
      RC_FAIL("world rank " + std::to_string(w) + " has " + std::to_string(entries.size()) +
              " ledger entries, expected " + std::to_string(want.size()) + ":\n" +
              run.result.ledgers[static_cast<std::size_t>(w)].to_string());
    }
    for (std::size_t i = 0; i < want.size(); ++i) {
      const auto diff = entry_difference(want[i], entries[i], c.dtype, members);
      if (!diff.empty()) {
        RC_FAIL("world rank " + std::to_string(w) + " (group rank " + std::to_string(r) +
                "), entry " + std::to_string(i) + " (" + entries[i].to_string() + "): " + diff +
                "; expected " + describe(want[i]));
      }
    }
  }
}

// ---------------------------------------------------------------- nccl-tests factors

// sent and recv of each world rank's single ledger entry.
std::vector<std::pair<std::uint64_t, std::uint64_t>> traffic(const RunResult& r) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> t;
  for (const auto& l : r.ledgers) {
    EXPECT_EQ(l.size(), 1u);
    t.emplace_back(l.bytes_sent(), l.bytes_recv());
  }
  return t;
}

using Pairs = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

// P = 4, float32, S = 1024 elements = 4096 bytes.
TEST(ledger, all_reduce_moves_2_p_minus_1_over_p_times_S_per_rank) {
  for (const Algorithm algo : {Algorithm::ring, Algorithm::sequential}) {
    const auto r = run(4, [&](Communicator& c) {
      std::vector<float> x(1024);
      c.all_reduce(std::span<float>(x), ReduceOp::sum, algo);
    });
    EXPECT_EQ(traffic(r), Pairs(4, {6144, 6144})) << name(algo);  // 2*3/4*4096
  }
  // P = 8, float64, S = 8000 * 8 = 64000 bytes: 2*7/8*64000 = 112000.
  const auto r8 = run(8, [](Communicator& c) {
    std::vector<double> x(8000);
    c.all_reduce(std::span<double>(x), ReduceOp::max);
  });
  EXPECT_EQ(traffic(r8), Pairs(8, {112000, 112000}));
  // P = 2, bfloat16, S = 2048 * 2 = 4096 bytes: 2*1/2*4096 = 4096.
  const auto r2 = run(2, [](Communicator& c) {
    std::vector<bfloat16> x(2048);
    c.all_reduce(std::span<bfloat16>(x), ReduceOp::avg, Algorithm::sequential);
  });
  EXPECT_EQ(traffic(r2), Pairs(2, {4096, 4096}));
}

TEST(ledger, all_gather_and_reduce_scatter_move_p_minus_1_over_p_times_S_per_rank) {
  const auto ag = run(4, [](Communicator& c) {
    std::vector<float> piece(256), whole(1024);
    c.all_gather(std::span<const float>(piece), std::span<float>(whole));
  });
  EXPECT_EQ(traffic(ag), Pairs(4, {3072, 3072}));  // 3/4*4096
  for (const Algorithm algo : {Algorithm::ring, Algorithm::sequential}) {
    const auto rs = run(4, [&](Communicator& c) {
      std::vector<float> whole(1024), piece(256);
      c.reduce_scatter(std::span<const float>(whole), std::span<float>(piece), ReduceOp::sum, algo);
    });
    EXPECT_EQ(traffic(rs), Pairs(4, {3072, 3072})) << name(algo);
  }
  // P = 8, int64, 100 per rank: S = 6400 bytes, 7/8*6400 = 5600.
  const auto ag8 = run(8, [](Communicator& c) {
    std::vector<std::int64_t> piece(100), whole(800);
    c.all_gather(std::span<const std::int64_t>(piece), std::span<std::int64_t>(whole));
  });
  EXPECT_EQ(traffic(ag8), Pairs(8, {5600, 5600}));
}

TEST(ledger, all_to_all_moves_p_minus_1_over_p_times_S_per_rank) {
  // P = 4, float16, 256 elements to each destination: S = 1024 * 2 = 2048 bytes per rank.
  const auto r = run(4, [](Communicator& c) {
    const std::vector<std::size_t> counts(4, 256);
    std::vector<float16> send(1024), recv(1024);
    c.all_to_all(std::span<const float16>(send), counts, std::span<float16>(recv), counts);
  });
  EXPECT_EQ(traffic(r), Pairs(4, {1536, 1536}));  // 3/4*2048
}

TEST(ledger, broadcast_moves_S_along_a_chain_from_the_root) {
  // P = 4, root 1, float32 x 1024: the chain 1 -> 2 -> 3 -> 0; every rank but the chain's
  // last (0) sends S = 4096, every rank but the root receives S.
  const auto r = run(4, [](Communicator& c) {
    std::vector<float> x(1024);
    c.broadcast(std::span<float>(x), 1);
  });
  EXPECT_EQ(traffic(r), (Pairs{{0, 4096}, {4096, 0}, {4096, 4096}, {4096, 4096}}));
}

}  // namespace
}  // namespace shardcheck::props
