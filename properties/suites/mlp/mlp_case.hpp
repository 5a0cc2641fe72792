// One generated case of the mlp suite: the activation, the shapes, the world, the ffn split,
// sequence parallelism and the global tensors. Everything is drawn on the main thread before any
// rank runs.
#pragma once

#include "engine/steps.hpp"
#include "engine/suite.hpp"
#include "generators/values.hpp"
#include "ops/mlp/mlp.hpp"
#include "ops/mlp/mlp_spec.hpp"
#include "suites/mlp/mlp_impl.hpp"
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
  // The accumulator of the projections' dots and sums (reference/bounds.hpp, Arithmetic):
  // acc_t<T> when unset; a case on disk may declare another ("accumulate", compare/compare.hpp).
  std::optional<DType> accumulate;

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

// The global tensors: x [tokens, H], the fused fc1 w_up [k·F, H] ([Wg; Wu] for swiglu) and b_up
// [k·F], w_down [H, F], b_down [H] (biases empty without bias), dy [tokens, H].
template <class T>
struct MlpData {
  Tensor<T> x, w_up, b_up, w_down, b_down, dy;
};

// What the mlp suite expects of a case: every output's exact value in high precision with its
// elementwise a-priori bound for the case's element type, ffn split and world size
// (reference/mlp/mlp_bound.hpp; the derivation is docs/mlp.md's "The bound").
struct MlpExpected {
  ExpectedTensor y, dx, dw_gate, dw_up, db_gate, db_up, dw_down, db_down;  // empty when absent
};

// The split contractions are fc2's forward (over the ranks' ffn features, reduced in T) and
// fc1's dx (over the ranks' gate and up features, reduced in T); every other dot is on one rank.

// The outputs of a case, named once: fn(name, its member in a rank's outputs, its member in the
// expected values) for y, dx, dw_up, dw_down, dw_gate with swiglu, and with bias the biases'
// gradients. The suite checks them (check_outputs, by the engine's check_listed_outputs) and
// `shardcheck compare` reads them (mlp_compare.cpp).
template <class T, class Fn>
void for_each_output(const MlpCase& c, Fn&& fn) {
  using O = MlpRankOutputs<T>;
  using E = MlpExpected;
  const bool swiglu = c.cfg.activation == Activation::swiglu;
  fn("y", &O::y, &E::y);
  fn("dx", &O::dx, &E::dx);
  if (swiglu) fn("dw_gate", &O::dw_gate, &E::dw_gate);
  fn("dw_up", &O::dw_up, &E::dw_up);
  fn("dw_down", &O::dw_down, &E::dw_down);
  if (c.has_bias) {
    if (swiglu) fn("db_gate", &O::db_gate, &E::db_gate);
    fn("db_up", &O::db_up, &E::db_up);
    fn("db_down", &O::db_down, &E::db_down);
  }
}

template <class T>
using MlpRun = RankRun<MlpRankOutputs<T>>;

// Its steps (engine/steps.hpp):
// The op's spec for this case: its tensors' placements and its collectives
// (ops/mlp/mlp_spec.hpp).
//
// Every output of `run` (y, dx, dw_up, dw_down; dw_gate with swiglu; the biases' gradients with
// bias) materialized by its spec's placement and checked against `e`, appended to v
// (mlp_suite.cpp; `shardcheck compare` calls it too, compare/compare.hpp). run.outputs holds one
// entry per rank.
SHARDCHECK_DECLARE_RANK_STEPS(MlpImplementation, MlpCase, MlpCaseOptions, MlpData, MlpRun,
                              MlpExpected)

}  // namespace shardcheck::check
