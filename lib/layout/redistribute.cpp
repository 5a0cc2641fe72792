#include "layout/redistribute.hpp"

#include "layout/split_policy.hpp"

#include <numeric>

namespace shardcheck {
namespace {

using Kind = RedistributeStep::Kind;

std::uint64_t total(const std::vector<std::size_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::uint64_t{0});
}

std::size_t at(const std::vector<std::size_t>& v, int k) {
  const int p = static_cast<int>(v.size());
  return v[static_cast<std::size_t>(((k % p) + p) % p)];
}

// The balanced chunks all_reduce finishes on each rank (communicator.hpp).
std::vector<std::size_t> balanced(std::size_t n, int p) {
  return split_sizes(SplitPolicy::balanced(), n, p);
}

// The elements of each of p pieces of `whole` cut along d by `policy`.
std::vector<std::size_t> piece_counts(const SplitPolicy& policy, const Shape& whole, std::size_t d,
                                      int p) {
  const std::size_t other = detail::numel_except(whole, d);
  std::vector<std::size_t> c;
  for (const auto& pc : split(policy, whole[d], p)) c.push_back(pc.size * other);
  return c;
}

std::vector<std::size_t> scaled(std::vector<std::size_t> v, std::size_t factor) {
  for (auto& x : v) x *= factor;
  return v;
}

}  // namespace

std::string_view name(RedistributeStep::Kind k) {
  switch (k) {
    case Kind::all_gather: return "all_gather";
    case Kind::all_reduce: return "all_reduce";
    case Kind::reduce_scatter: return "reduce_scatter";
    case Kind::all_to_all: return "all_to_all";
    case Kind::local_slice: return "local slice";
    case Kind::keep_on_first: return "keep on coordinate 0";
  }
  return "?";
}

std::string RedistributeStep::to_string(const DeviceMesh& mesh) const {
  return mesh.dim(mesh_dim).name + ": " + from.to_string() + " -> " + to.to_string() + " " +
         std::string(name(kind)) + " " + format_shape(before) + " -> " + format_shape(after) +
         ", sent " + std::to_string(sent_bytes) + " B, received " + std::to_string(received_bytes) +
         " B";
}

std::uint64_t RedistributePlan::sent_bytes() const {
  std::uint64_t n = 0;
  for (const auto& s : steps) n += s.sent_bytes;
  return n;
}

std::uint64_t RedistributePlan::received_bytes() const {
  std::uint64_t n = 0;
  for (const auto& s : steps) n += s.received_bytes;
  return n;
}

std::string RedistributePlan::to_string(const DeviceMesh& mesh) const {
  if (steps.empty()) return "(nothing to do)\n";
  std::string s;
  for (const auto& st : steps) s += st.to_string(mesh) + "\n";
  return s;
}

