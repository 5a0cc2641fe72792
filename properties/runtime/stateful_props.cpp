// A stateful test (rc::state) of the runtime: generated programs of mixed collectives on
// nested and overlapping groups, run as ONE shardcheck::run, compared with a model.
//
// The model state is the world's per-rank buffers plus a fixed set of groups (the world,
// sub-groups, groups of groups; several may share ranks or even the same member list). Each
// command names a group and its arguments, is generated on the main thread from the current
// model state, and says how the members' buffers change (apply) using the sequential model of
// collective_model.hpp. Commands consume a prefix of a buffer and may grow or shrink it, so
// counts stay uneven and often zero.
//
// The whole program then runs in one run(): every rank creates its groups once, walks the
// command list in order doing the commands whose group it belongs to (ranks of disjoint
// groups proceed concurrently; one global order keeps it deadlock-free), and snapshots its
// buffer after each command. Groups persist across commands, so their step counters, slots
// and channels are exercised over long sequences. Each snapshot must equal the model's bits;
// each rank's ledger must list exactly the calls it made.
//
// Values hold only the NaN the hardware itself produces, so every result is bitwise
// determined (see genFloatOfKind's canonical_nan).
#include "runtime_gen.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

namespace shardcheck::props {
namespace {

constexpr std::size_t kMaxLen = 48;  // buffers stay small so programs can be long

struct GroupDef {
  int parent = -1;           // index of the group it was made from; -1 for the world
  std::vector<int> ranks;    // the parent's ranks, in the new group's order
  std::vector<int> members;  // world ranks, in group order
};

template <class T>
struct Model {
  int world = 1;
  std::vector<GroupDef> groups;  // groups[0] is the world
  model::Bufs<T> buf;            // by world rank

  const std::vector<int>& members(int g) const {
    return groups[static_cast<std::size_t>(g)].members;
  }
  int size(int g) const { return static_cast<int>(members(g).size()); }
  std::vector<T>& of(int g, int r) {
    return buf[static_cast<std::size_t>(members(g)[static_cast<std::size_t>(r)])];
  }
  const std::vector<T>& of(int g, int r) const {
    return buf[static_cast<std::size_t>(members(g)[static_cast<std::size_t>(r)])];
  }
  std::size_t len(int g, int r) const { return of(g, r).size(); }
  std::size_t min_len(int g) const {
    std::size_t m = kMaxLen;
    for (int r = 0; r < size(g); ++r) m = std::min(m, len(g, r));
    return m;
  }
};

template <class T>
struct Cmd;

// The "system under test" while commands are checked: the program being recorded, with the
// model's buffers after each command.
template <class T>
struct Program {
  std::vector<const Cmd<T>*> cmds;
  std::vector<model::Bufs<T>> expected;
};

template <class T>
struct Cmd : rc::state::Command<Model<T>, Program<T>> {
  int g = 0;
  explicit Cmd(int group) : g(group) {}
  // What each member of group g does; `buf` is that rank's buffer.
  virtual void on_rank(Communicator& c, std::vector<T>& buf) const = 0;
  // The collectives each member records in its ledger, for member r.
  virtual std::vector<Collective> calls(int r) const = 0;

  void run(const Model<T>& s0, Program<T>& prog) const override {
    prog.cmds.push_back(this);
    prog.expected.push_back(this->nextState(s0).buf);
  }
};

template <class T>
std::vector<T> prefix(const std::vector<T>& v, std::size_t n) {
  return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n)};
}
template <class T>
std::vector<T> drop(const std::vector<T>& v, std::size_t n) {
  return {v.begin() + static_cast<std::ptrdiff_t>(n), v.end()};
}
template <class T>
std::vector<T> cat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

template <class T>
model::Bufs<T> prefixes(const Model<T>& s, int g, std::size_t m) {
  model::Bufs<T> b;
  for (int r = 0; r < s.size(g); ++r) b.push_back(prefix(s.of(g, r), m));
  return b;
}

