// A whole run judged op by op (cases::RunManifest, docs/case-format.md "A whole run"): its
// steps' cases in dataflow order, each judged on its own inputs, and the first step that fails,
// with the tensor and the rank where it fails, and what passed before it. In a dump the first
// failure is where to look: an op after it may fail only because it was fed the failing op's
// output (compare judges each op on the inputs the implementation gave it, so a later op that
// passes did its own work right on what it got).
#pragma once

#include "cases/run_manifest.hpp"
#include "compare/compare.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace shardcheck::check {

struct RunResult {
  std::string file;                     // run.json
  std::string name;                     // the run's name ("" when run.json gives none)
  std::vector<std::string> step_names;  // one per step, in dataflow order
  std::vector<CompareResult> steps;     // each step's case, judged

  // A dataflow link checked: step `to`'s input against step `from`'s output as the case gives
  // it (materialized from its pieces as the op's verdict materialized it), element by element
  // in row-major order, bit for bit.
  struct LinkCheck {
    cases::RunLink link;
    std::string problem;  // "" when the input is the output; else what differs, in words
  };
  std::vector<LinkCheck> links;  // in run.json's order
  std::size_t broken_links() const;

  struct FirstFailure {
    std::size_t step = 0;  // 0-based
    std::string tensor;    // the first failing tensor in the op's order ("" for a non-tensor check)
    std::string where;     // "worst element [3, 1] on rank 2, 1.7 of the bound", or the problem
  };
  // The first step that fails, or nothing when every step passes. A step fails when its verdict
  // does, or when an input a link names is not the output it links to (then `tensor` is that
  // input, and `where` says what differs: the dump changed it between the ops).
  std::optional<FirstFailure> first_failure() const;
  std::size_t failed() const;  // how many steps fail
  // One line: "run block-3 (dump/run.json): 5 steps; steps 1-2 passed, the first failure is
  // step 3 of 5, layer 0 attention (dump/02_attn): attention_layer dwq: ...; after it 1 of 2
  // steps fail", or "run ...: every one of its 5 steps passed".
  std::string summary() const;
};

// Every step of the run judged, in its order, then its links; every case is read before any is
// judged, so bad input anywhere stops the run before a verdict. @throws cases::CaseError as
// compare_case, and naming run.json's link when its output is not among the producing case's
// outputs or its input not among the consuming case's inputs.
RunResult judge_run(const cases::RunManifest& m);

// Where tensor `t` of a failing case fails, in words: its layout problem, the ranks whose
// replicas diverge, or its worst element with the rank that owns it and its bound ratio.
std::string failure_place(const TensorCheck& t);

}  // namespace shardcheck::check
