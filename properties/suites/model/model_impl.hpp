// The model suite's implementation interface: one training step on one rank of the mesh.
//
// A user checks their own partitioned training step by writing a type with one member template
// and registering it (as examples/custom_linear/ does for the linear family):
//
//   struct MyStep {
//     template <class T> ModelStepResult<T> train_step(Communicator& world, const ModelCase& c,
//                                                      const ModelData<T>& dense) const;
//   };
//
// T is double, float, bfloat16 or float16. Every rank is given the case (the model, the mesh and
// its splits, the optimizer) and the dense parameters and batch, as a checkpoint and a data
// loader would give them, and takes its own pieces. It returns ModelStepResult<T>
// (lib/ops/model/model.hpp) with its gradients and new parameters in the layout of
// shard_model_params (the spec's placements: ops/model/model_spec.hpp), which is how the suite
// reads them back.
#pragma once

#include "engine/implementation.hpp"
#include "engine/registry.hpp"
#include "ops/model/model.hpp"
#include "runtime/communicator.hpp"

namespace shardcheck::check {

struct ModelCase;
template <class T>
struct ModelData;

#define SHARDCHECK_MODEL_METHODS(M, T) \
  M(T, ModelStepResult<T>, train_step, \
    (Communicator & world, const ModelCase& c, const ModelData<T>& dense), (world, c, dense))
SHARDCHECK_IMPLEMENTATION(ModelImplementation, ModelAdapter, SHARDCHECK_MODEL_METHODS)
#undef SHARDCHECK_MODEL_METHODS

using ModelRegistry = ImplementationRegistry<ModelImplementation>;

// The library's own step (lib/ops/model/model.hpp), as an implementation: "shardcheck".
struct LibraryModel {
  template <class T>
  ModelStepResult<T> train_step(Communicator& world, const ModelCase& c,
                                const ModelData<T>& dense) const;
};

}  // namespace shardcheck::check
