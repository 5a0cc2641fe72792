// What a suite expects of one tensor, and how the ranks' pieces of it are checked: the exact
// value in the reference's precision with its elementwise a-priori bound; the pieces are put
// back together by their placement (materialize) and compared (check_tensor).
#pragma once

#include "engine/tensor_check.hpp"
#include "engine/verdict.hpp"
#include "layout/materialize.hpp"
#include "reference/precision.hpp"
#include "runtime/errors.hpp"
#include "tensor/tensor.hpp"

#include <string>
#include <utility>
#include <vector>

namespace shardcheck::check {

struct ExpectedTensor {
  Tensor<reference::hp> value;
  Tensor<reference::hp> bound;
};

// Materializes `pieces` (one per rank) by `p` and checks the result against `x`. A piece of
// the wrong shape is not an exception but the check's `problem` (nothing compared), so the
// case fails with the rank and both shapes in words.
template <class T>
TensorCheck check_pieces(const std::string& name, const std::vector<Tensor<T>>& pieces,
                         const Placement& p, const ExpectedTensor& x, int world) {
  try {
    auto m = materialize(pieces, p, x.value.shape());
    return check_tensor<T>(name, m.global, x.value, x.bound, p, world,
                           std::move(m.divergent_ranks));
  } catch (const UsageError& err) {
    TensorCheck t;
    t.name = name;
    t.placement = p.to_string();
    t.dtype = dtype_of<T>;
    t.shape = x.value.shape();
    t.parts = world;
    t.problem = err.what();
    return t;
  }
}

// For the "replicated results are bit-identical" properties: every tensor whose ranks
// disagree in some bit becomes a failure, and the numeric checks are dropped (the property is
// about identity across ranks, not accuracy).
inline void keep_only_divergence(CaseVerdict& v) {
  for (auto& t : v.tensors) {
    if (!t.divergent_ranks.empty()) v.failures.push_back(t.explain());
  }
  v.tensors.clear();
}

}  // namespace shardcheck::check