int pick_group(const auto& s) { return *uniform(0, static_cast<int>(s.groups.size()) - 1); }

// ---- commands ----

template <class T>
struct AllReduce : Cmd<T> {
  ReduceOp op;
  Algorithm algo;
  std::size_t m;
  explicit AllReduce(const Model<T>& s)
      : Cmd<T>(pick_group(s)),
        op(*genReduceOp(dtype_of<T>)),
        algo(*genAlgorithm()),
        m(*uniform<std::size_t>(0, s.min_len(this->g))) {}
  void checkPreconditions(const Model<T>& s) const override { RC_PRE(m <= s.min_len(this->g)); }
  void apply(Model<T>& s) const override {
    const auto out = model::all_reduce(prefixes(s, this->g, m), to_model(op), to_model(algo));
    for (int r = 0; r < s.size(this->g); ++r)
      std::copy(out[0].begin(), out[0].end(), s.of(this->g, r).begin());
  }
  void on_rank(Communicator& c, std::vector<T>& buf) const override {
    c.all_reduce(std::span<T>(buf.data(), m), op, algo);
  }
  std::vector<Collective> calls(int) const override { return {Collective::all_reduce}; }
  void show(std::ostream& os) const override {
    os << "all_reduce g" << this->g << " " << name(op) << " " << name(algo) << " x" << m;
  }
};

template <class T>
struct Broadcast : Cmd<T> {
  int root;
  std::size_t m;
  explicit Broadcast(const Model<T>& s)
      : Cmd<T>(pick_group(s)),
        root(*uniform(0, s.size(this->g) - 1)),
        m(*uniform<std::size_t>(0, s.min_len(this->g))) {}
  void checkPreconditions(const Model<T>& s) const override { RC_PRE(m <= s.min_len(this->g)); }
  void apply(Model<T>& s) const override {
    const auto src = prefix(s.of(this->g, root), m);
    for (int r = 0; r < s.size(this->g); ++r)
      std::copy(src.begin(), src.end(), s.of(this->g, r).begin());
  }
  void on_rank(Communicator& c, std::vector<T>& buf) const override {
    c.broadcast(std::span<T>(buf.data(), m), root);
  }
  std::vector<Collective> calls(int) const override { return {Collective::broadcast}; }
  void show(std::ostream& os) const override {
    os << "broadcast g" << this->g << " root " << root << " x" << m;
  }
};

template <class T>
struct Reduce : Cmd<T> {
  int root;
  ReduceOp op;
  std::size_t m;
  explicit Reduce(const Model<T>& s)
      : Cmd<T>(pick_group(s)),
        root(*uniform(0, s.size(this->g) - 1)),
        op(*genReduceOp(dtype_of<T>)),
        m(*uniform<std::size_t>(0, s.min_len(this->g))) {}
  void checkPreconditions(const Model<T>& s) const override { RC_PRE(m <= s.min_len(this->g)); }
  void apply(Model<T>& s) const override {
    const auto out = model::reduce(prefixes(s, this->g, m), to_model(op), root);
    std::copy(out.begin(), out.end(), s.of(this->g, root).begin());
  }
  void on_rank(Communicator& c, std::vector<T>& buf) const override {
    std::vector<T> none;  // recv is unused off the root
    c.reduce(std::span<const T>(buf.data(), m),
             c.rank() == root ? std::span<T>(buf.data(), m) : std::span<T>(none), op, root);
  }
  std::vector<Collective> calls(int) const override { return {Collective::reduce}; }
  void show(std::ostream& os) const override {
    os << "reduce g" << this->g << " root " << root << " " << name(op) << " x" << m;
  }
};

// Per-member counts no larger than each member's buffer (and `cap`).
template <class T>
std::vector<std::size_t> gen_counts_within(const Model<T>& s, int g, std::size_t cap) {
  std::vector<std::size_t> c;
  c.reserve(static_cast<std::size_t>(s.size(g)));
  for (int r = 0; r < s.size(g); ++r)
    c.push_back(*uniform<std::size_t>(0, std::min(cap, s.len(g, r))));
  return c;
}

