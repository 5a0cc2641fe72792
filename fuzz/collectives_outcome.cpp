#include "collectives_outcome.hpp"

#include "runtime/errors.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

namespace shardcheck::fuzz {
namespace {

// Where an action meets its peers: a group's collective sequence (src = dst = -1) or one
// direction of a point-to-point link on a group.
using Key = std::tuple<int, int, int>;  // group, src, dst (group ranks)

Key key_of(const Action& a) {
  if (a.spec.kind == Kind::send_recv) return {a.spec.group, a.spec.src, a.spec.dst};
  return {a.spec.group, -1, -1};
}

// Do the calls that arrived at one step agree? `posts[k]` is group rank k's call (for a
// point-to-point step: [0] the sender's, [1] the receiver's).
bool agree(const std::vector<const Call*>& posts, bool p2p) {
  const Call& a = *posts[0];
  if (p2p) {
    const Call& b = *posts[1];
    return a.dtype == b.dtype && a.count == b.count && a.tag == b.tag;
  }
  const int p = static_cast<int>(posts.size());
  for (const Call* b : posts) {
    if (b->kind != a.kind) return false;  // before the pairwise checks read peers' fields
  }
  for (int r = 0; r < p; ++r) {
    const Call& b = *posts[static_cast<std::size_t>(r)];
    if (a.kind == Kind::barrier) continue;
    if (b.dtype != a.dtype) return false;
    switch (a.kind) {
      case Kind::broadcast:
        if (b.count != a.count || b.root != a.root) return false;
        break;
      case Kind::reduce:
        if (b.count != a.count || b.root != a.root || b.op != a.op) return false;
        break;
      case Kind::all_reduce:
        if (b.count != a.count || b.op != a.op || b.algo != a.algo) return false;
        break;
      case Kind::all_gather:
        if (b.counts != a.counts) return false;
        break;
      case Kind::reduce_scatter:
        if (b.counts != a.counts || b.op != a.op || b.algo != a.algo) return false;
        break;
      case Kind::gather:
      case Kind::scatter:
        if (b.counts != a.counts || b.root != a.root) return false;
        break;
      case Kind::all_to_all:
        // What s sends to d (s's row) must be what d expects from s (d's column).
        for (int d = 0; d < p; ++d) {
          const auto ur = static_cast<std::size_t>(r), ud = static_cast<std::size_t>(d);
          if (b.matrix[ur][ud] != posts[ud]->matrix[ur][ud]) return false;
        }
        break;
      case Kind::ring_shift: {
        if (b.shift != a.shift) return false;
        // r receives from src; src sends counts[src] by its own call, r expects counts[src]
        // by r's call.
        const auto src = static_cast<std::size_t>(mod(r - a.shift, p));
        if (posts[src]->counts[src] != b.counts[src]) return false;
        break;
      }
      default: break;
    }
  }
  return true;
}

struct Step {
  std::map<int, const Call*> posts;  // by group rank (p2p: 0 sender, 1 receiver)
  std::vector<int> waiting;          // world ranks posted here
};

}  // namespace

std::string_view name(Expect e) noexcept {
  switch (e) {
    case Expect::success: return "success";
    case Expect::mismatch: return "CollectiveMismatch";
    case Expect::deadlock: return "DeadlockError";
    case Expect::usage: return "UsageError";
    case Expect::injected: return "InjectedFault";
  }
  return "?";
}

Prediction predict(const Program& prog) {
  // The deviations that throw on their own ranks before any matching: the deviant rank, or for
  // usage_all every member of the deviant call's group, fails with the deviation's error.
  const Call& dc = prog.calls[static_cast<std::size_t>(prog.deviant_call)];
  switch (prog.deviation) {
    case Deviation::throws:
      return Prediction{Expect::injected, {prog.deviant}, prog.deviation_text};
    case Deviation::usage_local:
    case Deviation::usage_group:
      return Prediction{Expect::usage, {prog.deviant}, prog.deviation_text};
    case Deviation::usage_all:
      return Prediction{Expect::usage, prog.groups[static_cast<std::size_t>(dc.group)].members,
                        prog.deviation_text};
    default: break;
  }

  Prediction out;
  const int P = prog.world;
  std::vector<std::size_t> pc(static_cast<std::size_t>(P), 0);
  std::vector<bool> posted(static_cast<std::size_t>(P), false),
      done(static_cast<std::size_t>(P), false);
  std::vector<std::map<Key, std::uint64_t>> counter(static_cast<std::size_t>(P));
  std::map<std::pair<Key, std::uint64_t>, Step> steps;
  std::vector<std::pair<Key, std::uint64_t>> at(static_cast<std::size_t>(P));

  for (bool progress = true; progress;) {
    progress = false;
    for (int w = 0; w < P; ++w) {
      const auto uw = static_cast<std::size_t>(w);
      if (done[uw] || posted[uw]) continue;
      const auto& acts = prog.actions[uw];
      if (pc[uw] == acts.size() || acts[pc[uw]].stop) {
        done[uw] = true;
        progress = true;
        continue;
      }
      const Action& a = acts[pc[uw]];
      const Group& g = prog.groups[static_cast<std::size_t>(a.spec.group)];
      const Key k = key_of(a);
      const std::uint64_t s = counter[uw][k];
      Step& st = steps[{k, s}];
      const int r = rank_in(g, w);
      const int slot = a.spec.kind != Kind::send_recv ? r : (r == a.spec.src ? 0 : 1);
      st.posts[slot] = &a.spec;
      st.waiting.push_back(w);
      posted[uw] = true;
      at[uw] = {k, s};
      progress = true;
    }
    for (auto& [where, st] : steps) {
      const auto& [k, s] = where;
      const Group& g = prog.groups[static_cast<std::size_t>(std::get<0>(k))];
      const bool p2p = std::get<1>(k) >= 0;
      const std::size_t need = p2p ? 2 : g.members.size();
      if (st.waiting.empty() || st.posts.size() < need) continue;
      std::vector<const Call*> calls;
      for (const auto& [slot, c] : st.posts) calls.push_back(c);
      if (!agree(calls, p2p)) {
        out.expect = Expect::mismatch;
        out.ranks = st.waiting;
        std::sort(out.ranks.begin(), out.ranks.end());
        std::ostringstream os;
        os << (p2p ? "message " : "collective step ") << s << " on g" << std::get<0>(k);
        if (p2p) os << " from group rank " << std::get<1>(k) << " to " << std::get<2>(k);
        os << " disagrees: ";
        for (const auto& [slot, c] : st.posts) os << "[" << slot << "] " << describe(*c, g) << "; ";
        out.why = os.str();
        return out;
      }
      for (int w : st.waiting) {
        const auto uw = static_cast<std::size_t>(w);
        ++counter[uw][k];
        ++pc[uw];
        posted[uw] = false;
      }
      st.waiting.clear();
      progress = true;
    }
  }

  std::ostringstream os;
  for (int w = 0; w < P; ++w) {
    const auto uw = static_cast<std::size_t>(w);
    if (done[uw]) continue;
    out.ranks.push_back(w);
    const Action& a = prog.actions[uw][pc[uw]];
    os << "world rank " << w << " waits forever in call #" << a.call << " ("
       << describe(a.spec, prog.groups[static_cast<std::size_t>(a.spec.group)]) << "); ";
  }
  out.expect = out.ranks.empty() ? Expect::success : Expect::deadlock;
  out.why = os.str();
  return out;
}

std::string exception_type(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const CollectiveMismatch&) {
    return "CollectiveMismatch";
  } catch (const DeadlockError&) {
    return "DeadlockError";
  } catch (const UsageError&) {
    return "UsageError";
  } catch (const TimeoutError&) {
    return "TimeoutError";
  } catch (const PeerAborted&) {
    return "PeerAborted";
  } catch (const RankFailure&) {
    return "RankFailure";
  } catch (const InjectedFault&) {
    return "InjectedFault";
  } catch (const std::exception& x) {
    return std::string("std::exception: ") + x.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace shardcheck::fuzz
