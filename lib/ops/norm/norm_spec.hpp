// The specs of sequence_parallel_norm and of Megatron-LM's sequence-parallel block around it
// (ops/op_spec.hpp). The ops: norm.hpp.
//
//   sequence_parallel_norm  x, y, dy, dx [tokens, hidden]  S(0)[token_split]
//                           gamma, beta, dgamma, dbeta [hidden]  R (beta with a bias only)
//     backward  one all_reduce of dgamma (and dbeta, in the same buffer: [2·hidden]) over the
//               sp group; the forward makes no collective
//   megatron_sp_block       the norm, then column_parallel_linear [hidden → ffn] with
//                           sequence_parallel_input, then row_parallel_linear [ffn → hidden]
//                           with sequence_parallel_output (norm.hpp's sp_block_*_config), no
//                           linear biases: w1 [ffn, hidden] S(0)[ffn_split], w2 [hidden, ffn]
//                           S(1)[ffn_split]; forward norm, column, row; backward row, column,
//                           norm (the linears' calls are their specs', ops/linear/linear_spec.hpp)
#pragma once

#include "ops/norm/norm.hpp"
#include "ops/op_spec.hpp"

#include <string>
#include <vector>

namespace shardcheck {

spec::OpSpec sequence_parallel_norm_spec(const SequenceParallelNormConfig& cfg, std::size_t hidden,
                                         int p);
spec::OpSpec sp_block_spec(const SequenceParallelNormConfig& norm, std::size_t hidden,
                           std::size_t ffn, const SplitPolicy& ffn_split, int p);

// The configuration's fields (ops/field_table.hpp), the norm's kind and eps written flat: what
// to_json writes and the compare reader reads.
template <>
struct ConfigFields<SequenceParallelNormConfig> {
  using C = SequenceParallelNormConfig;
  static constexpr std::tuple fields =
      std::tuple_cat(std::tuple{config_field("kind", &C::norm, &NormConfig::kind),
                                config_field("eps", &C::norm, &NormConfig::eps)},
                     SHARDCHECK_FIELDS_OF(C, tokens, token_split, reduce_algorithm));
};

std::vector<spec::OpSpec> norm_example_specs();

}  // namespace shardcheck
