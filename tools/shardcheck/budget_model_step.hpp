// `shardcheck budget`'s whole-step rows: the library's model of one training step of the model
// (ops/model/model.hpp) on the budget's shape and mesh, every rank, the fullest one printed:
// the peak live activation bytes (budget/model_activations.hpp, which the model suite's budget
// test measures exactly) and the bytes one rank sends per mesh axis (budget/model_traffic.hpp,
// which the suite's traffic_per_mesh_axis property measures exactly).
#pragma once

#include "budget/traffic.hpp"

#include <cstdint>
#include <map>
#include <string>

namespace shardcheck::cli {

// The budget's shape, as whole numbers, and its mesh's pp, dp, cp, tp.
struct StepShape {
  double seq = 0, micro_batch = 0, hidden = 0, heads = 0, kv_heads = 0, layers = 0, vocab = 0;
  int pp = 1, dp = 1, cp = 1, tp = 1;
  int micro_batches = 1;  // per dp rank, GPipe
  bool sequence_parallel = false;
};

struct StepFigures {
  std::string skipped;  // non-empty: why there are no figures
  std::string model;    // "LayerNorm, GELU MLP [4h], ... 16 sequences of 2048 tokens"
  int ranks = 0;
  std::uint64_t peak = 0;  // the most activation bytes live at once on one rank
  int peak_rank = 0;
  std::string peak_coordinates;          // "pp=0 dp=0 cp=0 tp=0"
  std::string peak_at;                   // "backward of micro-batch 0, layer 3 (attention)"
  std::uint64_t kept_after_forward = 0;  // on that rank
  // Per mesh axis: the most bytes one rank sends over it and that rank's calls.
  std::map<std::string, budget::CollectiveTotals> sent_per_axis;
  std::uint64_t sent_most = 0;  // the most bytes one rank sends in the step
};

// The figures of every rank, or `skipped` set when the shape is not a model the library runs
// (a fraction, heads not dividing hidden, more than max_step_ranks ranks, an op's usage error).
StepFigures model_step_figures(const StepShape& s, budget::ElementBytes e);

inline constexpr int max_step_ranks = 1024;

}  // namespace shardcheck::cli
