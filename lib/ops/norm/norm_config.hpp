// The norm's configuration: the data types the library (norm.hpp), the reference
// (reference/norm/) and the suite (properties/suites/norm/) share, declared once. Data only:
// enums and structs of fields, no op logic (the formulas of each kind are norm.hpp's contract,
// implemented by the library and, independently, by the reference; cmake/check_layering.cmake).
#pragma once

#include "runtime/enum_names.hpp"

namespace shardcheck {

// layer_norm: y = (x − mean)·rstd·gamma + beta (torch.nn.LayerNorm); layer_norm_no_bias: the
// same without beta (bias=False); rms_norm: y = x·rstd·gamma (torch.nn.RMSNorm). Only
// layer_norm has beta (and dbeta).
enum class NormKind { layer_norm, layer_norm_no_bias, rms_norm };
SHARDCHECK_ENUM_NAMES(NormKind, "layer_norm", "layer_norm_no_bias", "rms_norm");

struct NormConfig {
  NormKind kind = NormKind::layer_norm;
  double eps = 1e-5;  // converted to acc_t<T> before use; must be > 0
};

}  // namespace shardcheck
