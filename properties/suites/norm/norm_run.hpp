// Running a norm case on the ranks: each rank's inputs cut from the global tensors by the
// placements of the op's spec, and the implementation run on P ranks (the engine's steps,
// engine/rank_family.hpp).
#pragma once

#include "engine/rank_family.hpp"
#include "ops/norm/norm_spec.hpp"
#include "suites/norm/norm_case.hpp"
#include "suites/norm/norm_impl.hpp"

#include <vector>

namespace shardcheck::check {

// Both ops' outputs in one record (the norm leaves dw1/dw2 empty).
template <class T>
using NormRun = RankRun<BlockRankOutputs<T>>;

template <class T>
NormRun<T> run_ranks(const NormImplementation& impl, const NormCase& c, const NormData<T>& d);

// The op's spec for this case (sequence_parallel_norm or megatron_sp_block): its tensors'
// placements and its collectives (ops/norm/norm_spec.hpp).
spec::OpSpec op_spec(const NormCase& c);

}  // namespace shardcheck::check
