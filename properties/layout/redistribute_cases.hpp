// The generated cases of the redistribute properties (redistribute_props.cpp, exact values;
// redistribute_bounds_props.cpp, rounding arithmetic): a 1-D to 3-D device mesh (sizes 1 to 3,
// named from kMeshNames), a global shape (1 to 3 dimensions, sizes 0 to 6), one source and one
// target placement per mesh dimension (R, S(d) under chunk, balanced or explicit sizes with
// zeros, P(op) with one reduce op per case), every pair a valid transition.
#pragma once

#include "generators/structure.hpp"
#include "layout/device_mesh.hpp"
#include "layout/placement.hpp"
#include "layout/sharding.hpp"
#include "layout/split_policy.hpp"
#include "layout_test_support.hpp"
#include "runtime/reduce_op.hpp"
#include "tensor/tensor.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <ostream>
#include <vector>

namespace shardcheck::layout_test {

struct Case {
  DeviceMesh mesh = DeviceMesh::line(1);
  Shape global;
  std::vector<Placement> from, to;
  ReduceOp op = ReduceOp::sum;  // of every Partial in the case
};

inline std::ostream& operator<<(std::ostream& os, const Case& c) {
  return os << format_placements(c.from) << " -> " << format_placements(c.to) << " on "
            << c.mesh.to_string() << ", global " << format_shape(c.global);
}

// R, S(d) under chunk or balanced, or P(op); Partial weighs more in a target layout (R -> P
// and P -> S are the transitions with the fewest cases otherwise).
inline rc::Gen<Placement> genPlacement(std::size_t ndim, ReduceOp op, bool allow_partial) {
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
inline rc::Gen<SplitPolicy> genExplicit(std::size_t n, int p) {
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
inline void add_explicit_splits(std::vector<Placement>& layout, const DeviceMesh& mesh,
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

inline bool valid(const Placement& f, const Placement& t) {
  if (f.is_shard() && t.is_partial()) return false;
  if (f.is_partial() && t.is_partial() && f.reduce_op() != t.reduce_op()) return false;
  return true;
}

inline rc::Gen<Case> genCase() {
  return rc::gen::exec([] {
    Case c;
    const auto n = *gen::structure<std::size_t>(1, 3);
    const auto names = *rc::gen::unique<std::vector<int>>(n, rc::gen::inRange(0, 4));
    std::vector<MeshDim> dims;
    dims.reserve(names.size());
    for (const int k : names) dims.push_back({kMeshNames[k], *gen::structure<int>(1, 3)});
    c.mesh = DeviceMesh(dims);
    const auto nd = *gen::structure<std::size_t>(1, 3);
    c.global = *rc::gen::container<Shape>(nd, rc::gen::inRange<std::size_t>(0, 7));
    c.op = *gen::weightedStructure<ReduceOp>(
        {{3, ReduceOp::sum}, {1, ReduceOp::avg}, {1, ReduceOp::max}, {1, ReduceOp::min}});
    for (std::size_t i = 0; i < c.mesh.ndim(); ++i) {
      const auto f = *genPlacement(nd, c.op, true);
      auto t = *genPlacement(nd, c.op, !f.is_shard());
      // Mostly a change on this dimension, sometimes the same placement: a quarter of the cases
      // from the first on (the scaled inRange(0, 4) made it certain in cases 0-16).
      if (*gen::chance(25)) t = f;
      RC_PRE(valid(f, t));
      c.from.push_back(f);
      c.to.push_back(t);
    }
    add_explicit_splits(c.from, c.mesh, c.global);
    add_explicit_splits(c.to, c.mesh, c.global);
    return c;
  });
}

}  // namespace shardcheck::layout_test