template <class T>
bool counts_fit(const Model<T>& s, int g, const std::vector<std::size_t>& c) {
  if (static_cast<int>(c.size()) != s.size(g)) return false;
  for (int r = 0; r < s.size(g); ++r)
    if (c[static_cast<std::size_t>(r)] > s.len(g, r)) return false;
  return true;
}

template <class T>
struct AllGather : Cmd<T> {
  std::vector<std::size_t> counts;
  explicit AllGather(const Model<T>& s)
      : Cmd<T>(pick_group(s)),
        counts(gen_counts_within(s, this->g,
                                 kMaxLen / static_cast<std::size_t>(2 * s.size(this->g)))) {}
  void checkPreconditions(const Model<T>& s) const override {
    RC_PRE(counts_fit(s, this->g, counts));
    for (int r = 0; r < s.size(this->g); ++r)
      RC_PRE(model::total(counts) + s.len(this->g, r) - counts[static_cast<std::size_t>(r)] <=
             kMaxLen);
  }
  void apply(Model<T>& s) const override {
    model::Bufs<T> send;
    for (int r = 0; r < s.size(this->g); ++r)
      send.push_back(prefix(s.of(this->g, r), counts[static_cast<std::size_t>(r)]));
    const auto out = model::all_gather(send);
    for (int r = 0; r < s.size(this->g); ++r)
      s.of(this->g, r) = cat(out[0], drop(s.of(this->g, r), counts[static_cast<std::size_t>(r)]));
  }
  void on_rank(Communicator& c, std::vector<T>& buf) const override {
    const auto cr = counts[static_cast<std::size_t>(c.rank())];
    std::vector<T> recv(model::total(counts));
    c.all_gather(std::span<const T>(buf.data(), cr), std::span<T>(recv), counts);
    buf = cat(recv, drop(buf, cr));
  }
  std::vector<Collective> calls(int) const override { return {Collective::all_gather}; }
  void show(std::ostream& os) const override {
    os << "all_gather g" << this->g << " counts " << rc::toString(counts);
  }
};

template <class T>
struct ReduceScatter : Cmd<T> {
  std::vector<std::size_t> counts;
  ReduceOp op;
  Algorithm algo;
  explicit ReduceScatter(const Model<T>& s) : Cmd<T>(pick_group(s)) {
    const std::size_t each = s.min_len(this->g) / static_cast<std::size_t>(s.size(this->g));
    for (int r = 0; r < s.size(this->g); ++r) counts.push_back(*uniform<std::size_t>(0, each));
    op = *genReduceOp(dtype_of<T>);
    algo = *genAlgorithm();
  }
  void checkPreconditions(const Model<T>& s) const override {
    RC_PRE(static_cast<int>(counts.size()) == s.size(this->g) &&
           model::total(counts) <= s.min_len(this->g));
  }
  void apply(Model<T>& s) const override {
    const auto out = model::reduce_scatter(prefixes(s, this->g, model::total(counts)), counts,
                                           to_model(op), to_model(algo));
    for (int r = 0; r < s.size(this->g); ++r)
      s.of(this->g, r) =
          cat(out[static_cast<std::size_t>(r)], drop(s.of(this->g, r), model::total(counts)));
  }
  void on_rank(Communicator& c, std::vector<T>& buf) const override {
    std::vector<T> recv(counts[static_cast<std::size_t>(c.rank())]);
    c.reduce_scatter(std::span<const T>(buf.data(), model::total(counts)), std::span<T>(recv),
                     counts, op, algo);
    buf = cat(recv, drop(buf, model::total(counts)));
  }
  std::vector<Collective> calls(int) const override { return {Collective::reduce_scatter}; }
  void show(std::ostream& os) const override {
    os << "reduce_scatter g" << this->g << " " << name(op) << " " << name(algo) << " counts "
       << rc::toString(counts);
  }
};

