// One generated case of the mlp suite: the activation, the shapes, the world, the ffn split,
// sequence parallelism and the global tensors. Everything is drawn on the main thread before any
// rank runs.
#pragma once

#include "engine/suite.hpp"
#include "generators/values.hpp"
#include "ops/mlp/mlp.hpp"
#include "tensor/tensor.hpp"

#include <rapidcheck.h>

#include <optional>
#include <string>

namespace shardcheck::check {

struct MlpCase {
  DType dtype = DType::float32;
  int world = 1;
  std::size_t tokens = 1, hidden = 1;  // ffn = cfg.ffn_features
  bool has_bias = true;
  MlpConfig cfg;  // activation, ffn size and split, sequence parallelism, reduction, kernel
  gen::Profile profile = gen::Profile::unit;

  std::size_t ffn() const { return cfg.ffn_features; }
  // "swiglu tokens=5 hidden=7 ffn=4 P=3 ffn_split=explicit[2,0,2] sequence_parallel ..."
  std::string describe() const;
};

// What a property pins of the draw.
struct MlpCaseOptions {
  std::optional<Activation> activation;
  std::optional<int> world;
  std::optional<bool> sequence_parallel;
};

rc::Gen<MlpCase> gen_case(const RunConfig& config, const MlpCaseOptions& options);

// The global tensors: x [tokens, H], the fused fc1 w_up [k·F, H] ([Wg; Wu] for swiglu) and b_up
// [k·F], w_down [H, F], b_down [H] (biases empty without bias), dy [tokens, H].
template <class T>
struct MlpData {
  Tensor<T> x, w_up, b_up, w_down, b_down, dy;
};

template <class T>
rc::Gen<MlpData<T>> gen_data(const MlpCase& c);

}  // namespace shardcheck::check
