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
  // The named mesh axes above size 1 when the op's mesh has several ("pp", "cp" of the model's
  // pp × dp × cp × tp); empty for one group. The collector keeps each tensor's worst per axis.
  std::vector<std::string> mesh_axes;

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

// How clearly `v` fails: the largest bound ratio of its tensors when every failure is a value
// over its bound (a number a reader must weigh against noise), +inf when anything else failed
// (a NaN/Inf mismatch, a wrong shape, ranks that disagree, an exception, any non-tensor check);
// 0 when it passes.
double failure_clarity(const CaseVerdict& v);

// Shrinking that ends clear. RapidCheck keeps the first smaller candidate that still fails, and
// value shrinking pushes a numeric failure to the edge of its bound (1.001x it), where a reader
// cannot tell a bug from noise. While one is open (the runner opens one per property run), the
// first failing case sets floor = min(2, its failure_clarity); from then on (shrinking) a
// candidate whose failure_clarity is below the floor counts as passing, so the reported
// counterexample is the smallest one that fails at least that clearly. Sound: every reported
// counterexample fails, and a property fails exactly when it did without this. Main thread only
// (cases are concluded there).
class ShrinkClarity {
 public:
  ShrinkClarity();
  ~ShrinkClarity();
  ShrinkClarity(const ShrinkClarity&) = delete;
  ShrinkClarity& operator=(const ShrinkClarity&) = delete;
  ShrinkClarity(ShrinkClarity&&) = delete;
  ShrinkClarity& operator=(ShrinkClarity&&) = delete;
  static ShrinkClarity* active();

  bool failed = false;  // a case failed (shrinking is under way)
  double floor = 0;     // min(2, the first failure's clarity)

 private:
  ShrinkClarity* previous_;  // the one open before (nested runs restore it)
};

// Records `v` to the active collector (if any), tags the RapidCheck case with the world size,
// dtype and op, and fails the case (RC_FAIL) with v.explain() when it does not pass (and, while
// a ShrinkClarity is open and shrinking, fails at least as clearly as its floor).
void conclude(const CaseVerdict& v);

}  // namespace shardcheck::check
