#include "suites/redistribute/redistribute_case.hpp"

#include "generators/structure.hpp"
#include "layout/sharding.hpp"
#include "layout/split_policy.hpp"

#include <algorithm>
#include <sstream>

namespace shardcheck::check {
namespace {

// R, S(d) under chunk or balanced, or P(op); Partial weighs more in a target layout (R -> P and
// P -> S are the transitions with the fewest cases otherwise).
rc::Gen<Placement> genPlacement(std::size_t ndim, ReduceOp op, bool allow_partial) {
  return rc::gen::exec([=] {
    const int kind = *gen::weightedStructure<int>(
        {{2, 0}, {3, 1}, {allow_partial ? std::size_t{2} : std::size_t{0}, 2}});
    if (kind == 0) return Placement::replicate();
    if (kind == 2) return Placement::partial(op);
    const auto d = *gen::structure<std::size_t>(0, ndim - 1);
    return Placement::shard(d, *gen::structureOf({SplitPolicy::chunk(), SplitPolicy::balanced()}));
  });
}

// n elements cut into p explicit sizes (zeros allowed, smaller before larger often).
rc::Gen<SplitPolicy> genExplicit(std::size_t n, int p) {
  return rc::gen::exec([=] {
    auto cuts = *rc::gen::container<std::vector<std::size_t>>(
        static_cast<std::size_t>(p - 1), rc::gen::inRange<std::size_t>(0, n + 1));
    cuts.push_back(0);
    cuts.push_back(n);
    std::sort(cuts.begin(), cuts.end());
    std::vector<std::size_t> sizes;
    for (std::size_t k = 1; k < cuts.size(); ++k) sizes.push_back(cuts[k] - cuts[k - 1]);
    return SplitPolicy::explicit_sizes(sizes);
  });
}

// Gives some Shards of `layout` explicit sizes: those whose tensor dimension no other mesh
// dimension shards (their piece is the whole dimension, so sizes that tile it are valid).
void add_explicit_splits(std::vector<Placement>& layout, const DeviceMesh& mesh,
                         const Shape& global) {
  for (std::size_t i = 0; i < layout.size(); ++i) {
    if (!layout[i].is_shard()) continue;
    const std::size_t d = layout[i].dim();
    bool alone = true;
    for (std::size_t j = 0; j < layout.size(); ++j) {
      if (j != i && layout[j].is_shard() && layout[j].dim() == d) alone = false;
    }
    if (alone && *gen::chance(33)) {
      layout[i] = Placement::shard(d, *genExplicit(global[d], mesh.size(i)));
    }
  }
}

bool valid(const Placement& f, const Placement& t) {
  if (f.is_shard() && t.is_partial()) return false;
  if (f.is_partial() && t.is_partial() && f.reduce_op() != t.reduce_op()) return false;
  return true;
}

// Mesh sizes cut down until the mesh has at most max_world ranks: the largest size is lowered
// first, never that of dimension `keep` below 2 (the dimension a property needs split).
void fit_world(std::vector<MeshDim>& dims, int max_world, std::size_t keep) {
  auto world = [&] {
    int n = 1;
    for (const auto& d : dims) n *= d.size;
    return n;
  };
  while (world() > std::max(max_world, 2)) {
    std::size_t largest = dims.size();
    for (std::size_t i = 0; i < dims.size(); ++i) {
      const int floor = i == keep ? 2 : 1;
      if (dims[i].size > floor && (largest == dims.size() || dims[i].size > dims[largest].size)) {
        largest = i;
      }
    }
    if (largest == dims.size()) return;
    --dims[largest].size;
  }
}

// A valid pair of placements for one mesh dimension: mostly a change, a quarter of the cases
// the same placement (from the first case on: the scaled inRange(0, 4) this replaced made it
// certain in cases 0-16). Drawn for every one of kMaxMeshDims dimensions whatever the mesh (only
// the first n are used, and only they must be valid): RapidCheck redraws the picks after one
// that shrinks from the same random stream position by position, so a fixed number of picks
// lets the mesh lose a dimension while the rest of the case stays what it was.
struct PlacementPair {
  Placement from, to;
};
PlacementPair draw_pair(std::size_t nd, ReduceOp op) {
  const auto f = *genPlacement(nd, op, true);
  auto t = *genPlacement(nd, op, !f.is_shard());
  if (*gen::chance(25)) t = f;
  return {f, t};
}
constexpr std::size_t kMaxMeshDims = 3;

// kMaxMeshDims sizes in 1..3, drawn whatever the mesh's dimension count (see draw_pair).
std::vector<int> draw_sizes() {
  std::vector<int> sizes;
  for (std::size_t i = 0; i < kMaxMeshDims; ++i) sizes.push_back(*gen::structure<int>(1, 3));
  return sizes;
}

// A size 0 to 6, mostly nonzero and unscaled: an empty tensor checks nothing about rounding,
// and a size-1 dimension hides which dimension a step moves data along (the scaled
// inRange(0, 7) this replaced in the draw drew 0 or 1 in most of the first 20 cases, and
// gather-along-wrong-dimension needed 60 to 80 cases to die). Shrinks toward 1.
rc::Gen<std::size_t> genExtent() {
  return gen::weightedStructure<std::size_t>(
      {{2, 1}, {1, 0}, {2, 2}, {2, 3}, {2, 4}, {2, 5}, {2, 6}});
}

// Three distinct mesh dimension names (indices into kMeshNames; a mesh of n dimensions takes
// the first n), unscaled: the scaled unique(inRange(0, 4)) this replaced in the draw could not
// draw two distinct names at the smallest sizes.
rc::Gen<std::vector<int>> genMeshNames() {
  return gen::structureOf(std::vector<std::vector<int>>{
      {0, 1, 2}, {0, 1, 3}, {0, 2, 3}, {1, 2, 3}, {3, 2, 1}, {2, 0, 3}, {1, 3, 0}});
}

// Any valid pair of layouts; with `reduction`, one mesh dimension j of size >= 2 goes from P(op)
// to R or S(d) (to P(op) one time in six) and every other dimension is any valid pair. The
// picks come in the same order in both draws, and their number does not depend on the mesh.
RedistributeCase draw_layouts(const RunConfig& config, bool reduction) {
  RedistributeCase c;
  const auto n = *gen::structure<std::size_t>(1, kMaxMeshDims);
  const auto names = *genMeshNames();
  const std::size_t j =
      reduction ? *gen::structure<std::size_t>(0, kMaxMeshDims - 1) % n : kMaxMeshDims;
  const auto sizes = draw_sizes();
  std::vector<MeshDim> dims;
  dims.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    dims.push_back({kMeshNames[names[i]], i == j ? std::max(sizes[i], 2) : sizes[i]});
  }
  fit_world(dims, config.max_world, reduction ? j : dims.size());
  c.mesh = DeviceMesh(dims);
  const auto nd = *gen::structure<std::size_t>(1, 3);
  c.global = *rc::gen::container<Shape>(nd, genExtent());
  // The reduce op of any layouts by the case index (a sweep, sum every other case: the op real
  // models use): about half those cases have a Partial, so a random op left avg, max or min out
  // of the first 30 cases at some of 10 seeds (redistribute_coverage_tests); the sweep gives
  // each 5 of them. A reduction always has one.
  c.op = reduction
             ? *gen::weightedStructure<ReduceOp>(
                   {{2, ReduceOp::sum}, {2, ReduceOp::avg}, {1, ReduceOp::max}, {1, ReduceOp::min}})
             : *gen::sweepOf(std::vector<ReduceOp>{ReduceOp::sum, ReduceOp::avg, ReduceOp::sum,
                                                   ReduceOp::max, ReduceOp::sum, ReduceOp::min});
  Placement reduced_to = Placement::partial(c.op);
  if (reduction) {
    const bool stays_partial = *gen::chance(17);
    const auto to = *genPlacement(nd, c.op, false);
    if (!stays_partial) reduced_to = to;
  }
  for (std::size_t i = 0; i < kMaxMeshDims; ++i) {
    const auto [f, t] = draw_pair(nd, c.op);
    if (i >= n) continue;
    if (i == j) {
      c.from.push_back(Placement::partial(c.op));
      c.to.push_back(reduced_to);
      continue;
    }
    RC_PRE(valid(f, t));
    c.from.push_back(f);
    c.to.push_back(t);
  }
  add_explicit_splits(c.from, c.mesh, c.global);
  add_explicit_splits(c.to, c.mesh, c.global);
  return c;
}

void partial_to_replicate(RedistributeCase& c) {
  for (auto* layout : {&c.from, &c.to}) {
    for (auto& p : *layout) {
      if (p.is_partial()) p = Placement::replicate();
    }
  }
}

// One mesh dimension i (size >= 2) made S(0) -> P(op) or P(op) -> P(another op).
void make_impossible(RedistributeCase& c, const RunConfig& config) {
  const auto i = *gen::structure<std::size_t>(0, c.mesh.ndim() - 1);
  auto dims = c.mesh.dims();
  dims[i].size = std::max(dims[i].size, 2);
  fit_world(dims, config.max_world, i);
  c.mesh = DeviceMesh(dims);
  // Explicit sizes tile only the shapes they were drawn for: back to torch.chunk here.
  for (auto* layout : {&c.from, &c.to}) {
    for (auto& pl : *layout) {
      if (pl.is_shard()) pl = Placement::shard(pl.dim());
    }
  }
  if (*gen::chance(50)) {
    const ReduceOp ops[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min};
    const auto k = *gen::structure(1, 3);
    ReduceOp other = c.op;
    for (int j = 0; j < 4; ++j) {
      if (ops[j] == c.op) other = ops[(j + k) % 4];
    }
    c.from[i] = Placement::partial(c.op);
    c.to[i] = Placement::partial(other);
  } else {
    c.from[i] = Placement::shard(0);
    c.to[i] = Placement::partial(c.op);
  }
}

}  // namespace

