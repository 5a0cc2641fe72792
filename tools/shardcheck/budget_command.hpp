// `shardcheck budget`: the memory and traffic table of one configuration (lib/budget/).
//
//   shardcheck budget [--seq S] [--batch B] [--hidden H] [--heads A] [--kv-heads G]
//                     [--layers L] [--vocab V] [--mesh pp=1,dp=1,cp=1,tp=8] [--bytes 2]
//                     [--sp] [--recompute none|selective|full] [--json]
//
// Defaults: GPT-3 175B (S 2048, H 12288, A 96, L 96, V 51200), one micro-batch, tp = 8,
// 2-byte values. Prints per-layer activation bytes (Korthikanti et al. 2022, Table 2, every
// row and the selected one), parameter bytes per rank and their replica counts on the mesh,
// and per-layer traffic (per rank and aggregate) for tensor, sequence and context parallelism
// and the vocabulary-parallel cross-entropy.
#pragma once

#include "tools/shardcheck/command_line.hpp"

namespace shardcheck::cli {

// The command's table (command_line.hpp). Its options throw UsageError (one line) for a bad
// value: a number that is not positive, a --mesh item that is not name=size with a whole size
// from 1 to 2^20 (or a mesh DeviceMesh rejects), a --recompute other than none, selective, full.
// Exit status 0.
Command budget_command();

}  // namespace shardcheck::cli
