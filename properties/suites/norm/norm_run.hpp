// Running a norm case on the ranks: each rank's inputs cut from the global tensors, the
// implementation run on P ranks, and what the suite expects back: the outputs' placements and
// the collectives the op declares.
#pragma once

#include "engine/rank_family.hpp"
#include "engine/traffic.hpp"
#include "layout/placement.hpp"
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

struct NormPlacements {
  Placement y, dx, dgamma, dbeta, dw1, dw2;
};
NormPlacements norm_placements(const NormCase& c);

// The collectives one forward and backward declares on every rank (element counts):
//   norm    all_reduce [hidden] (dgamma), or [2·hidden] (dgamma | dbeta) for layer_norm;
//           the forward makes none
//   block   the norm's all_reduce, plus
//           all_gather z [tokens·hidden] twice (g forward, and the re-gather of z for dW1 in
//           the column-parallel backward), reduce_scatter dz [tokens·hidden] (g backward),
//           reduce_scatter y [tokens·hidden] (ḡ forward), all_gather dy [tokens·hidden]
//           (ḡ backward)
std::vector<DeclaredCall> norm_declared_traffic(const NormCase& c);

}  // namespace shardcheck::check
