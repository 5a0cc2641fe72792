// A case manifest: case.json, the description of one case an outside implementation ran
// (docs/case-format.md; its JSON Schema is docs/case-format.schema.json). It names the op and
// its configuration exactly as the op's spec does (`shardcheck list --json`), the global sizes,
// the mesh, the element types, and the .npy files of the inputs (global tensors) and of the
// outputs and gradients (global, or one piece per rank).
//
//   {
//     "shardcheck_case": 1,
//     "op": "column_parallel_linear",
//     "config": {"out_split": {"kind": "balanced"}, ...},      the op's config, field by field
//     "sizes": {"tokens": 7, "in": 4, "out": 5},
//     "mesh": {"tp": 3},
//     "dtype": "float32",                   float64, float32, bfloat16 or float16
//     "accumulate": "float32",              optional: the accumulator the kernel used
//     "contract": "fused_rstd_mean",        optional: the evaluation order the kernel follows,
//                                           one the op names (docs/compare.md, "Contract")
//     "inputs": {"x": "x.npy", "w": "w.npy", "dy": "dy.npy"},
//     "outputs": {"y": "y.npy",                                  a global tensor
//                 "dx": {"ranks": ["dx.0.npy", "dx.1.npy", "dx.2.npy"],   a piece per rank
//                        "placement": "S(0)"}},                  optional: as the spec says,
//                                                   or per dimension: "t(tp) h"
//     "implementation": "torch 2.1 cpu",    optional, free text for the report
//     "baseline": {"y": "y_ref.npy"},       optional: a trusted implementation's outputs
//     "baseline_implementation": "torch eager"
//   }
//
// This file reads the manifest's JSON and its structure only: which fields an op's config has,
// and what its tensors must look like, is the op's spec's business (properties/compare/).
// File paths are relative to the case's directory.
#pragma once

#include "cases/dim_placement.hpp"
#include "cases/json_fields.hpp"
#include "cases/npy.hpp"
#include "runtime/dtype.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::cases {

// The format version this build reads ("shardcheck_case": 1).
inline constexpr int case_format_version = 1;

// The file(s) of one tensor.
struct TensorFiles {
  std::string name;                // "dx"
  std::vector<std::string> files;  // one (global) or one per rank, paths as written in case.json
  bool per_rank = false;
  std::string placement;  // the placement the manifest declares for per-rank pieces, or empty
  // The same placement when it is written per dimension ("b s(cp,zigzag) h d",
  // cases/dim_placement.hpp), parsed; empty when it is in DTensor's words ("S(0)") or absent.
  std::optional<DimPlacement> dims;
};

struct CaseManifest {
  std::string dir;   // the case's directory (paths are relative to it)
  std::string file;  // the manifest's path, for messages: "cases/linear_ok/case.json"
  std::string op;    // "column_parallel_linear"
  Fields config;     // the op's config object
  std::vector<std::pair<std::string, std::size_t>> sizes;  // in the manifest's order
  std::vector<std::pair<std::string, std::size_t>> mesh;
  DType dtype = DType::float32;
  std::optional<DType> accumulate;
  std::string contract;  // "" when not given: the op's default contract
  // The contract's parameters when "contract" is an object ({"name": "exp2", "key_block": 128};
  // "name" read into `contract`, absent: the default): the op's compare family reads the ones it
  // knows and refuses the rest. Empty when "contract" is a string or absent.
  std::optional<Fields> contract_options;
  std::vector<TensorFiles> inputs, outputs;
  std::string implementation;
  // Optional: the same outputs from a trusted implementation in the same dtype (FlashAttention's
  // tests judge a kernel by its error relative to such a baseline's); each name is an output's.
  std::vector<TensorFiles> baseline;
  std::string baseline_implementation;
  // Not read from case.json: the outputs whose element values the caller wants kept in the
  // verdict (TensorCheck::values), as a run keeps its links' sources (compare/run_verdict.hpp).
  std::vector<std::string> keep_values;

  // The size called `name`. @throws CaseError naming the file and "sizes.<name>" when absent.
  std::size_t size(const std::string& name) const;
  // The world size: the product of the mesh's dimensions (1 for an empty mesh).
  int world() const;
  const TensorFiles* input(const std::string& name) const;   // nullptr when absent
  const TensorFiles* output(const std::string& name) const;  // nullptr when absent
  // The path of a file named in the manifest: dir/file.
  std::string path(const std::string& file) const;
};

// Reads `path`: a case directory (its case.json) or a manifest file.
// @throws CaseError naming the file and the field: unreadable file, malformed JSON (with the
// byte offset), a missing or unknown field, a value of the wrong type, an unknown dtype, a
// format version this build does not read, a per-rank output whose file count is not the world
// size.
CaseManifest read_case_manifest(const std::string& path);
// The same from JSON text; `file` names it in errors and `dir` is where its paths point.
CaseManifest parse_case_manifest(const std::string& json, const std::string& file,
                                 const std::string& dir);

// "float32" -> DType::float32 for the four floating types. @throws CaseError naming `where`.
DType parse_float_dtype(const std::string& name, const std::string& where);

}  // namespace shardcheck::cases
