// The specs of column_parallel_linear and row_parallel_linear (ops/op_spec.hpp): their
// tensors and placements over the tp group, each rank's collectives, what the caller keeps for
// the backward. The layers themselves: linear.hpp.
//
//   column_parallel_linear  x [tokens, in]  S(0)[token_split] with sequence_parallel_input,
//                                           else R
//                           w [out, in], b [out]  S(0)[out_split]
//                           y [tokens, out] R with gather_output, else S(1)[out_split]
//     forward   all_gather x (sequence_parallel_input), all_gather y (gather_output)
//     backward  all_gather x again for dW and reduce_scatter dx (sequence_parallel_input: Megatron
//               keeps only the shard; Korthikanti et al. 2022 count 4 all_gathers per layer for
//               it), else all_reduce dx
//   row_parallel_linear     x [tokens, in]  S(1)[in_split] with input_is_parallel, else R
//                           w [out, in]  S(1)[in_split]; b [out] R (added once, after the sum)
//                           y [tokens, out] S(0)[token_split] with sequence_parallel_output,
//                           else R
//     forward   reduce_scatter y (sequence_parallel_output), else all_reduce y
//     backward  all_gather dy (sequence_parallel_output); all_gather dx without
//               input_is_parallel (each rank computed its columns of dx)
// With p = 1 the same calls are made (they move nothing). Gradients dy, dx, dw, db are placed
// as y, x, w, b.
#pragma once

#include "ops/linear/linear.hpp"
#include "ops/op_spec.hpp"

#include <string>
#include <vector>

namespace shardcheck {

spec::OpSpec column_parallel_linear_spec(const ColumnParallelConfig& cfg, std::size_t tokens,
                                         std::size_t in, std::size_t out, bool has_bias, int p);
spec::OpSpec row_parallel_linear_spec(const RowParallelConfig& cfg, std::size_t tokens,
                                      std::size_t in, std::size_t out, bool has_bias, int p);

// The configurations' fields (ops/field_table.hpp), every field by its C++ name: what to_json
// writes and the compare reader reads.
SHARDCHECK_CONFIG_FIELDS(ColumnParallelConfig, out_features, tokens, out_split, gather_output,
                         sequence_parallel_input, token_split, all_reduce_algorithm, kernel);
SHARDCHECK_CONFIG_FIELDS(RowParallelConfig, in_split, input_is_parallel, sequence_parallel_output,
                         token_split, reduce_algorithm, kernel);

// Both layers at example configurations (uneven splits, sequence parallelism on and off).
std::vector<spec::OpSpec> linear_example_specs();

}  // namespace shardcheck