template <class T>
struct AllToAll : Cmd<T> {
  std::vector<std::vector<std::size_t>> sc;  // sc[s][d]
  explicit AllToAll(const Model<T>& s) : Cmd<T>(pick_group(s)) {
    const auto p = static_cast<std::size_t>(s.size(this->g));
    for (int r = 0; r < s.size(this->g); ++r) {
      std::vector<std::size_t> row;
      for (std::size_t d = 0; d < p; ++d)
        row.push_back(*uniform<std::size_t>(0, std::min(s.len(this->g, r), kMaxLen / 2) / p));
      sc.push_back(row);
    }
  }
  std::vector<std::size_t> column(std::size_t d) const {
    std::vector<std::size_t> col;
    for (const auto& row : sc) col.push_back(row[d]);
    return col;
  }
  void checkPreconditions(const Model<T>& s) const override {
    RC_PRE(static_cast<int>(sc.size()) == s.size(this->g));
    for (int r = 0; r < s.size(this->g); ++r) {
      const auto ur = static_cast<std::size_t>(r);
      RC_PRE(model::total(sc[ur]) <= s.len(this->g, r));
      RC_PRE(model::total(column(ur)) + s.len(this->g, r) - model::total(sc[ur]) <= kMaxLen);
    }
  }
  void apply(Model<T>& s) const override {
    model::Bufs<T> send;
    for (int r = 0; r < s.size(this->g); ++r)
      send.push_back(prefix(s.of(this->g, r), model::total(sc[static_cast<std::size_t>(r)])));
    const auto out = model::all_to_all(send, sc);
    for (int r = 0; r < s.size(this->g); ++r) {
      const auto ur = static_cast<std::size_t>(r);
      s.of(this->g, r) = cat(out[ur], drop(s.of(this->g, r), model::total(sc[ur])));
    }
  }
  void on_rank(Communicator& c, std::vector<T>& buf) const override {
    const auto r = static_cast<std::size_t>(c.rank());
    const auto col = column(r);
    std::vector<T> recv(model::total(col));
    c.all_to_all(std::span<const T>(buf.data(), model::total(sc[r])), sc[r], std::span<T>(recv),
                 col);
    buf = cat(recv, drop(buf, model::total(sc[r])));
  }
  std::vector<Collective> calls(int) const override { return {Collective::all_to_all}; }
  void show(std::ostream& os) const override {
    os << "all_to_all g" << this->g << " counts " << rc::toString(sc);
  }
};

template <class T>
struct Gather : Cmd<T> {
  int root;
  std::vector<std::size_t> counts;
  explicit Gather(const Model<T>& s)
      : Cmd<T>(pick_group(s)),
        root(*uniform(0, s.size(this->g) - 1)),
        counts(gen_counts_within(s, this->g,
                                 kMaxLen / static_cast<std::size_t>(2 * s.size(this->g)))) {}
  void checkPreconditions(const Model<T>& s) const override {
    RC_PRE(root < s.size(this->g) && counts_fit(s, this->g, counts));
    RC_PRE(model::total(counts) + s.len(this->g, root) <= kMaxLen);
  }
  void apply(Model<T>& s) const override {
    model::Bufs<T> send;
    for (int r = 0; r < s.size(this->g); ++r)
      send.push_back(prefix(s.of(this->g, r), counts[static_cast<std::size_t>(r)]));
    auto& rb = s.of(this->g, root);
    rb = cat(model::gather(send), drop(rb, counts[static_cast<std::size_t>(root)]));
  }
  void on_rank(Communicator& c, std::vector<T>& buf) const override {
    const auto cr = counts[static_cast<std::size_t>(c.rank())];
    std::vector<T> recv(c.rank() == root ? model::total(counts) : 0);
    c.gather(std::span<const T>(buf.data(), cr), std::span<T>(recv), counts, root);
    if (c.rank() == root) buf = cat(recv, drop(buf, cr));
  }
  std::vector<Collective> calls(int) const override { return {Collective::gather}; }
  void show(std::ostream& os) const override {
    os << "gather g" << this->g << " root " << root << " counts " << rc::toString(counts);
  }
};

