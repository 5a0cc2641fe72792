// One generated case of the norm suite: the op (the sequence-parallel norm alone, or Megatron's
// SP block around it), the norm's kind and eps, the shapes, the world, the splits and the global
// tensors. Everything is drawn on the main thread before any rank runs.
#pragma once

#include "engine/steps.hpp"
#include "engine/suite.hpp"
#include "generators/values.hpp"
#include "ops/norm/norm_spec.hpp"
#include "reference/norm/norm_bound.hpp"
#include "suites/norm/norm_impl.hpp"
#include "tensor/tensor.hpp"

#include <rapidcheck.h>

#include <optional>
#include <string>
#include <vector>

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
  // The evaluation orders the bound covers, xhat's and the variance's (empty: lib/ops/norm's
  // (x − mean)·rstd and two-pass variance, what the suite checks); a case on disk names its
  // contract (norm_compare.cpp).
  std::vector<reference::NormForm> forms;

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

// The global tensors: x [tokens, hidden], gamma [hidden], beta [hidden] or empty,
// dy [tokens, hidden]; for the block w1 [ffn, hidden] and w2 [hidden, ffn].
template <class T>
struct NormData {
  Tensor<T> x, gamma, beta, dy, w1, w2;
};

// What the norm suite expects of a case: the exact values of every output in high precision,
// each with its elementwise a-priori bound for the case's element type, token split and world
// size (reference/norm/norm.hpp and docs/norm.md derive them).
struct NormExpected {
  ExpectedTensor y, dx, dgamma, dbeta;  // dbeta empty without beta
  ExpectedTensor dw1, dw2;              // the block only
};

// norm:  reference::norm_expected with the token split as the parts of dgamma/dbeta.
// block: the same error propagation through the whole block (reference/norm/norm_bound.hpp's
// Propagator):
//        z = T(norm(x)); a = T(Σ_i z·W1) one dot over hidden in A; y = Σ_r T(Σ_{f in r} a·W2)
//        the ffn split's partial dots in A rounded to T and summed in T; backward da = T(dy·W2)
//        one dot over hidden; dz = Σ_r T(Σ_{f in r} da·W1) as y; dW1 = T(Σ_t da·z),
//        dW2 = T(Σ_t dy·a) (the full token sum on one rank); then the norm's backward with the
//        tracked dz as its upstream gradient (its error carried into dx, dgamma, dbeta).

// The outputs of a case, named once: fn(name, its member in a rank's outputs, its member in the
// expected values) for y, dx, dgamma, dbeta with beta, and for the block dw1 and dw2. The suite
// checks them (check_outputs, by the engine's check_listed_outputs) and `shardcheck compare` reads
// them (norm_compare.cpp, whose cases are the norm's).
template <class T, class Fn>
void for_each_output(const NormCase& c, Fn&& fn) {
  using O = BlockRankOutputs<T>;
  using E = NormExpected;
  fn("y", &O::y, &E::y);
  fn("dx", &O::dx, &E::dx);
  fn("dgamma", &O::dgamma, &E::dgamma);
  if (has_beta(c.kind())) fn("dbeta", &O::dbeta, &E::dbeta);
  if (c.op == NormOp::block) {
    fn("dw1", &O::dw1, &E::dw1);
    fn("dw2", &O::dw2, &E::dw2);
  }
}

// Both ops' outputs in one record (the norm leaves dw1/dw2 empty).
template <class T>
using NormRun = RankRun<BlockRankOutputs<T>>;

// Its steps (engine/steps.hpp):
// The op's spec for this case (sequence_parallel_norm or megatron_sp_block): its tensors'
// placements and its collectives (ops/norm/norm_spec.hpp).
//
// Every output of `run` (y, dx, dgamma, dbeta with beta; for the block also dw1, dw2)
// materialized by its spec's placement and checked against `e`, appended to v (norm_suite.cpp;
// `shardcheck compare` calls it too, compare/compare.hpp). run.outputs holds one entry per rank.
SHARDCHECK_DECLARE_RANK_STEPS(NormImplementation, NormCase, NormCaseOptions, NormData, NormRun,
                              NormExpected)

}  // namespace shardcheck::check
