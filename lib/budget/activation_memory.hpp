// Activation memory per transformer layer: the analytic model of Korthikanti et al. 2022,
// "Reducing Activation Recomputation in Large Transformer Models" (arXiv 2205.05198), Table 2.
// Bytes per layer for 16-bit activations and 1-byte dropout masks, with s the sequence length,
// b the micro-batch, h the hidden size, a the attention heads and t the tensor-parallel size:
//
//   no parallelism                     s·b·h·(34 + 5·a·s/h)
//   tensor parallel (TP)               s·b·h·(10 + 24/t + 5·a·s/(h·t))
//   TP + sequence parallel (SP)        s·b·h·(34/t + 5·a·s/(h·t))
//   TP + selective recomputation       s·b·h·(10 + 24/t)
//   TP + SP + selective recomputation  s·b·h·34/t
//   full recomputation                 2·s·b·h        (only the layer's input is kept)
//
// With t = 1 the TP rows give the no-parallelism row. The 5·a·s/h term is the attention
// softmax, its dropout mask and the dropout output, which selective recomputation drops; the
// paper's check values: 5as/h = 80 for GPT-3 175B (a = 96, s = 2048, h = 12288) and 64 for
// MT-NLG 530B (a = 128, h = 20480), so selective recomputation saves 80/114 = 70% and
// 64/98 = 65% of the activation memory.
#pragma once

#include "runtime/enum_names.hpp"

#include <string>
#include <string_view>

namespace shardcheck::budget {

struct TransformerShape {
  double s = 2048;   // sequence length
  double b = 1;      // micro-batch size
  double h = 12288;  // hidden size
  double a = 96;     // attention heads
};

enum class Recompute : unsigned char { none, selective, full };

}  // namespace shardcheck::budget

namespace shardcheck {
SHARDCHECK_ENUM_NAMES(budget::Recompute, "none", "selective", "full");
}  // namespace shardcheck

namespace shardcheck::budget {

using shardcheck::name;  // budget::name(recompute)

struct ActivationOptions {
  int tp = 1;                      // tensor-parallel size t
  bool sequence_parallel = false;  // SP (needs TP; with t = 1 it changes nothing)
  Recompute recompute = Recompute::none;
};

// The attention term 5·a·s/h.
double attention_term(const TransformerShape& m);

// Bytes of activations one layer keeps for backward, per tensor-parallel rank (Table 2).
// @throws UsageError when a size is not positive or tp < 1.
double korthikanti_activation_bytes(const TransformerShape& m, const ActivationOptions& o);

// "TP + SP + selective recomputation": the row of Table 2 the options select.
std::string table2_row(const ActivationOptions& o);

}  // namespace shardcheck::budget
