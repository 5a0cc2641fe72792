// Running an attention case on the ranks: each rank's inputs cut from the global tensors (its
// cp positions; the dense weights), the implementation run on the (cp, tp) mesh, and the
// op spec (its tensors and each rank's collectives).
#pragma once

#include "engine/traffic.hpp"
#include "engine/verdict.hpp"
#include "ops/attention/attention_spec.hpp"
#include "runtime/ledger.hpp"
#include "suites/attention/attention_case.hpp"
#include "suites/attention/attention_impl.hpp"

#include <string>
#include <vector>

namespace shardcheck::check {

// What one rank returns: the op's outputs (the other op's stay empty).
template <class T>
struct AttentionRankOutputs {
  CoreRankOutputs<T> core;
  LayerRankOutputs<T> layer;
};

template <class T, class F>  // f(every member): the MPI case driver's bytes (engine/rank_bytes.hpp)
void fields(AttentionRankOutputs<T>& o, F&& f) {
  f(o.core, o.layer);
}

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

// The global key positions cp coordinate j holds (every position without CP), and its query
// positions (the same under self-attention; cp_query_positions when Lq ≠ Lk).
std::vector<std::size_t> positions_of(const AttentionCase& c, int cp_rank);
std::vector<std::size_t> query_positions_of(const AttentionCase& c, int cp_rank);

// Sequence parallelism (the layer's cfg.sequence_parallel): the token rows of each tp rank of cp
// coordinate j, the layer's token_split of the batch·L_j tokens of its cp piece.
std::vector<std::size_t> sp_row_counts(const AttentionCase& c, int cp_rank);

// World rank r's piece of a global [batch, L, hidden] tensor of the layer (x, dy; y, dx): its cp
// coordinate's positions [batch, L_j, hidden] (positions_of), or under sequence parallelism its
// tp coordinate's token rows of them flattened, [rows_r, hidden] (sp_row_counts: batch-major,
// sequence 0's positions, then sequence 1's, ...).
template <class T>
Tensor<T> layer_piece(const AttentionCase& c, const Tensor<T>& g, int world_rank);

template <class T>
AttentionRun<T> run_ranks(const AttentionImplementation& impl, const AttentionCase& c,
                          const AttentionData<T>& d);

// The op's spec for this case (context_parallel_attention over cp, or attention_layer on the
// (cp, tp) mesh): its tensors and each world rank's collectives
// (ops/attention/attention_spec.hpp). The inputs are cut by cp positions (positions_of), which
// the spec's shapes agree with (a zigzag piece is not one contiguous split).
spec::OpSpec op_spec(const AttentionCase& c);

// The layer's parameters by name ("wq"; its gradient is "dwq"), with their members in the
// weights and in the gradients, in the order wq, bq, wk, bk, wv, bv, wo, bo.
template <class T>
struct LayerParameter {
  const char* name;
  Tensor<T> AttentionLayerWeights<T>::*weight;
  Tensor<T> AttentionLayerGrads<T>::*grad;
};
template <class T>
std::vector<LayerParameter<T>> layer_parameters() {
  using W = AttentionLayerWeights<T>;
  using G = AttentionLayerGrads<T>;
  return {{"wq", &W::wq, &G::dwq}, {"bq", &W::bq, &G::dbq}, {"wk", &W::wk, &G::dwk},
          {"bk", &W::bk, &G::dbk}, {"wv", &W::wv, &G::dwv}, {"bv", &W::bv, &G::dbv},
          {"wo", &W::wo, &G::dwo}, {"bo", &W::bo, &G::dbo}};
}

struct AttentionExpected;  // attention_expected.hpp

// Every output of the case's op in `run` materialized and judged against `e`, one TensorCheck
// appended to v per tensor: the core's out, lse, dq, dk, dv (run.core by world rank, each piece
// the rank's positions, positions_of); the layer's y, dx (run.layer of tp coordinate 0 of each
// cp coordinate), dwq, dwo, dwk, dwv and, with biases, dbq, dbk, dbv (cp coordinate 0's
// shards: the rows, or wo's columns, of the tp rank's heads; one shard per kv group when g < tp)
// and dbo (every world rank, replicated). A piece of the wrong shape, or a missing one, is the
// tensor's problem (nothing compared), never an exception. Defined in attention_suite.cpp;
// shardcheck compare calls it too (attention_compare.cpp).
template <class T>
void check_outputs(CaseVerdict& v, const AttentionCase& c, const AttentionRun<T>& run,
                   const AttentionExpected& e);

}  // namespace shardcheck::check