template <class T>
struct Scatter : Cmd<T> {
  int root;
  std::vector<std::size_t> counts;
  explicit Scatter(const Model<T>& s)
      : Cmd<T>(pick_group(s)), root(*uniform(0, s.size(this->g) - 1)) {
    const std::size_t each = s.len(this->g, root) / static_cast<std::size_t>(s.size(this->g));
    for (int r = 0; r < s.size(this->g); ++r)
      counts.push_back(*uniform<std::size_t>(0, std::min(each, s.len(this->g, r))));
  }
  void checkPreconditions(const Model<T>& s) const override {
    RC_PRE(root < s.size(this->g) && counts_fit(s, this->g, counts));
    RC_PRE(model::total(counts) <= s.len(this->g, root));
  }
  void apply(Model<T>& s) const override {
    const auto pieces = model::scatter(prefix(s.of(this->g, root), model::total(counts)), counts);
    for (int r = 0; r < s.size(this->g); ++r) {
      const auto ur = static_cast<std::size_t>(r);
      s.of(this->g, r) = cat(pieces[ur], drop(s.of(this->g, r), counts[ur]));
    }
  }
  void on_rank(Communicator& c, std::vector<T>& buf) const override {
    const auto cr = counts[static_cast<std::size_t>(c.rank())];
    const std::vector<T> send =
        c.rank() == root ? prefix(buf, model::total(counts)) : std::vector<T>{};
    std::vector<T> recv(cr);
    c.scatter(std::span<const T>(send), std::span<T>(recv), counts, root);
    buf = cat(recv, drop(buf, cr));
  }
  std::vector<Collective> calls(int) const override { return {Collective::scatter}; }
  void show(std::ostream& os) const override {
    os << "scatter g" << this->g << " root " << root << " counts " << rc::toString(counts);
  }
};

template <class T>
struct RingShift : Cmd<T> {
  int shift;
  std::vector<std::size_t> lens;  // the members' buffer lengths it was made for
  explicit RingShift(const Model<T>& s)
      : Cmd<T>(pick_group(s)), shift(*uniform(-s.size(this->g), 2 * s.size(this->g))) {
    for (int r = 0; r < s.size(this->g); ++r) lens.push_back(s.len(this->g, r));
  }
  void checkPreconditions(const Model<T>& s) const override {
    RC_PRE(static_cast<int>(lens.size()) == s.size(this->g));
    for (int r = 0; r < s.size(this->g); ++r)
      RC_PRE(lens[static_cast<std::size_t>(r)] == s.len(this->g, r));
  }
  void apply(Model<T>& s) const override {
    model::Bufs<T> send;
    for (int r = 0; r < s.size(this->g); ++r) send.push_back(s.of(this->g, r));
    const auto out = model::ring_shift(send, shift);
    for (int r = 0; r < s.size(this->g); ++r) s.of(this->g, r) = out[static_cast<std::size_t>(r)];
  }
  void on_rank(Communicator& c, std::vector<T>& buf) const override {
    std::vector<T> recv(lens[model::mod(c.rank() - shift, c.size())]);
    c.ring_shift(std::span<const T>(buf), std::span<T>(recv), shift);
    buf = recv;
  }
  std::vector<Collective> calls(int) const override { return {Collective::ring_shift}; }
  void show(std::ostream& os) const override {
    os << "ring_shift g" << this->g << " shift " << shift;
  }
};

// The size of group g; a command needing two members is discarded (RC_PRE) when it has fewer.
template <class T>
int pair_group_size(const Model<T>& s, int g) {
  const int p = s.size(g);
  RC_PRE(p >= 2);
  return p;
}