RedistributePlan plan_redistribute(const Shape& global, DType dtype, const DeviceMesh& mesh,
                                   const std::vector<Placement>& from,
                                   const std::vector<Placement>& to,
                                   const std::vector<int>& coords) {
  const std::string what = "redistribute " + format_placements(from) + " -> " +
                           format_placements(to) + " on mesh " + mesh.to_string() +
                           ", global shape " + format_shape(global);
  if (from.size() != mesh.ndim() || to.size() != mesh.ndim()) {
    throw UsageError(what + ": give one placement per mesh dimension (" +
                     std::to_string(mesh.ndim()) + ")");
  }
  // Validates both layouts (shard dimensions, explicit sizes) for this rank.
  (void)local_piece(global, mesh, from, coords);
  (void)local_piece(global, mesh, to, coords);
  for (std::size_t i = 0; i < mesh.ndim(); ++i) {
    const auto& f = from[i];
    const auto& t = to[i];
    if (f.is_shard() && t.is_partial()) {
      throw UsageError(what + ": mesh dimension " + mesh.dim(i).name + " goes " + f.to_string() +
                       " -> " + t.to_string() +
                       "; a shard is not a term of a reduction. "
                       "Go through R (all_gather) and then to " +
                       t.to_string());
    }
    if (f.is_partial() && t.is_partial() && f.reduce_op() != t.reduce_op()) {
      throw UsageError(what + ": mesh dimension " + mesh.dim(i).name + " goes " + f.to_string() +
                       " -> " + t.to_string() +
                       "; no conversion between reductions is exact. "
                       "Reduce first (-> R), then re-partition");
    }
  }
  const auto es = size_of(dtype);
  RedistributePlan plan;
  std::size_t k = mesh.ndim();
  for (std::size_t i = 0; i < mesh.ndim(); ++i) {
    if (!(from[i] == to[i]) && mesh.size(i) > 1) {
      k = i;
      break;
    }
  }
  if (k == mesh.ndim()) return plan;  // every change is on a size-1 dimension: a relabel

  auto cur = from;
  auto shape_now = [&] { return local_piece(global, mesh, cur, coords).shape; };
  // f and t by value, not by reference: callers pass cur[i], which add() overwrites (cur[i] = t)
  // before it reads f again (an all_gather's counts come from f's policy). By reference, f would
  // become t and the redistribute suite fails every uneven gather (tried: clang-tidy suggests it).
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  auto add = [&](Kind kind, std::size_t i, const Placement f, const Placement t) {
    RedistributeStep s;
    s.kind = kind;
    s.mesh_dim = i;
    s.from = f;
    s.to = t;
    s.before = shape_now();
    cur[i] = t;
    s.after = shape_now();
    const int p = mesh.size(i);
    const int r = coords[i];
    const auto before_n = numel(s.before);
    switch (kind) {
      case Kind::all_gather: {
        // Every member's piece along d; S = the gathered piece.
        s.counts = piece_counts(f.policy(), s.after, f.dim(), p);
        const auto c = scaled(s.counts, es);
        const auto S = total(c);
        s.sent_bytes = S - at(c, r + 1);
        s.received_bytes = S - at(c, r);
        break;
      }
      case Kind::all_reduce: {
        const auto c = scaled(balanced(before_n, p), es);
        const std::uint64_t S = before_n * es;
        s.sent_bytes = (S - at(c, r)) + (S - at(c, r + 1));
        s.received_bytes = (S - at(c, r - 1)) + (S - at(c, r));
        break;
      }
      case Kind::reduce_scatter: {
        s.counts = piece_counts(t.policy(), s.before, t.dim(), p);
        const auto c = scaled(s.counts, es);
        const auto S = total(c);
        s.sent_bytes = S - at(c, r);
        s.received_bytes = S - at(c, r - 1);
        break;
      }
      case Kind::all_to_all: {
        // Send to m: my piece's block of m's b-range; receive from m: m's a-piece of my b-range.
        const std::size_t a = f.dim();
        const std::size_t b = t.dim();
        const auto a_cuts = split(f.policy(), s.after[a], p);
        const auto b_cuts = split(t.policy(), s.before[b], p);
        for (int m = 0; m < p; ++m) {
          if (m == r) continue;
          Shape blk = s.before;
          blk[b] = b_cuts[static_cast<std::size_t>(m)].size;
          s.sent_bytes += numel(blk) * es;
          Shape rblk = s.after;
          rblk[a] = a_cuts[static_cast<std::size_t>(m)].size;
          s.received_bytes += numel(rblk) * es;
        }
        break;
      }
      case Kind::local_slice:
      case Kind::keep_on_first: break;
    }
    plan.steps.push_back(std::move(s));
  };

  // The all_to_all case: one mesh dimension changes, S(a) -> S(b), and no other mesh dimension
  // shards a or b (before or after).
  std::size_t changed = 0;
  for (std::size_t i = 0; i < mesh.ndim(); ++i) {
    if (!(from[i] == to[i]) && mesh.size(i) > 1) ++changed;
  }
  if (changed == 1 && from[k].is_shard() && to[k].is_shard() && from[k].dim() != to[k].dim()) {
    bool clear = true;
    for (std::size_t j = 0; j < mesh.ndim(); ++j) {
      if (j == k) continue;
      for (const auto* p : {&from[j], &to[j]}) {
        if (p->is_shard() && (p->dim() == from[k].dim() || p->dim() == to[k].dim())) {
          clear = false;
        }
      }
    }
    if (clear) {
      add(Kind::all_to_all, k, from[k], to[k]);
      return plan;
    }
  }

  // Undo every shard at mesh dimensions >= k, innermost (last) first.
  for (std::size_t i = mesh.ndim(); i-- > k;) {
    if (cur[i].is_shard() && mesh.size(i) > 1) {
      add(Kind::all_gather, i, cur[i], Placement::replicate());
    } else if (cur[i].is_shard()) {
      cur[i] = Placement::replicate();
    }
  }
  // Rebuild dimensions k.. in order: every new cut splits what the earlier ones left.
  for (std::size_t i = k; i < mesh.ndim(); ++i) {
    const Placement f = cur[i];
    const Placement& t = to[i];
    if (mesh.size(i) == 1) {
      cur[i] = t;
      continue;
    }
    if (f.is_partial()) {
      if (t.is_partial()) continue;  // same op (checked above)
      if (t.is_replicate()) add(Kind::all_reduce, i, f, t);
      else add(Kind::reduce_scatter, i, f, t);
    } else {  // f is R here
      if (t.is_shard()) add(Kind::local_slice, i, f, t);
      else if (t.is_partial() && t.reduce_op() == ReduceOp::sum) add(Kind::keep_on_first, i, f, t);
      else cur[i] = t;  // R -> R, R -> P(avg|max|min): the value itself
    }
  }
  return plan;
}

}  // namespace shardcheck
