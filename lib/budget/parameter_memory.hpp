// Parameter bytes on a device mesh, kept apart from what multiplies them. A parameter is
// sharded over tp (its elements split, balanced, over the tp ranks) or replicated over tp,
// lives on one pipeline stage (the ranks whose pp coordinate is that stage), and is replicated
// over dp and cp. So, with the mesh's dimensions named pp, dp, cp, tp (any may be absent, size
// 1 then):
//   per-rank bytes   = sum over the parameters on the rank's stage of its tp piece (or all of it)
//   replica count    = dp · cp, times tp when not tp-sharded
//   sum over ranks of per-rank bytes = sum over parameters of bytes × replica count
// (Megatron-LM's theoretical memory estimate counts the same way.)
#pragma once

#include "layout/device_mesh.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace shardcheck::budget {

struct ParameterTensor {
  std::string name;  // "layers.3.mlp.fc1.weight"
  std::uint64_t elements = 0;
  bool tp_sharded = false;
  int pp_stage = 0;  // 0 <= pp_stage < pp
};

struct ParameterAccount {
  std::vector<std::uint64_t> bytes_per_rank;  // by mesh rank
  std::vector<int> replicas;                  // by parameter
  std::uint64_t model_bytes = 0;              // every parameter once
};

// @throws UsageError when a parameter's stage is outside the mesh's pp dimension.
ParameterAccount account_parameters(const std::vector<ParameterTensor>& params,
                                    const DeviceMesh& mesh, std::uint64_t element_bytes);

// The parameters of a GPT-style model: per layer the QKV and output projections and the two
// MLP matrices (tp-sharded, with biases) and two LayerNorms (replicated), the word embedding
// (tp-sharded over the vocabulary) on the first stage; `layers` spread evenly over pp stages.
std::vector<ParameterTensor> gpt_parameters(std::uint64_t layers, std::uint64_t h,
                                            std::uint64_t vocab, int pp);

}  // namespace shardcheck::budget
