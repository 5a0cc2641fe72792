// Running a norm case on the ranks: each rank's inputs cut from the global tensors by the
// placements of the op's spec, and the implementation run on P ranks (the engine's steps,
// engine/rank_family.hpp).
#pragma once

#include "engine/rank_family.hpp"
#include "engine/verdict.hpp"
#include "ops/norm/norm_spec.hpp"
#include "suites/norm/norm_case.hpp"
#include "suites/norm/norm_expected.hpp"
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

// Every output of `run` (y, dx, dgamma, dbeta with beta; for the block also dw1, dw2)
// materialized by its spec's placement and checked against `e`, appended to v (norm_suite.cpp;
// `shardcheck compare` calls it too, compare/compare.hpp). run.outputs holds one entry per rank.
template <class T>
void check_outputs(CaseVerdict& v, const NormCase& c, const NormRun<T>& run, const NormExpected& e);

}  // namespace shardcheck::check
