// Running an mlp case on the ranks: each rank's inputs cut from the global tensors by the
// placements of the op's spec, and the implementation run on P ranks (the engine's steps,
// engine/rank_family.hpp).
#pragma once

#include "engine/rank_family.hpp"
#include "ops/mlp/mlp_spec.hpp"
#include "suites/mlp/mlp_case.hpp"
#include "suites/mlp/mlp_impl.hpp"

#include <vector>

namespace shardcheck::check {

template <class T>
using MlpRun = RankRun<MlpRankOutputs<T>>;

// Runs `impl` on c.world ranks. Exceptions from the ranks become MlpRun::error.
template <class T>
MlpRun<T> run_ranks(const MlpImplementation& impl, const MlpCase& c, const MlpData<T>& d);

// The op's spec for this case: its tensors' placements and its collectives
// (ops/mlp/mlp_spec.hpp).
spec::OpSpec op_spec(const MlpCase& c);

}  // namespace shardcheck::check
