// Running a linear case on the ranks: each rank's inputs cut from the global tensors by the
// placements of the op's spec, and the implementation run on P ranks (the engine's steps,
// engine/rank_family.hpp).
#pragma once

#include "engine/rank_family.hpp"
#include "engine/verdict.hpp"
#include "ops/linear/linear_spec.hpp"
#include "suites/linear/linear_case.hpp"
#include "suites/linear/linear_expected.hpp"
#include "suites/linear/linear_impl.hpp"

#include <vector>

namespace shardcheck::check {

template <class T>
using LinearRun = RankRun<LinearRankOutputs<T>>;

// Runs `impl` on c.world ranks. Exceptions from the ranks become LinearRun::error.
template <class T>
LinearRun<T> run_ranks(const LinearImplementation& impl, const LinearCase& c,
                       const LinearData<T>& d);

// The op's spec for this case: its tensors' placements (by which the inputs are cut and the
// outputs materialized) and its collectives (ops/linear/linear_spec.hpp).
spec::OpSpec op_spec(const LinearCase& c);

// Every output of `run` materialized by its spec's placement and checked against `e`, appended
// to v (linear_suite.cpp; `shardcheck compare` calls it too, compare/compare.hpp).
template <class T>
void check_outputs(CaseVerdict& v, const LinearCase& c, const LinearRun<T>& run,
                   const LinearExpected& e);

}  // namespace shardcheck::check
