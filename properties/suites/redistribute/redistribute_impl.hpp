// The redistribute suite's implementation interface: DTensor's redistribute on a device mesh
// (lib/layout/redistribute.hpp). Every rank of the mesh calls it with its own piece of a global
// tensor under the layout `from` (one placement per mesh dimension: Shard(d) under a split
// policy, Replicate or Partial(op)) and gets back its piece under `to`.
//
// A user checks their own redistribution by writing a type with one member template and
// registering it (as examples/custom_linear/ does for the linear suite):
//
//   struct MyRedistribute {
//     template <class T>
//     Tensor<T> redistribute(const MeshGroups& groups, const Tensor<T>& local,
//                            const Shape& global, const std::vector<Placement>& from,
//                            const std::vector<Placement>& to) const;
//   };
//   static Registration<RedistributeImplementation> reg(
//       {.name = "mine"}, std::make_shared<RedistributeAdapter<MyRedistribute>>());
//
// Then `shardcheck check redistribute --impl mine`. `groups` gives the world communicator, the
// mesh, this rank's coordinates and one communicator per mesh dimension (along(i)).
//
// What the claim `deterministic` means here: the implementation carries out the library's plan
// (plan_redistribute) step for step, so its ledger must hold exactly the plan's collectives and
// bytes, and it must refuse the transitions the planner refuses (S -> P, P(a) -> P(b)). An
// implementation that moves data another way (more bytes, or another order) still has to keep
// the global tensor, round-trip and reduce within the bound; it registers without the claim and
// those two properties are skipped.
#pragma once

#include "engine/implementation.hpp"
#include "engine/registry.hpp"
#include "layout/device_mesh.hpp"
#include "layout/placement.hpp"
#include "layout/redistribute.hpp"
#include "tensor/tensor.hpp"

#include <vector>

namespace shardcheck::check {

// The interface (RedistributeImplementation) and RedistributeAdapter<Impl>, which adapts a type
// with the member template redistribute<T> (engine/implementation.hpp).
// NOLINTBEGIN(bugprone-macro-parentheses): T is a template argument, M a macro name.
#define SHARDCHECK_REDISTRIBUTE_METHODS(M, T)                               \
  M(T, Tensor<T>, redistribute,                                             \
    (const MeshGroups& groups, const Tensor<T>& local, const Shape& global, \
     const std::vector<Placement>& from, const std::vector<Placement>& to), \
    (groups, local, global, from, to))
SHARDCHECK_IMPLEMENTATION(RedistributeImplementation, RedistributeAdapter,
                          SHARDCHECK_REDISTRIBUTE_METHODS)
#undef SHARDCHECK_REDISTRIBUTE_METHODS
// NOLINTEND(bugprone-macro-parentheses)

using RedistributeRegistry = ImplementationRegistry<RedistributeImplementation>;

// The library's own redistribute (lib/layout/redistribute.hpp): "shardcheck".
struct LibraryRedistribute {
  template <class T>
  Tensor<T> redistribute(const MeshGroups& groups, const Tensor<T>& local, const Shape& global,
                         const std::vector<Placement>& from,
                         const std::vector<Placement>& to) const {
    return shardcheck::redistribute(groups, local, global, from, to);
  }
};

// A correct redistribution that is not the library's plan: through the fully replicated layout
// (every Partial reduced, every Shard gathered, then the target cut or kept on coordinate 0),
// with the library's own steps. It moves more bytes than the plan (so it does not claim
// `deterministic`) and accepts S -> P by going through R. Registered as "via-replicate": the
// suite's proof that a correct implementation other than the library's passes.
struct ViaReplicateRedistribute {
  template <class T>
  Tensor<T> redistribute(const MeshGroups& groups, const Tensor<T>& local, const Shape& global,
                         const std::vector<Placement>& from,
                         const std::vector<Placement>& to) const {
    const std::vector<Placement> replicated(from.size(), Placement::replicate());
    const Tensor<T> full = shardcheck::redistribute(groups, local, global, from, replicated);
    return shardcheck::redistribute(groups, full, global, replicated, to);
  }
};

}  // namespace shardcheck::check
