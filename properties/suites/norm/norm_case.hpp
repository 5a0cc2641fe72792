// One generated case of the norm suite: the op (the sequence-parallel norm alone, or Megatron's
// SP block around it), the norm's kind and eps, the shapes, the world, the splits and the global
// tensors. Everything is drawn on the main thread before any rank runs.
#pragma once

#include "engine/suite.hpp"
#include "generators/values.hpp"
#include "suites/norm/norm_impl.hpp"
#include "tensor/tensor.hpp"

#include <rapidcheck.h>

#include <optional>
#include <string>

namespace shardcheck::check {

enum class NormOp { norm, block };

inline std::string to_string(NormOp o) {
  return o == NormOp::norm ? "sequence_parallel_norm" : "megatron_sp_block";
}

struct NormCase {
  NormOp op = NormOp::norm;
  DType dtype = DType::float32;
  int world = 1;
  std::size_t hidden = 1;
  BlockConfig block;  // block.norm is the norm's configuration for either op
  gen::Profile profile = gen::Profile::unit;

  const SequenceParallelNormConfig& norm() const { return block.norm; }
  std::size_t tokens() const { return block.norm.tokens; }
  NormKind kind() const { return block.norm.norm.kind; }
  // "layer_norm tokens=5 hidden=7 P=3 token_split=explicit[2,0,3] eps=1e-05 ..."
  std::string describe() const;
};

struct NormCaseOptions {
  std::optional<NormOp> op;
  std::optional<int> world;
  std::optional<int> min_world;
};

rc::Gen<NormCase> gen_case(const RunConfig& config, const NormCaseOptions& options);

// The global tensors: x [tokens, hidden], gamma [hidden], beta [hidden] or empty,
// dy [tokens, hidden]; for the block w1 [ffn, hidden] and w2 [hidden, ffn].
template <class T>
struct NormData {
  Tensor<T> x, gamma, beta, dy, w1, w2;
};

template <class T>
rc::Gen<NormData<T>> gen_data(const NormCase& c);

}  // namespace shardcheck::check
