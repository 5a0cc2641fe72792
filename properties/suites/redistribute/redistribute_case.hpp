// The generated cases of the redistribute suite: a 1-D to 3-D device mesh (sizes 1 to 3, named
// from kMeshNames, at most RunConfig::max_world ranks), a global shape (1 to 3 dimensions, sizes
// 0 to 6), one source and one target placement per mesh dimension (R, S(d) under chunk, balanced
// or explicit sizes with zeros, P(op) with one reduce op per case), every pair a valid
// transition unless the property asks for an impossible one. Structure is drawn unscaled
// (generators/structure.hpp), so every mesh and transition has a fixed probability from the
// first case.
#pragma once

#include "engine/suite.hpp"
#include "layout/device_mesh.hpp"
#include "layout/placement.hpp"
#include "runtime/dtype.hpp"
#include "runtime/reduce_op.hpp"
#include "tensor/tensor.hpp"

#include <rapidcheck.h>

#include <cstddef>
#include <string>
#include <vector>

namespace shardcheck::check {

inline const char* const kMeshNames[] = {"pp", "dp", "cp", "tp"};

struct RedistributeCase {
  DeviceMesh mesh = DeviceMesh::line(1);
  Shape global;
  std::vector<Placement> from, to;
  ReduceOp op = ReduceOp::sum;  // of every Partial in the case
  DType dtype = DType::float64;
  // "[S(0), P(sum)] -> [R, S(1)] on (dp=2, tp=3), global [5, 4]"
  std::string describe() const;
};

// What a property draws.
enum class RedistributeDraw {
  // Any valid pair of layouts (genCase); values are small integers in float64 (exact).
  exact,
  // Shard and Replicate only (every Partial turned into R), in float64 with exact values.
  round_trip,
  // One mesh dimension of size >= 2 goes S -> P or P(a) -> P(b): a transition with no exact
  // meaning, in float64.
  impossible,
  // Shard and Replicate only, in the drawn element type, values of every binade and specials.
  data_movement,
  // One mesh dimension of size >= 2 goes from P(op) to R or S(d) (to P(op) one time in six), the
  // others any valid pair, in the drawn element type.
  reduction,
};

struct RedistributeOptions {
  RedistributeDraw draw = RedistributeDraw::exact;
};

rc::Gen<RedistributeCase> gen_case(const RunConfig& config, const RedistributeOptions& options);

// The number of Partial terms of `layout` (row-major over its Partial mesh dimensions, as
// lib/layout/materialize_mesh.hpp numbers them) and the term the rank at coordinates `co` holds.
std::size_t term_count(const DeviceMesh& mesh, const std::vector<Placement>& layout);
std::size_t term_of(const DeviceMesh& mesh, const std::vector<Placement>& layout,
                    const std::vector<int>& co);

}  // namespace shardcheck::check
