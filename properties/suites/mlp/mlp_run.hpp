// Running an mlp case on the ranks: each rank's inputs cut from the global tensors, the
// implementation run on P ranks, and what the suite expects back: the outputs' placements and
// the collectives the op declares.
#pragma once

#include "engine/rank_family.hpp"
#include "engine/traffic.hpp"
#include "layout/placement.hpp"
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

struct MlpPlacements {
  Placement y, dx, dw_gate, dw_up, db_gate, db_up, dw_down, db_down;
};
MlpPlacements mlp_placements(const MlpCase& c);

// The collectives ParallelMLP declares for one forward and backward on every rank (element
// counts, N = tokens, H = hidden):
//   without sequence parallelism  all_reduce y [N·H] (fc2's partials), all_reduce dx [N·H]
//                                 (fc1's dx partials)
//   with sequence parallelism     all_gather x [N·H] twice (the forward's g, and the backward's
//                                 re-gather for dw_up), reduce_scatter y [N·H] (ḡ),
//                                 all_gather dy [N·H] (ḡ's backward), reduce_scatter dx [N·H]
//                                 (g's backward)
// The activation moves nothing. With P = 1 the same calls are made (they move nothing).
std::vector<DeclaredCall> mlp_declared_traffic(const MlpCase& c);

}  // namespace shardcheck::check
