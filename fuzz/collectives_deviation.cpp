// The deviations of collectives_program.hpp: which rank deviates, what it calls instead, and
// the per-rank action lists with the deviation applied.
#include "collectives_deviation.hpp"

#include <algorithm>
#include <sstream>

namespace shardcheck::fuzz::detail {
namespace {

constexpr Kind collective_kinds[] = {
    Kind::barrier,        Kind::broadcast,  Kind::reduce, Kind::all_reduce, Kind::all_gather,
    Kind::reduce_scatter, Kind::all_to_all, Kind::gather, Kind::scatter,    Kind::ring_shift};

bool has_root(Kind k) {
  return k == Kind::broadcast || k == Kind::reduce || k == Kind::gather || k == Kind::scatter;
}
bool has_op(Kind k) {
  return k == Kind::reduce || k == Kind::all_reduce || k == Kind::reduce_scatter;
}
bool has_algo(Kind k) { return k == Kind::all_reduce || k == Kind::reduce_scatter; }

// A locally valid call of kind k for a group of p (the deviant's call of Deviation::kind).
Call simple_call(Kind k, const Call& like, int p) {
  Call c;
  c.kind = k;
  c.group = like.group;
  c.dtype = like.dtype;
  c.values = like.values;
  c.count = like.count;
  c.counts.assign(static_cast<std::size_t>(p), 1);
  if (k == Kind::all_to_all) c.matrix.assign(static_cast<std::size_t>(p), c.counts);
  if (k == Kind::ring_shift) c.shift = 1;
  return c;
}

bool acts_in(const Call& c, const Group& g, int world_rank) {
  const int r = rank_in(g, world_rank);
  if (r < 0) return false;
  return c.kind != Kind::send_recv || r == c.src || r == c.dst;
}

}  // namespace

void choose_deviation(Program& prog, const Choice& ch, Call& deviant_spec, Fault& fault) {
  Call& call = prog.calls[static_cast<std::size_t>(prog.deviant_call)];
  const Group& g = prog.groups[static_cast<std::size_t>(call.group)];
  const int p = static_cast<int>(g.members.size());
  int dr = ch.who % p;  // the deviant's group rank
  if (call.kind == Kind::send_recv) dr = ch.who % 2 == 0 ? call.src : call.dst;
  deviant_spec = call;
  fault = Fault::none;
  std::ostringstream what;
  const bool p2p = call.kind == Kind::send_recv;
  for (;;) {
    const Deviation d = prog.deviation;
    const bool needs_peer = d != Deviation::early_return && d != Deviation::throws &&
                            d != Deviation::usage_local && d != Deviation::usage_all &&
                            d != Deviation::wrong_group && d != Deviation::usage_group &&
                            d != Deviation::none;
    if (needs_peer && p < 2) {
      prog.deviation = Deviation::none;  // a group of one cannot disagree with itself
      continue;
    }
    switch (d) {
      case Deviation::none:
        prog.deviant = -1;
        prog.deviation_text.clear();
        return;
      case Deviation::kind: {
        if (p2p) {
          prog.deviation = Deviation::count;
          continue;
        }
        std::vector<Kind> others;
        for (Kind k : collective_kinds)
          if (k != call.kind) others.push_back(k);
        deviant_spec =
            simple_call(others[static_cast<std::size_t>(ch.aux) % others.size()], call, p);
        what << "calls " << name(deviant_spec.kind) << " instead";
        break;
      }
      case Deviation::count:
        switch (call.kind) {
          case Kind::barrier: prog.deviation = Deviation::kind; continue;
          case Kind::broadcast:
          case Kind::reduce:
          case Kind::all_reduce:
          case Kind::send_recv:
            deviant_spec.count += 1 + static_cast<std::size_t>(ch.aux % 3);
            what << "passes count " << deviant_spec.count;
            break;
          case Kind::all_to_all: {
            const int x = mod(dr + 1 + ch.aux % (p - 1), p);
            ++deviant_spec.matrix[static_cast<std::size_t>(dr)][static_cast<std::size_t>(x)];
            what << "sends one more element to group rank " << x;
            break;
          }
          case Kind::ring_shift:
            if (mod(call.shift, p) == 0) {
              deviant_spec.shift += 1;
              what << "passes shift " << deviant_spec.shift;
            } else {
              ++deviant_spec.counts[static_cast<std::size_t>(dr)];
              what << "sends one more element";
            }
            break;
          default:
            ++deviant_spec.counts[static_cast<std::size_t>(ch.aux % p)];
            what << "passes counts with entry " << ch.aux % p << " one larger";
        }
        break;
      case Deviation::root:
        if (!has_root(call.kind)) {
          prog.deviation = p2p ? Deviation::count : Deviation::kind;
          continue;
        }
        deviant_spec.root = mod(call.root + 1 + ch.aux % (p - 1), p);
        what << "names root " << deviant_spec.root;
        break;
      case Deviation::dtype: {
        if (call.kind == Kind::barrier) {
          prog.deviation = Deviation::kind;
          continue;
        }
        std::vector<DType> others;
        for (DType t : all_dtypes) {
          if (t != call.dtype && (!has_op(call.kind) || supports(call.op, t))) others.push_back(t);
        }
        deviant_spec.dtype = others[static_cast<std::size_t>(ch.aux) % others.size()];
        what << "uses " << name(deviant_spec.dtype);
        break;
      }
      case Deviation::reduce_op: {
        if (!has_op(call.kind)) {
          prog.deviation = p2p ? Deviation::count : Deviation::kind;
          continue;
        }
        std::vector<ReduceOp> others;
        for (ReduceOp o : all_reduce_ops) {
          if (o != call.op && supports(o, call.dtype)) others.push_back(o);
        }
        deviant_spec.op = others[static_cast<std::size_t>(ch.aux) % others.size()];
        what << "reduces with " << name(deviant_spec.op);
        break;
      }
      case Deviation::algorithm:
        if (!has_algo(call.kind)) {
          prog.deviation = p2p ? Deviation::count : Deviation::kind;
          continue;
        }
        deviant_spec.algo = call.algo == Algorithm::ring ? Algorithm::sequential : Algorithm::ring;
        what << "uses algorithm " << name(deviant_spec.algo);
        break;
      case Deviation::tag:
        if (!p2p) {
          prog.deviation = Deviation::kind;
          continue;
        }
        deviant_spec.tag = call.tag + 1;
        what << "uses tag " << deviant_spec.tag;
        break;
      case Deviation::early_return:
        prog.deviant = ch.who % prog.world;
        prog.deviation_text = "world rank " + std::to_string(prog.deviant) +
                              " returns before call #" + std::to_string(prog.deviant_call);
        return;
      case Deviation::throws:
        prog.deviant = ch.who % prog.world;
        prog.deviation_text = "world rank " + std::to_string(prog.deviant) +
                              " throws before call #" + std::to_string(prog.deviant_call);
        return;
      case Deviation::usage_local:
        switch (call.kind) {
          case Kind::all_reduce:
          case Kind::reduce_scatter:
          case Kind::scatter: fault = Fault::longer_recv; break;
          case Kind::reduce:
            dr = call.root;  // recv is only read on the root
            fault = Fault::longer_recv;
            break;
          case Kind::all_gather:
          case Kind::all_to_all:
          case Kind::gather: fault = Fault::longer_send; break;
          case Kind::send_recv:
            dr = call.src;
            fault = Fault::bad_peer;
            break;
          case Kind::broadcast: prog.deviation = Deviation::usage_all; continue;
          default: prog.deviation = Deviation::throws; continue;
        }
        deviant_spec.in_place = false;
        what << (fault == Fault::bad_peer      ? "sends to a rank outside the group"
                 : fault == Fault::longer_send ? "passes a send buffer one element too long"
                                               : "passes a recv buffer one element too long");
        break;
      case Deviation::usage_all:
        if (has_root(call.kind) && (call.kind != Kind::reduce || ch.aux2 % 2 == 0)) {
          call.root = ch.aux % 2 == 0 ? p : -1;
          prog.deviation_text = "every member names root " + std::to_string(call.root);
        } else if (has_op(call.kind)) {
          call.dtype = ch.aux % 2 == 0 ? DType::int32 : DType::int64;
          call.op = ReduceOp::avg;
          prog.deviation_text = "every member asks for avg on " + std::string(name(call.dtype));
        } else if (call.kind == Kind::all_gather) {
          call.counts.push_back(0);  // one count more than the group has ranks
          prog.deviation_text = "every member passes p + 1 counts";
        } else if (call.kind == Kind::all_to_all) {
          for (auto& row : call.matrix) row.push_back(0);
          call.matrix.emplace_back(call.matrix[0].size(), 0);
          prog.deviation_text = "every member passes p + 1 send and recv counts";
        } else {
          prog.deviation = Deviation::throws;
          continue;
        }
        prog.deviant = -1;
        return;
      case Deviation::usage_group: {
        if (prog.groups.size() < 2) {
          prog.deviation = Deviation::throws;
          continue;
        }
        prog.bad_group = 1 + ch.aux % (static_cast<int>(prog.groups.size()) - 1);
        const Group& bad = prog.groups[static_cast<std::size_t>(prog.bad_group)];
        prog.deviant = bad.members[static_cast<std::size_t>(ch.who) % bad.members.size()];
        prog.deviation_text = "world rank " + std::to_string(prog.deviant) + " creates g" +
                              std::to_string(prog.bad_group) + " with group rank " +
                              std::to_string(bad.ranks_in_parent[0]) + " listed twice";
        return;
      }
      case Deviation::wrong_group: {
        const int w = g.members[static_cast<std::size_t>(dr)];
        std::vector<int> candidates;
        const bool movable = call.kind == Kind::barrier || call.kind == Kind::all_reduce ||
                             call.kind == Kind::broadcast || call.kind == Kind::reduce;
        for (int h = 0; movable && h < static_cast<int>(prog.groups.size()); ++h) {
          const Group& gh = prog.groups[static_cast<std::size_t>(h)];
          if (h == call.group || rank_in(gh, w) < 0) continue;
          if (has_root(call.kind) && call.root >= static_cast<int>(gh.members.size())) continue;
          candidates.push_back(h);
        }
        if (candidates.empty()) {
          prog.deviation = Deviation::early_return;
          continue;
        }
        deviant_spec.group = candidates[static_cast<std::size_t>(ch.aux) % candidates.size()];
        deviant_spec.in_place = false;
        what << "makes it on group g" << deviant_spec.group;
        break;
      }
    }
    prog.deviant = g.members[static_cast<std::size_t>(dr)];
    prog.deviation_text = "world rank " + std::to_string(prog.deviant) + " (group rank " +
                          std::to_string(dr) + ") " + what.str() + " at call #" +
                          std::to_string(prog.deviant_call);
    return;
  }
}

void build_actions(Program& prog, const Call& deviant_spec, Fault fault) {
  prog.actions.assign(static_cast<std::size_t>(prog.world), {});
  for (int w = 0; w < prog.world; ++w) {
    auto& mine = prog.actions[static_cast<std::size_t>(w)];
    for (int i = 0; i < static_cast<int>(prog.calls.size()); ++i) {
      const Call& c = prog.calls[static_cast<std::size_t>(i)];
      const bool is_deviant_step = i == prog.deviant_call && w == prog.deviant;
      if (!acts_in(c, prog.groups[static_cast<std::size_t>(c.group)], w)) {
        // throws / early_return also fire for a rank that has no part in the call.
        if (!is_deviant_step) continue;
      }
      Action a{i, c, Fault::none, false, false};
      if (is_deviant_step) {
        switch (prog.deviation) {
          case Deviation::early_return: a.stop = true; break;
          case Deviation::throws: a.raise = true; break;
          case Deviation::none:
          case Deviation::usage_all:
          case Deviation::usage_group: break;
          default: a.spec = deviant_spec; a.fault = fault;
        }
        mine.push_back(a);
        if (a.stop) break;
        if (a.raise) continue;  // never reached past the throw, kept for the listing
        continue;
      }
      mine.push_back(a);
    }
  }
}

}  // namespace shardcheck::fuzz::detail