template <class T>
struct SendRecv : Cmd<T> {
  int src, dst, tag;
  std::size_t m;
  explicit SendRecv(const Model<T>& s)
      : Cmd<T>(pick_group(s)),
        src(*uniform(0, pair_group_size(s, this->g) - 1)),
        dst((src + *uniform(1, s.size(this->g) - 1)) % s.size(this->g)),
        tag(*uniform(0, 2)),
        m(*uniform<std::size_t>(0, std::min(s.len(this->g, src), s.len(this->g, dst)))) {}
  void checkPreconditions(const Model<T>& s) const override {
    RC_PRE(std::max(src, dst) < s.size(this->g));
    RC_PRE(m <= std::min(s.len(this->g, src), s.len(this->g, dst)));
  }
  void apply(Model<T>& s) const override {
    const auto msg = prefix(s.of(this->g, src), m);
    std::copy(msg.begin(), msg.end(), s.of(this->g, dst).begin());
  }
  void on_rank(Communicator& c, std::vector<T>& buf) const override {
    if (c.rank() == src) c.send(std::span<const T>(buf.data(), m), dst, tag);
    if (c.rank() == dst) c.recv(std::span<T>(buf.data(), m), src, tag);
  }
  std::vector<Collective> calls(int r) const override {
    if (r == src) return {Collective::send};
    if (r == dst) return {Collective::recv};
    return {};
  }
  void show(std::ostream& os) const override {
    os << "send/recv g" << this->g << " " << src << "->" << dst << " tag " << tag << " x" << m;
  }
};

template <class T>
struct Barrier : Cmd<T> {
  explicit Barrier(const Model<T>& s) : Cmd<T>(pick_group(s)) {}
  void checkPreconditions(const Model<T>&) const override {}
  void on_rank(Communicator& c, std::vector<T>&) const override { c.barrier(); }
  std::vector<Collective> calls(int) const override { return {Collective::barrier}; }
  void show(std::ostream& os) const override { os << "barrier g" << this->g; }
};

// New values on one rank (no communication), so long programs keep fresh data.
template <class T>
struct Refill : Cmd<T> {
  int w;
  std::vector<T> values;
  explicit Refill(const Model<T>& s)
      : Cmd<T>(0),
        w(*uniform(0, s.world - 1)),
        values(*genBuffer<T>(*uniform<std::size_t>(0, 12), *genValues(), true)) {}
  void checkPreconditions(const Model<T>& s) const override { RC_PRE(w < s.world); }
  void apply(Model<T>& s) const override { s.buf[static_cast<std::size_t>(w)] = values; }
  void on_rank(Communicator& c, std::vector<T>& buf) const override {
    if (c.rank() == w) buf = values;
  }
  std::vector<Collective> calls(int) const override { return {}; }
  void show(std::ostream& os) const override {
    os << "refill world rank " << w << " x" << values.size();
  }
};

// ---- the initial state ----

template <class T>
rc::Gen<Model<T>> genModel() {
  return rc::gen::exec([] {
    Model<T> s;
    s.world = *rc::gen::weightedOneOf<int>(
        {{1, rc::gen::just(2)}, {4, uniform(3, 6)}, {2, uniform(7, 10)}});
    GroupDef world;
    for (int w = 0; w < s.world; ++w) world.members.push_back(w);
    world.ranks = world.members;
    s.groups.push_back(world);
    const int extra = *uniform(1, 4);
    for (int i = 0; i < extra; ++i) {
      GroupDef d;
      d.parent = *uniform(0, static_cast<int>(s.groups.size()) - 1);
      const auto& parent = s.groups[static_cast<std::size_t>(d.parent)].members;
      const int pn = static_cast<int>(parent.size());
      d.ranks = *genOrderedSubset(pn, *uniform(std::min(2, pn), pn));
      for (int k : d.ranks) d.members.push_back(parent[static_cast<std::size_t>(k)]);
      s.groups.push_back(d);
    }
    const auto mix = *genValues();
    for (int w = 0; w < s.world; ++w)
      s.buf.push_back(*genBuffer<T>(*uniform<std::size_t>(0, 16), mix, true));
    return s;
  });
}

