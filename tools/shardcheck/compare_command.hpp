// `shardcheck compare`: tolerance verdicts for an implementation outside this tree (PyTorch,
// JAX, Triton, CUDA) from cases it wrote to disk (docs/case-format.md, docs/compare.md).
//
//   shardcheck compare CASE... [--report DIR]
//
// Each CASE is a case directory (holding case.json), a manifest file, or a directory whose
// subdirectories are cases (taken in name order). Every case is read and judged before anything
// is printed or written: per tensor the verdict under the derived bound (bound ratio, ulps,
// NaN/Inf placement, the worst element with its owning rank and distance to the shard boundary,
// what assert_close's defaults would say), then one line per case and a summary.
#pragma once

#include "tools/shardcheck/command_line.hpp"

namespace shardcheck::cli {

// Exit status 0 when every tensor of every case passes, 1 when one fails, 2 on bad input (a
// malformed manifest or .npy, an unknown op or config field, a wrong shape or element type, a
// missing file: one line naming the file and the field; nothing is written).
Command compare_command();

}  // namespace shardcheck::cli
