// Running a norm case on the ranks: each rank's inputs cut from the global tensors, the
// implementation run on P ranks, and what the suite expects back: the outputs' placements and
// the collectives the op declares.
#pragma once

#include "engine/rank_family.hpp"
#include "engine/traffic.hpp"
#include "layout/placement.hpp"
#include "ops/norm/norm_spec.hpp"
#include "runtime/ledger.hpp"
#include "suites/norm/norm_case.hpp"
#include "suites/norm/norm_impl.hpp"

#include <string>
#include <vector>

namespace shardcheck::check {

// Both ops' outputs in one record (the norm leaves dw1/dw2 empty).
template <class T>
using NormRun = RankRun<BlockRankOutputs<T>>;

template <class T>
NormRun<T> run_norm(const NormImplementation& impl, const NormCase& c, const NormData<T>& d);

// The op's spec for this case (sequence_parallel_norm or megatron_sp_block): its tensors'
// placements and its collectives (ops/norm/norm_spec.hpp).
spec::OpSpec norm_spec(const NormCase& c);

struct NormPlacements {
  Placement y, dx, dgamma, dbeta, dw1, dw2;
};
NormPlacements norm_placements(const NormCase& c);

// The collectives each rank's op declares for one forward and backward: the op's spec's
// (ops/norm/norm_spec.hpp), with this case's element type.
std::vector<std::vector<DeclaredCall>> norm_declared_traffic(const NormCase& c);

}  // namespace shardcheck::check