std::string RedistributeCase::describe() const {
  std::ostringstream os;
  os << format_placements(from) << " -> " << format_placements(to) << " on " << mesh.to_string()
     << ", global " << format_shape(global);
  bool partial = false;
  for (const auto* layout : {&from, &to}) {
    for (const auto& p : *layout) partial = partial || p.is_partial();
  }
  if (partial) os << ", reduce op " << name(op);
  return os.str();
}

rc::Gen<RedistributeCase> gen_case(const RunConfig& config, const RedistributeOptions& options) {
  return rc::gen::exec([config, options] {
    RedistributeCase c;
    switch (options.draw) {
      case RedistributeDraw::exact: c = draw_layouts(config, false); break;
      case RedistributeDraw::round_trip:
      case RedistributeDraw::data_movement:
        c = draw_layouts(config, false);
        partial_to_replicate(c);
        break;
      case RedistributeDraw::impossible:
        c = draw_layouts(config, false);
        make_impossible(c, config);
        break;
      case RedistributeDraw::reduction: c = draw_layouts(config, true); break;
    }
    const bool typed = options.draw == RedistributeDraw::data_movement ||
                       options.draw == RedistributeDraw::reduction;
    c.dtype = typed ? *gen::structureOf(config.dtypes) : DType::float64;
    return c;
  });
}

std::size_t term_count(const DeviceMesh& mesh, const std::vector<Placement>& layout) {
  std::size_t n = 1;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    if (layout[i].is_partial()) n *= static_cast<std::size_t>(mesh.size(i));
  }
  return n;
}

std::size_t term_of(const DeviceMesh& mesh, const std::vector<Placement>& layout,
                    const std::vector<int>& co) {
  std::size_t t = 0;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    if (!layout[i].is_partial()) continue;
    t = t * static_cast<std::size_t>(mesh.size(i)) + static_cast<std::size_t>(co[i]);
  }
  return t;
}

}  // namespace shardcheck::check
