// One generated case of the linear suite: the layer, its options, the shapes, the world and the
// splits, and the global tensors. Everything is drawn on the main thread before any rank runs.
#pragma once

#include "engine/steps.hpp"
#include "engine/suite.hpp"
#include "generators/values.hpp"
#include "ops/linear/linear.hpp"
#include "ops/linear/linear_spec.hpp"
#include "reference/bounds.hpp"
#include "suites/linear/linear_impl.hpp"
#include "tensor/tensor.hpp"

#include <rapidcheck.h>

#include <optional>
#include <string>

namespace shardcheck::check {

enum class LinearLayer { column_parallel, row_parallel };

inline std::string to_string(LinearLayer l) {
  return l == LinearLayer::column_parallel ? "column_parallel_linear" : "row_parallel_linear";
}

struct LinearCase {
  LinearLayer layer = LinearLayer::column_parallel;
  DType dtype = DType::float32;
  int world = 1;
  std::size_t tokens = 1, in = 1, out = 1;
  bool has_bias = true;
  ColumnParallelConfig column;  // used when layer == column_parallel
  RowParallelConfig row;        // used when layer == row_parallel
  gen::Profile profile = gen::Profile::unit;
  // The accumulator the bounds assume (reference/bounds.hpp, Arithmetic): acc_t<T> when unset;
  // a case on disk may declare another ("accumulate", compare/compare.hpp).
  std::optional<DType> accumulate;
  // Where y's bias is added (reference/bounds.hpp, BiasPlacement): after the cross-rank sum in
  // T, the library's contract and the suite's; a case on disk may declare "fused_bias" (the bias
  // inside one rank's accumulation), and without a contract covers both (linear_compare.cpp).
  reference::BiasPlacement bias_placement = reference::BiasPlacement::after_sum;

  // "tokens=5 in=7 out=4 P=3 out_split=explicit[2,0,2] bias gather_output profile=wide"
  std::string describe() const;
  // The split of the sharded feature dimension (out for column, in for row).
  const SplitPolicy& feature_split() const {
    return layer == LinearLayer::column_parallel ? column.out_split : row.in_split;
  }
  std::size_t feature_dim() const { return layer == LinearLayer::column_parallel ? out : in; }
  bool sequence_parallel() const {
    return layer == LinearLayer::column_parallel ? column.sequence_parallel_input
                                                 : row.sequence_parallel_output;
  }
  const SplitPolicy& token_split() const {
    return layer == LinearLayer::column_parallel ? column.token_split : row.token_split;
  }
};

// Shape of the draw, for properties that pin some of it.
struct LinearCaseOptions {
  std::optional<LinearLayer> layer;
  std::optional<int> world;             // e.g. 1 for "row-parallel with P = 1"
  std::optional<gen::Profile> profile;  // e.g. special for the NaN/Inf property
  std::optional<Kernel> kernel;         // deterministic for the exactness properties
};

// The global tensors of a case: x [tokens, in], w [out, in], b [out] (or empty), dy [tokens, out].
template <class T>
struct LinearData {
  Tensor<T> x, w, b, dy;
};

// What the linear suite expects of a case: the exact values of y, dx, dw and db in high
// precision, each with its elementwise a-priori bound for the case's element type, splits and
// world size (the derivations are in reference/bounds.hpp and docs/tolerances.md).
struct LinearExpected {
  ExpectedTensor y, dx, dw, db;  // db empty without bias
};

// The bound of each element is the one of the rounding scheme the op's contract allows
// (lib/ops/linear/linear.hpp): which products share a rank (a partial dot product, rounded to T),
// how many partials are reduced in T, and the bias added once in T.
//   column_parallel  y: dense dot over in, + bias      dx: p partial dots over out_split
//                    dw, db: dense sums over tokens
//   row_parallel     y: p partial dots over in_split, + bias once
//                    dx: dense dot over out            dw, db: dense sums over tokens

// The outputs of a case, named once: fn(name, its member in a rank's outputs, its member in the
// expected values) for y, dx, dw and, with bias, db. The suite checks them (check_outputs, by the
// engine's check_listed_outputs) and `shardcheck compare` reads them (linear_compare.cpp).
template <class T, class Fn>
void for_each_output(const LinearCase& c, Fn&& fn) {
  using O = LinearRankOutputs<T>;
  using E = LinearExpected;
  fn("y", &O::y, &E::y);
  fn("dx", &O::dx, &E::dx);
  fn("dw", &O::dw, &E::dw);
  if (c.has_bias) fn("db", &O::db, &E::db);
}

template <class T>
using LinearRun = RankRun<LinearRankOutputs<T>>;

// Its steps (engine/steps.hpp):
// The op's spec for this case: its tensors' placements (by which the inputs are cut and the
// outputs materialized) and its collectives (ops/linear/linear_spec.hpp).
//
// Every output of `run` materialized by its spec's placement and checked against `e`, appended
// to v (linear_suite.cpp; `shardcheck compare` calls it too, compare/compare.hpp).
SHARDCHECK_DECLARE_RANK_STEPS(LinearImplementation, LinearCase, LinearCaseOptions, LinearData,
                              LinearRun, LinearExpected)

}  // namespace shardcheck::check
