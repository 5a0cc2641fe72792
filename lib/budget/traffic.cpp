#include "budget/traffic.hpp"

#include "runtime/errors.hpp"

#include <string>

namespace shardcheck::budget {

Bytes collective_bytes(Collective op, int n, double S) {
  if (n < 1) throw UsageError("collective_bytes: n = " + std::to_string(n) + "; need n >= 1");
  // (n-1)·S/n rather than ((n-1)/n)·S: exact whenever n divides S.
  const double f = static_cast<double>(n - 1) * S / n;
  double per = 0;
  switch (op) {
    case Collective::all_reduce: per = 2 * f; break;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all: per = f; break;
    case Collective::broadcast:
    case Collective::reduce: per = n > 1 ? S : 0; break;
    default:
      throw UsageError("collective_bytes: " + std::string(name(op)) +
                       " has no ring factor; count its messages instead");
  }
  return {per, per * n};
}

LayerTraffic tensor_parallel_layer_traffic(double s, double b, double h, int tp,
                                           bool sequence_parallel, double element_bytes) {
  LayerTraffic t;
  const double S = s * b * h * element_bytes;
  if (sequence_parallel) {
    t.all_gathers = 4;
    t.reduce_scatters = 4;
    const auto ag = collective_bytes(Collective::all_gather, tp, S);
    t.bytes = {8 * ag.per_rank, 8 * ag.aggregate};
  } else {
    t.all_reduces = 4;
    const auto ar = collective_bytes(Collective::all_reduce, tp, S);
    t.bytes = {4 * ar.per_rank, 4 * ar.aggregate};
  }
  return t;
}

double cp_ring_step_bytes(double b, double s, int cp, double g, double d, double element_bytes) {
  return 2 * b * (s / cp) * g * d * element_bytes;
}

double cp_ring_forward_bytes(double b, double s, int cp, double g, double d, double element_bytes) {
  return (cp - 1) * cp_ring_step_bytes(b, s, cp, g, d, element_bytes);
}

Bytes vocab_cross_entropy_bytes(double tokens, int tp) {
  const auto one = collective_bytes(Collective::all_reduce, tp, tokens * 4);
  return {3 * one.per_rank, 3 * one.aggregate};
}

}  // namespace shardcheck::budget
