// The spec of parallel_mlp (ops/op_spec.hpp), Megatron-LM's ParallelMLP: fc1
// column_parallel_linear, the activation on the rank's ffn features, fc2 row_parallel_linear
// (mlp.hpp's fc1_config and fc2_config; their calls are the linear specs',
// ops/linear/linear_spec.hpp). Over the tp group:
//   x, y, dy, dx [tokens, H]         S(0)[token_split] with sequence_parallel, else R
//   w_gate, w_up [F, H], b_gate, b_up [F] and their gradients   S(0)[ffn_split]; each rank
//                                    holds them fused as [w_gate_r; w_up_r] (swiglu; gelu has
//                                    no gate): split_fused_up, not a chunk of the concatenation
//   w_down [H, F]                    S(1)[ffn_split];  b_down [H]  R
//   forward   fc1 (all_gather x with sequence_parallel), fc2 (reduce_scatter y with
//             sequence_parallel, else all_reduce y)
//   backward  fc2 (all_gather dy with sequence_parallel), fc1 (all_gather x again and
//             reduce_scatter dx with sequence_parallel, else all_reduce dx)
#pragma once

#include "ops/mlp/mlp.hpp"
#include "ops/op_spec.hpp"

#include <string>
#include <vector>

namespace shardcheck {

// x [tokens, hidden]; cfg.ffn_features = F.
spec::OpSpec parallel_mlp_spec(const MlpConfig& cfg, std::size_t tokens, std::size_t hidden,
                               bool has_bias, int p);

// The configuration's fields (ops/field_table.hpp): what to_json writes and the compare reader
// reads.
SHARDCHECK_CONFIG_FIELDS(MlpConfig, activation, ffn_features, ffn_split, tokens, sequence_parallel,
                         token_split, reduce_algorithm, kernel);

std::vector<spec::OpSpec> mlp_example_specs();

}  // namespace shardcheck
