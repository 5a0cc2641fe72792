#include "budget/activation_memory.hpp"

#include "runtime/errors.hpp"

namespace shardcheck::budget {

double attention_term(const TransformerShape& m) { return 5.0 * m.a * m.s / m.h; }

double korthikanti_activation_bytes(const TransformerShape& m, const ActivationOptions& o) {
  if (m.s <= 0 || m.b <= 0 || m.h <= 0 || m.a <= 0 || o.tp < 1) {
    throw UsageError("activation memory: s, b, h, a must be positive and tp at least 1 (got s=" +
                     std::to_string(m.s) + ", b=" + std::to_string(m.b) +
                     ", h=" + std::to_string(m.h) + ", a=" + std::to_string(m.a) +
                     ", tp=" + std::to_string(o.tp) + ")");
  }
  const double sbh = m.s * m.b * m.h;
  const double t = o.tp;
  const double attn = attention_term(m) / t;
  if (o.recompute == Recompute::full) return 2.0 * sbh;
  if (o.sequence_parallel) {
    return o.recompute == Recompute::selective ? sbh * 34.0 / t : sbh * (34.0 / t + attn);
  }
  const double kept = 10.0 + 24.0 / t;
  return o.recompute == Recompute::selective ? sbh * kept : sbh * (kept + attn);
}

std::string table2_row(const ActivationOptions& o) {
  if (o.recompute == Recompute::full) return "full recomputation";
  std::string row = o.tp > 1 ? "TP" : "no parallelism";
  if (o.tp > 1 && o.sequence_parallel) row += " + SP";
  if (o.recompute == Recompute::selective) row += " + selective recomputation";
  return row;
}

}  // namespace shardcheck::budget
