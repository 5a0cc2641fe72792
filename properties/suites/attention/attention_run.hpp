// Running an attention case on the ranks: each rank's inputs cut from the global tensors (its
// cp positions; the dense weights), the implementation run on the (cp, tp) mesh, and the
// traffic each rank's op declares.
#pragma once

#include "engine/traffic.hpp"
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
AttentionRun<T> run_attention(const AttentionImplementation& impl, const AttentionCase& c,
                              const AttentionData<T>& d);

// The collectives world rank r declares for one forward and backward (element counts):
//   core, ring        ring_shift of its current K/V chunk (T) at steps 0..cp−2; backward the
//                     same again plus ring_shift of dK/dV (A) at steps 0..cp−1 (cp = 1: none)
//   core, all_gather  all_gather of K and of V (T) forward and again backward, reduce_scatter of
//                     dK and dV (A)
//   layer             all_reduce of y and of dx over tp (batch·L_r·hidden of T); g < tp: one
//                     all_reduce over the kv group of the kv projection's gradients; the core's
//                     traffic over cp when cp is configured; cp > 1: one all_reduce over cp of
//                     every parameter gradient but dbo (packed), then with biases one of dbo
std::vector<DeclaredCall> attention_declared_traffic(const AttentionCase& c, int world_rank);

}  // namespace shardcheck::check
