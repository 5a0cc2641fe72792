// A run manifest: run.json, a whole-run dump as a directory of cases recorded in dataflow order
// (a layer's forward and backward, or a whole training step; docs/case-format.md, "A whole
// run"). Each step is a case directory (case.json and its .npy files, read by
// case_manifest.hpp) holding that op's own inputs as the implementation saw them, so each op is
// judged on its own inputs and an error does not compound into the ops after it.
//
//   {
//     "shardcheck_run": 1,
//     "name": "llama block, step 3",            optional: the run's name in the report
//     "steps": ["00_embedding",                 case directories, relative to run.json's,
//               {"case": "01_attention",        in dataflow order; a step may carry a name
//                "name": "layer 0 attention"}],
//     "links": [{"from": "00_embedding",        optional: step `to`'s input `input` is step
//                "output": "y",                 `from`'s output `output` as the implementation
//                "to": "01_attention",          passed it on; compare checks it bit for bit
//                "input": "x"}]                 (docs/case-format.md, "Dataflow links")
//   }
//
// This file reads the run's JSON only; the cases are read and judged one by one by `shardcheck
// compare` (tools/shardcheck/compare_command.cpp), which names the first step that fails.
#pragma once

#include <string>
#include <vector>

namespace shardcheck::cases {

// The format version this build reads ("shardcheck_run": 1).
inline constexpr int run_format_version = 1;

struct RunStep {
  std::string dir;   // the case's directory: run.json's directory / the path as written
  std::string name;  // as written, or the path as written when the step has no name
};

// A dataflow link: step `to`'s input `input` is step `from`'s output `output`, handed on as it
// was (the same elements in row-major order, bit for bit; the shapes may differ, as a [b·L, H]
// output read as a [b, L, H] input).
struct RunLink {
  std::size_t from = 0;  // the producing step's index (0-based)
  std::string output;
  std::size_t to = 0;  // the consuming step's index, after `from`
  std::string input;
};

struct RunManifest {
  std::string file;  // run.json's path, for messages
  std::string name;  // "" when not given
  std::vector<RunStep> steps;
  std::vector<RunLink> links;  // in the order written
};

// Whether `dir` holds a run.json.
bool is_run_dir(const std::string& dir);

// Reads `path`: a directory holding run.json, or the file itself.
// @throws CaseError naming the file and the field: unreadable, malformed JSON, another format
// version, no steps, a step that is not a path or {"case", "name"}, an empty or absolute path,
// one that leaves the run's directory (".."), a step written twice, an unknown field; links
// that are not an array of {"from", "output", "to", "input"}, name a directory that is not a
// step, or run against the dataflow (`to` not after `from`). Whether the steps' cases give the
// tensors a link names is checked when the cases are read (compare/run_verdict.hpp).
RunManifest read_run_manifest(const std::string& path);
// The same from JSON text; `file` names it in errors and `dir` is where its paths point.
RunManifest parse_run_manifest(const std::string& json, const std::string& file,
                               const std::string& dir);

}  // namespace shardcheck::cases
