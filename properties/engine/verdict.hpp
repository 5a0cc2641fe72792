// The verdict of one case: every tensor's comparison plus the other checks (traffic,
// exactness, exceptions), the case in words, and what to do with it: record it to the
// collector and fail the RapidCheck case with an explanation a user can act on.
#pragma once

#include "engine/tensor_check.hpp"
#include "runtime/dtype.hpp"

#include <string>
#include <vector>

namespace shardcheck::check {

struct CaseVerdict {
  std::string op;  // "column_parallel_linear"
  DType dtype = DType::float32;
  int world = 1;
  std::string case_text;  // shapes, P, splits, options, in words
  std::vector<TensorCheck> tensors;
  std::vector<std::string> failures;  // non-tensor checks that failed, each a sentence

  bool pass() const;
  // The case in words, then every failing check with its worst element.
  std::string explain() const;
};

// Records `v` to the active collector (if any), tags the RapidCheck case with the world size,
// dtype and op, and fails the case (RC_FAIL) with v.explain() when it does not pass.
void conclude(const CaseVerdict& v);

}  // namespace shardcheck::check
