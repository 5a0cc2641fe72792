// The MLP's configuration as the layer defines it: the data type the library (mlp.hpp), the
// reference (reference/mlp/) and the suite (properties/suites/mlp/) share, declared once. Data
// only, no op logic (the activation functions are evaluated by the library in acc_t<T> and,
// independently, by the reference in high precision; cmake/check_layering.cmake). How the ffn
// features and tokens are split over the ranks is the library's business: MlpConfig adds it.
#pragma once

#include "runtime/enum_names.hpp"

namespace shardcheck {

// gelu: x·Φ(x) (erf form); gelu_tanh: its tanh approximation; swiglu: silu(gate)·up, with fc1
// producing 2F rows (gate and up) instead of F (Hendrycks & Gimpel 2016; Shazeer 2020).
enum class Activation { gelu, gelu_tanh, swiglu };
SHARDCHECK_ENUM_NAMES(Activation, "gelu", "gelu_tanh", "swiglu");

}  // namespace shardcheck
