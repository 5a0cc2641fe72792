// Properties of the data-moving collectives against the sequential model (collective_model.hpp):
// barrier, broadcast, all_gather, gather, scatter, all_to_all, send/recv and ring_shift, on
// generated worlds of 1..16 ranks, sub-groups and groups of groups, every element type, uneven
// counts with zeros. Moving data never rounds, so every rank's result must equal the model
// bit for bit (NaN payloads, signalling NaNs and -0.0 included), and a buffer the contract
// says is unused or const must come back untouched.
//
// The reductions (reduce, all_reduce, reduce_scatter) are in reductions_props.cpp.
// Replay a failure: see properties/CMakeLists.txt (RC_PARAMS="reproduce=...").
#include "runtime_gen.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace shardcheck::props::collectives {
namespace {

// Every property draws its element type here.
template <class F>
void for_generated_dtype(F&& f) {
  props::for_generated_dtype(std::forward<F>(f), /*tag_dtype=*/true);
}

// The draw of most properties: a topology (its world size tagged), then an element type;
// f(tag, topology) with the type's tag.
template <class F>
void for_generated_topology_and_dtype(F&& f) {
  const auto topo = *genTopology();
  RC_TAG(p_bucket(topo.size()));
  for_generated_dtype([&](auto tag) { f(tag, topo); });
}

// ---------------------------------------------------------------- barrier

// A barrier orders every member's writes before every member's reads (TSan checks the
// happens-before edge as well as the values).
RC_GTEST_PROP(barrier, orders_every_members_writes_before_every_members_reads, ()) {
  const auto topo = *genTopology();
  const int p = topo.size();
  const int rounds = *uniform(1, 4);
  RC_TAG(p_bucket(p));
  std::vector<std::vector<int>> marks(static_cast<std::size_t>(rounds),
                                      std::vector<int>(static_cast<std::size_t>(p), 0));
  std::vector<std::vector<int>> seen_all(static_cast<std::size_t>(p));
  const auto run = run_on_group(topo, [&](Communicator& g) {
    const auto r = rank_of(g);
    for (int j = 0; j < rounds; ++j) {
      auto& row = marks[static_cast<std::size_t>(j)];
      row[r] = j + 1;
      g.barrier();
      seen_all[r].push_back(static_cast<int>(std::count(row.begin(), row.end(), j + 1)));
    }
  });
  assert_group_seen(topo, run.seen);
  for (const auto& s : seen_all)
    RC_ASSERT(s == std::vector<int>(static_cast<std::size_t>(rounds), p));
}

// ---------------------------------------------------------------- broadcast

template <class T>
void broadcast_case(const Topology& topo) {
  const int p = topo.size();
  const int root = *uniform(0, p - 1);
  const std::size_t n = *genLength(p);
  const auto bufs =
      *genBuffers<T>(std::vector<std::size_t>(static_cast<std::size_t>(p), n), *genValues());
  Bufs<T> out(static_cast<std::size_t>(p));
  const auto run = run_on_group(topo, [&](Communicator& g) {
    auto buf = bufs[rank_of(g)];
    g.broadcast(std::span<T>(buf), root);
    out[rank_of(g)] = buf;
  });
  assert_group_seen(topo, run.seen);
  assert_ranks_equal(model::broadcast(bufs, root), out, Match::bits, "broadcast buffer");
}

RC_GTEST_PROP(broadcast, every_rank_ends_with_the_roots_buffer, ()) {
  for_generated_topology_and_dtype(
      [](auto tag, const Topology& topo) { broadcast_case<decltype(tag)>(topo); });
}

// ---------------------------------------------------------------- all_gather

template <class T>
void all_gather_case(const Topology& topo) {
  const int p = topo.size();
  const bool even = *rc::gen::arbitrary<bool>();
  const auto counts =
      even ? std::vector<std::size_t>(static_cast<std::size_t>(p), *genCount()) : *genCounts(p);
  const bool in_place = *rc::gen::arbitrary<bool>();
  const auto send = *genBuffers<T>(counts, *genValues());
  const auto off = model::offsets_of(counts);
  RC_CLASSIFY(std::count(counts.begin(), counts.end(), 0u) > 0, "a rank with zero elements");
  RC_CLASSIFY(in_place, "in place");
  Bufs<T> out(static_cast<std::size_t>(p)), send_after(static_cast<std::size_t>(p));
  const auto run = run_on_group(topo, [&](Communicator& g) {
    const auto r = rank_of(g);
    std::vector<T> recv(off.back(), sentinel<T>());
    if (in_place) {
      std::copy(send[r].begin(), send[r].end(), recv.begin() + static_cast<std::ptrdiff_t>(off[r]));
      g.all_gather(std::span<const T>(recv.data() + off[r], counts[r]), std::span<T>(recv), counts);
    } else {
      const std::vector<T>& mine = send[r];
      std::vector<T> s = mine;
      if (even) g.all_gather(std::span<const T>(s), std::span<T>(recv));
      else g.all_gather(std::span<const T>(s), std::span<T>(recv), counts);
      send_after[r] = s;
    }
    out[r] = recv;
  });
  assert_group_seen(topo, run.seen);
  assert_ranks_equal(model::all_gather(send), out, Match::bits, "all_gather recv");
  if (!in_place) assert_ranks_equal(send, send_after, Match::bits, "all_gather send (const)");
}

RC_GTEST_PROP(all_gather, every_rank_holds_the_concatenation_in_rank_order, ()) {
  for_generated_topology_and_dtype(
      [](auto tag, const Topology& topo) { all_gather_case<decltype(tag)>(topo); });
}

// ---------------------------------------------------------------- gather / scatter

template <class T>
void gather_case(const Topology& topo) {
  const int p = topo.size();
  const int root = *uniform(0, p - 1);
  const auto counts = *genCounts(p);
  const bool empty_off_root = *rc::gen::arbitrary<bool>();
  const auto send = *genBuffers<T>(counts, *genValues());
  const std::size_t total = model::total(counts);
  Bufs<T> out(static_cast<std::size_t>(p));
  const auto run = run_on_group(topo, [&](Communicator& g) {
    const auto r = rank_of(g);
    // recv is unused off the root: empty, or full-size and expected back untouched.
    std::vector<T> recv(g.rank() == root || !empty_off_root ? total : 0, sentinel<T>());
    g.gather(std::span<const T>(send[r]), std::span<T>(recv), counts, root);
    out[r] = recv;
  });
  assert_group_seen(topo, run.seen);
  Bufs<T> expected(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    expected[static_cast<std::size_t>(r)] =
        r == root ? model::gather(send) : std::vector<T>(empty_off_root ? 0 : total, sentinel<T>());
  }
  assert_ranks_equal(expected, out, Match::bits, "gather recv");
}

RC_GTEST_PROP(gather, the_root_holds_the_concatenation_and_no_other_recv_is_written, ()) {
  for_generated_topology_and_dtype(
      [](auto tag, const Topology& topo) { gather_case<decltype(tag)>(topo); });
}

template <class T>
void scatter_case(const Topology& topo) {
  const int p = topo.size();
  const int root = *uniform(0, p - 1);
  const auto counts = *genCounts(p);
  const auto mix = *genValues();
  const auto root_send = *genBuffer<T>(model::total(counts), mix);
  // send is unused off the root: give those ranks an empty or an arbitrary buffer.
  const auto junk = *genBuffer<T>(*genCount(), mix);
  Bufs<T> out(static_cast<std::size_t>(p));
  const auto run = run_on_group(topo, [&](Communicator& g) {
    const auto r = rank_of(g);
    const std::vector<T>& send = g.rank() == root ? root_send : junk;
    std::vector<T> recv(counts[r], sentinel<T>());
    g.scatter(std::span<const T>(send), std::span<T>(recv), counts, root);
    out[r] = recv;
  });
  assert_group_seen(topo, run.seen);
  assert_ranks_equal(model::scatter(root_send, counts), out, Match::bits, "scatter recv");
}

RC_GTEST_PROP(scatter, every_rank_receives_its_piece_of_the_roots_buffer, ()) {
  for_generated_topology_and_dtype(
      [](auto tag, const Topology& topo) { scatter_case<decltype(tag)>(topo); });
}

// ---------------------------------------------------------------- all_to_all

template <class T>
void all_to_all_case(const Topology& topo) {
  const int p = topo.size();
  const auto up = static_cast<std::size_t>(p);
  std::vector<std::vector<std::size_t>> sc(up);  // sc[s][d]: elements from s to d
  for (auto& row : sc) row = *genCounts(p, 8);
  std::vector<std::size_t> send_sizes;
  send_sizes.reserve(up);
  for (const auto& row : sc) send_sizes.push_back(model::total(row));
  const auto send = *genBuffers<T>(send_sizes, *genValues());
  Bufs<T> out(up), send_after(up);
  const auto run = run_on_group(topo, [&](Communicator& g) {
    const auto r = rank_of(g);
    std::vector<std::size_t> rc_counts;
    for (std::size_t s = 0; s < up; ++s) rc_counts.push_back(sc[s][r]);
    std::vector<T> s = send[r];
    std::vector<T> recv(model::total(rc_counts), sentinel<T>());
    g.all_to_all(std::span<const T>(s), sc[r], std::span<T>(recv), rc_counts);
    out[r] = recv;
    send_after[r] = s;
  });
  assert_group_seen(topo, run.seen);
  assert_ranks_equal(model::all_to_all(send, sc), out, Match::bits, "all_to_all recv");
  assert_ranks_equal(send, send_after, Match::bits, "all_to_all send (const)");
}

RC_GTEST_PROP(all_to_all, rank_d_receives_each_sources_piece_for_d_in_source_order, ()) {
  for_generated_topology_and_dtype(
      [](auto tag, const Topology& topo) { all_to_all_case<decltype(tag)>(topo); });
}

// ---------------------------------------------------------------- send / recv

struct Message {
  int src, dst, tag;
  std::size_t n;
  friend std::ostream& operator<<(std::ostream& os, const Message& m) {
    return os << m.src << "->" << m.dst << " tag " << m.tag << " x" << m.n;
  }
};

template <class T>
void send_recv_case(const Topology& topo) {
  const int p = topo.size();
  // A list every rank walks in the same order, doing its own part: deadlock-free by
  // construction even though send waits for the receiver.
  const auto msgs =
      *rc::gen::resize(24, rc::gen::container<std::vector<Message>>(rc::gen::exec([p] {
                         const int src = *uniform(0, p - 1);
                         const int dst = (src + *uniform(1, p - 1)) % p;
                         return Message{src, dst, *uniform(0, 3), *genCount()};
                       })));
  const auto mix = *genValues();
  Bufs<T> payload;
  for (const auto& m : msgs) payload.push_back(*genBuffer<T>(m.n, mix));
  Bufs<T> got(msgs.size());
  const auto run = run_on_group(topo, [&](Communicator& g) {
    for (std::size_t i = 0; i < msgs.size(); ++i) {
      const auto& m = msgs[i];
      if (g.rank() == m.src) g.send(std::span<const T>(payload[i]), m.dst, m.tag);
      if (g.rank() == m.dst) {
        std::vector<T> buf(m.n, sentinel<T>());
        g.recv(std::span<T>(buf), m.src, m.tag);
        got[i] = buf;
      }
    }
  });
  assert_group_seen(topo, run.seen);
  RC_TAG("messages " + std::to_string(std::min<std::size_t>(msgs.size(), 5)) +
         (msgs.size() > 5 ? "+" : ""));
  assert_ranks_equal(payload, got, Match::bits, "received message (indexed by message)");
}

RC_GTEST_PROP(send_recv, every_message_arrives_unchanged, ()) {
  const auto topo = *genTopology();
  RC_PRE(topo.size() >= 2);
  RC_TAG(p_bucket(topo.size()));
  for_generated_dtype([&](auto tag) { send_recv_case<decltype(tag)>(topo); });
}

// ---------------------------------------------------------------- ring_shift

template <class T>
void ring_shift_case(const Topology& topo) {
  const int p = topo.size();
  const int shift = *uniform(-2 * p - 1, 2 * p + 1);
  const auto sizes = *genCounts(p);
  const auto send = *genBuffers<T>(sizes, *genValues());
  RC_CLASSIFY(((shift % p) + p) % p == 0, "shift multiple of P");
  RC_CLASSIFY(shift < 0, "negative shift");
  Bufs<T> out(static_cast<std::size_t>(p)), send_after(static_cast<std::size_t>(p));
  const auto run = run_on_group(topo, [&](Communicator& g) {
    const auto r = rank_of(g);
    const auto src = model::mod(g.rank() - shift, p);
    std::vector<T> s = send[r];
    std::vector<T> recv(sizes[src], sentinel<T>());
    g.ring_shift(std::span<const T>(s), std::span<T>(recv), shift);
    out[r] = recv;
    send_after[r] = s;
  });
  assert_group_seen(topo, run.seen);
  assert_ranks_equal(model::ring_shift(send, shift), out, Match::bits, "ring_shift recv");
  assert_ranks_equal(send, send_after, Match::bits, "ring_shift send (const)");
}

RC_GTEST_PROP(ring_shift, rank_r_receives_the_buffer_of_rank_r_minus_shift, ()) {
  for_generated_topology_and_dtype(
      [](auto tag, const Topology& topo) { ring_shift_case<decltype(tag)>(topo); });
}

}  // namespace
}  // namespace shardcheck::props::collectives
