// Running a linear case on the ranks: each rank's inputs cut from the global tensors, the
// implementation run on P ranks, and what the suite expects back: the outputs' placements and
// the collectives the op declares.
#pragma once

#include "engine/rank_family.hpp"
#include "engine/traffic.hpp"
#include "layout/placement.hpp"
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

struct LinearPlacements {
  Placement y, dx, dw, db;
};
LinearPlacements linear_placements(const LinearCase& c);

// The collectives the op declares for one forward and backward on every rank (element counts):
//   column_parallel  all_gather x [tokens*in]      with sequence_parallel_input, twice: the
//                                                  forward's, and the backward's re-gather for
//                                                  dW (Megatron keeps only the shard; Korthikanti
//                                                  et al. count 4 all_gathers per layer for it)
//                    all_gather y [tokens*out]     with gather_output
//                    reduce_scatter dx [tokens*in] with sequence_parallel_input, else
//                    all_reduce dx [tokens*in]
//   row_parallel     reduce_scatter y [tokens*out] with sequence_parallel_output, else
//                    all_reduce y [tokens*out]
//                    all_gather dy [tokens*out]    with sequence_parallel_output
//                    all_gather dx [tokens*in]     without input_is_parallel
// With P = 1 the same calls are made (they move nothing).
std::vector<DeclaredCall> linear_declared_traffic(const LinearCase& c);

}  // namespace shardcheck::check
