// Running a linear case on the ranks: each rank's inputs cut from the global tensors, the
// implementation run on P ranks, and what the suite expects back: the outputs' placements and
// the collectives the op declares.
#pragma once

#include "engine/rank_family.hpp"
#include "engine/traffic.hpp"
#include "layout/placement.hpp"
#include "ops/linear/linear_spec.hpp"
#include "runtime/ledger.hpp"
#include "suites/linear/linear_case.hpp"
#include "suites/linear/linear_impl.hpp"

#include <string>
#include <vector>

namespace shardcheck::check {

template <class T>
using LinearRun = RankRun<LinearRankOutputs<T>>;

// What rank r is given (linear_impl.hpp documents the layout).
template <class T>
LinearRankInputs<T> linear_rank_inputs(const LinearCase& c, const LinearData<T>& d, int r);

// Runs `impl` on c.world ranks. Exceptions from the ranks become LinearRun::error.
template <class T>
LinearRun<T> run_linear(const LinearImplementation& impl, const LinearCase& c,
                        const LinearData<T>& d);

// The op's spec for this case: its tensors' placements (by which the inputs are cut and the
// outputs materialized) and its collectives (ops/linear/linear_spec.hpp).
spec::OpSpec linear_spec(const LinearCase& c);

struct LinearPlacements {
  Placement y, dx, dw, db;
};
LinearPlacements linear_placements(const LinearCase& c);

// The collectives each rank's op declares for one forward and backward: the op's spec's
// (ops/linear/linear_spec.hpp), with this case's element type.
std::vector<std::vector<DeclaredCall>> linear_declared_traffic(const LinearCase& c);

}  // namespace shardcheck::check
