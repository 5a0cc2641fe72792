// Running an mlp case on the ranks: each rank's inputs cut from the global tensors by the
// placements of the op's spec, and the implementation run on P ranks (the engine's steps,
// engine/rank_family.hpp).
#pragma once

#include "engine/rank_family.hpp"
#include "engine/verdict.hpp"
#include "ops/mlp/mlp_spec.hpp"
#include "suites/mlp/mlp_case.hpp"
#include "suites/mlp/mlp_expected.hpp"
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

// Every output of `run` (y, dx, dw_up, dw_down; dw_gate with swiglu; the biases' gradients with
// bias) materialized by its spec's placement and checked against `e`, appended to v
// (mlp_suite.cpp; `shardcheck compare` calls it too, compare/compare.hpp). run.outputs holds one
// entry per rank.
template <class T>
void check_outputs(CaseVerdict& v, const MlpCase& c, const MlpRun<T>& run, const MlpExpected& e);

}  // namespace shardcheck::check
