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

// Starts the verdict of one case: the case (`op`, `dtype`, `world`, `case_text`, the case in
// words) into `v`. When the implementation threw (`error`, its message, is not empty), that
// failure is the verdict: it is concluded here and begin_verdict returns false (the caller
// returns); otherwise true, and the caller goes on to its checks.
bool begin_verdict(CaseVerdict& v, std::string op, DType dtype, int world, std::string case_text,
                   const std::string& error = {});

// Records `v` to the active collector (if any), tags the RapidCheck case with the world size,
// dtype and op, and fails the case (RC_FAIL) with v.explain() when it does not pass.
void conclude(const CaseVerdict& v);

}  // namespace shardcheck::check
