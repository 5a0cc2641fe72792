// Running an attention case on the ranks: each rank's inputs cut from the global tensors (its
// cp positions; the dense weights), the implementation run on the (cp, tp) mesh, and the
// op spec (its tensors and each rank's collectives).
#pragma once

#include "engine/traffic.hpp"
#include "ops/attention/attention_spec.hpp"
#include "runtime/ledger.hpp"
#include "suites/attention/attention_case.hpp"
#include "suites/attention/attention_impl.hpp"

#include <string>
#include <vector>

namespace shardcheck::check {

template <class T>
struct AttentionRun {
  std::vector<CoreRankOutputs<T>> core;    // by world rank (the core op)
  std::vector<LayerRankOutputs<T>> layer;  // by world rank (the layer op)
  std::vector<Ledger> ledgers;             // by world rank
  std::string error;                       // the implementation threw: nothing else is set
};

// The mesh (cp, tp): world rank = c_cp·tp + c_tp.
inline int tp_coord(const AttentionCase& c, int world_rank) { return world_rank % c.tp; }
inline int cp_coord(const AttentionCase& c, int world_rank) { return world_rank / c.tp; }

// The global positions cp coordinate j holds (every position without CP).
std::vector<std::size_t> positions_of(const AttentionCase& c, int cp_rank);

template <class T>
AttentionRun<T> run_ranks(const AttentionImplementation& impl, const AttentionCase& c,
                          const AttentionData<T>& d);

// The op's spec for this case (context_parallel_attention over cp, or attention_layer on the
// (cp, tp) mesh): its tensors and each world rank's collectives
// (ops/attention/attention_spec.hpp). The inputs are cut by cp positions (positions_of), which
// the spec's shapes agree with (a zigzag piece is not one contiguous split).
spec::OpSpec op_spec(const AttentionCase& c);

}  // namespace shardcheck::check
