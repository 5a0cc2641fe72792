// The vocabulary cross-entropy's configuration as the loss defines it: the data types the library
// (vocab_cross_entropy.hpp), the reference (reference/vocab/) and the suite
// (properties/suites/vocab/) share, declared once. Data only: enums and structs of fields, no op
// logic (the loss and its gradient are implemented by the library and, independently, by the
// reference; cmake/check_layering.cmake). How the vocabulary is split over the ranks and which
// all_reduce algorithm combines them is the library's business: VocabCrossEntropyConfig adds it.
#pragma once

#include "runtime/enum_names.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace shardcheck {

// none: loss [tokens]; sum: Σ_t loss_t; mean: the sum divided by D = Σ_{t non-ignored}
// ω_t·c_{y_t} (the non-ignored token count without weights; 0, with gradient 0, when D = 0).
enum class LossReduction { none, sum, mean };
SHARDCHECK_ENUM_NAMES(LossReduction, "none", "sum", "mean");

// The options of PyTorch's F.cross_entropy (ignore_index, label_smoothing over the global
// vocabulary, reduction, per-class `weight`) plus per-token weights.
struct CrossEntropyOptions {
  std::optional<std::int64_t> ignore_index = -100;  // targets equal to it: loss 0, gradient 0
  double label_smoothing = 0;                       // ε in [0, 1]
  LossReduction reduction = LossReduction::mean;
  std::vector<double> class_weight;  // PyTorch's `weight`: empty, or [V] (the full vector)
  std::vector<double> token_weight;  // per-token weights ω_t: empty, or [tokens]
};

}  // namespace shardcheck
