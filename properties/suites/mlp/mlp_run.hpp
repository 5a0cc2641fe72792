// Running an mlp case on the ranks: each rank's inputs cut from the global tensors, the
// implementation run on P ranks, and what the suite expects back: the outputs' placements and
// the collectives the op declares.
#pragma once

#include "engine/rank_family.hpp"
#include "engine/traffic.hpp"
#include "layout/placement.hpp"
#include "ops/mlp/mlp_spec.hpp"
#include "suites/mlp/mlp_case.hpp"
#include "suites/mlp/mlp_impl.hpp"

#include <vector>

namespace shardcheck::check {

template <class T>
using MlpRun = RankRun<MlpRankOutputs<T>>;

// What rank r is given (mlp_impl.hpp documents the layout): x and dy cut along tokens with
// sequence parallelism (engine/slicing.hpp), the parameters whole.
template <class T>
MlpRankInputs<T> mlp_rank_inputs(const MlpCase& c, const MlpData<T>& d, int r);

// Runs `impl` on c.world ranks. Exceptions from the ranks become MlpRun::error.
template <class T>
MlpRun<T> run_mlp(const MlpImplementation& impl, const MlpCase& c, const MlpData<T>& d);

// The op's spec for this case: its tensors' placements and its collectives
// (ops/mlp/mlp_spec.hpp).
spec::OpSpec mlp_spec(const MlpCase& c);

struct MlpPlacements {
  Placement y, dx, dw_gate, dw_up, db_gate, db_up, dw_down, db_down;
};
MlpPlacements mlp_placements(const MlpCase& c);

// The collectives each rank's op declares for one forward and backward: the op's spec's
// (ops/mlp/mlp_spec.hpp), with this case's element type.
std::vector<std::vector<DeclaredCall>> mlp_declared_traffic(const MlpCase& c);

}  // namespace shardcheck::check