template <class T>
std::ostream& operator<<(std::ostream& os, const Model<T>& s) {
  os << "world " << s.world << ", groups";
  for (std::size_t i = 0; i < s.groups.size(); ++i)
    os << " g" << i << "=" << format_group(s.groups[i].members);
  os << ", lengths";
  for (const auto& b : s.buf) os << " " << b.size();
  return os;
}

// ---- running the program ----

template <class T>
void check_program() {
  const Model<T> s0 = *genModel<T>();
  const auto cmds = *rc::gen::scale(
      0.3,
      rc::state::gen::commands(
          s0,
          rc::state::gen::execOneOfWithArgs<AllReduce<T>, Broadcast<T>, Reduce<T>, AllGather<T>,
                                            ReduceScatter<T>, AllToAll<T>, Gather<T>, Scatter<T>,
                                            RingShift<T>, SendRecv<T>, Barrier<T>, Refill<T>>()));
  Program<T> prog;
  rc::state::runAll(cmds, s0, prog);  // records the commands and the model after each

  const auto W = static_cast<std::size_t>(s0.world);
  std::vector<model::Bufs<T>> trace(prog.cmds.size(), model::Bufs<T>(W));
  const RunResult result = run(s0.world, [&](Communicator& world) {
    const int w = world.rank();
    std::vector<std::unique_ptr<Communicator>> owned(s0.groups.size());
    std::vector<Communicator*> comm(s0.groups.size(), nullptr);
    comm[0] = &world;
    for (std::size_t i = 1; i < s0.groups.size(); ++i) {
      const auto& d = s0.groups[i];
      Communicator* parent = comm[static_cast<std::size_t>(d.parent)];
      if (parent != nullptr &&
          std::find(d.members.begin(), d.members.end(), w) != d.members.end()) {
        owned[i] = parent->group(d.ranks);
        comm[i] = owned[i].get();
      }
    }
    std::vector<T> buf = s0.buf[static_cast<std::size_t>(w)];
    for (std::size_t i = 0; i < prog.cmds.size(); ++i) {
      const auto* cmd = prog.cmds[i];
      if (Communicator* c = comm[static_cast<std::size_t>(cmd->g)]) cmd->on_rank(*c, buf);
      trace[i][static_cast<std::size_t>(w)] = buf;
    }
  });

  RC_TAG(name(dtype_of<T>), p_bucket(s0.world));
  RC_CLASSIFY(prog.cmds.size() >= 10, "10+ commands");
  for (std::size_t i = 0; i < prog.cmds.size(); ++i) {
    for (std::size_t w = 0; w < W; ++w) {
      const auto diff = first_difference(prog.expected[i][w], trace[i][w], Match::bits);
      if (!diff.empty()) {
        std::ostringstream os;
        prog.cmds[i]->show(os);
        RC_FAIL("after command " + std::to_string(i) + " (" + os.str() + "), world rank " +
                std::to_string(w) + ": " + diff);
      }
    }
  }
  // Each rank's ledger lists exactly the calls it made, in order.
  for (std::size_t w = 0; w < W; ++w) {
    std::vector<Collective> want;
    for (const auto* cmd : prog.cmds) {
      const auto& m = s0.groups[static_cast<std::size_t>(cmd->g)].members;
      const auto it = std::find(m.begin(), m.end(), static_cast<int>(w));
      if (it == m.end()) continue;
      for (const auto op : cmd->calls(static_cast<int>(it - m.begin()))) want.push_back(op);
    }
    std::vector<Collective> got;
    for (const auto& e : result.ledgers[w].entries()) got.push_back(e.op);
    RC_ASSERT(got == want);
  }
}

RC_GTEST_PROP(stateful, programs_of_mixed_collectives_on_overlapping_groups_match_the_model, ()) {
  const DType dtype = *genDType();
  visit_dtype(dtype, [](auto tag) { check_program<decltype(tag)>(); });
}

}  // namespace
}  // namespace shardcheck::props
