// The traffic of one training step of the model (ops/model/model.hpp) on one rank, per mesh
// axis: the calls the step's spec declares (ops/model/model_spec.hpp: model_train_step_calls)
// priced by the runtime's byte rules (CallSpec::bytes, runtime/wire_bytes.hpp), summed by the
// group each runs over:
//   tp              the ops' tensor-parallel collectives (attention, MLP, SP norms, vocab ends)
//   cp              the context-parallel core's (ring shifts of K, V and their gradients, or the
//                   all_gather of K, V)
//   kv_group        the tp ranks sharing a kv head (their dk, dv summed)
//   pp              the pipeline's send/recv of activations and their gradients
//   dp_cp           the finalize's gradient all_reduces and the loss's sum
//   embedding       a tied embedding's gradient summed over its first and last stage copies
//   model_parallel  the squared gradient norm over pp × tp
// The suite's traffic_per_mesh_axis property checks the measured ledger against it, rank by
// rank and axis by axis (properties/suites/model/model_check.cpp); `shardcheck budget` prints it.
#pragma once

#include "budget/traffic.hpp"
#include "ops/model/model.hpp"

#include <map>
#include <string>

namespace shardcheck::budget {

// Rank `world_rank`'s calls, bytes sent and received per group name, on a batch of `sequences`
// sequences of `seq_len` tokens. Elements of T are e.value bytes, acc_t<T> e.acc.
// @throws UsageError as the partition functions of model.hpp do.
std::map<std::string, CollectiveTotals> model_step_traffic(const ModelConfig& cfg,
                                                           const ModelParallelConfig& par,
                                                           std::size_t sequences,
                                                           std::size_t seq_len, int world_rank,
                                                           ElementBytes e);

}  // namespace shardcheck::budget
