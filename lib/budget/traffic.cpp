#include "budget/traffic.hpp"

#include "ops/attention/attention_spec.hpp"
#include "ops/linear/linear_spec.hpp"
#include "ops/mlp/mlp_spec.hpp"
#include "ops/norm/norm_spec.hpp"
#include "ops/vocab/vocab_spec.hpp"
#include "runtime/errors.hpp"
#include "runtime/wire_bytes.hpp"

#include <string>

namespace shardcheck::budget {

Bytes collective_bytes(Collective op, int n, double S) {
  if (n < 1) {
    throw UsageError("collective_bytes: n = " + std::to_string(n) +
                     " ranks; pass the group size n >= 1");
  }
  if (!wire::has_bus_factor(op)) {
    throw UsageError("collective_bytes: " + std::string(name(op)) +
                     " has no ring factor; count its messages instead");
  }
  const double per = wire::bus_bytes(op, n, S);
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

// ================================================================ per op, per rank, exact

ElementBytes element_bytes(DType t) {
  switch (t) {
    case DType::float64: return {8, 8};
    case DType::float32: return {4, 4};
    case DType::bfloat16:
    case DType::float16: return {2, 4};
    default: break;
  }
  throw UsageError("element_bytes: " + std::string(name(t)) +
                   " is not a floating-point type; pass float64, float32, bfloat16 or float16");
}

std::string LedgerCall::to_string() const {
  return std::string(name(op)) + " sent " + std::to_string(sent) + " recv " + std::to_string(recv);
}

namespace {

// The runtime's bytes for one call (runtime/wire_bytes.hpp) as a ledger entry.
LedgerCall call_of(Collective op, wire::WireBytes b) { return {op, b.sent, b.recv}; }

}  // namespace

LedgerCall all_reduce_call(std::uint64_t elements, std::uint64_t element_bytes, int p, int r,
                           Algorithm algo) {
  return call_of(Collective::all_reduce,
                 wire::all_reduce(elements, element_bytes, p, wrap_rank(r, p), algo));
}

LedgerCall all_gather_call(std::span<const std::size_t> counts, std::uint64_t element_bytes,
                           int r) {
  const int p = static_cast<int>(counts.size());
  return call_of(Collective::all_gather, wire::all_gather(counts, element_bytes, wrap_rank(r, p)));
}

LedgerCall reduce_scatter_call(std::span<const std::size_t> counts, std::uint64_t element_bytes,
                               int r, Algorithm algo) {
  const int p = static_cast<int>(counts.size());
  return call_of(Collective::reduce_scatter,
                 wire::reduce_scatter(counts, element_bytes, wrap_rank(r, p), algo));
}

// The ops shift their rings by one (ring attention).
LedgerCall ring_shift_call(std::uint64_t send_elements, std::uint64_t recv_elements,
                           std::uint64_t element_bytes, int p) {
  return call_of(Collective::ring_shift,
                 wire::ring_shift(send_elements, recv_elements, element_bytes, p, 1));
}

std::map<Collective, CollectiveTotals> totals(const std::vector<LedgerCall>& calls) {
  std::map<Collective, CollectiveTotals> out;
  for (const auto& c : calls) {
    auto& t = out[c.op];
    ++t.calls;
    t.sent += c.sent;
    t.recv += c.recv;
  }
  return out;
}

std::map<Collective, CollectiveTotals> totals(const Ledger& ledger) {
  std::map<Collective, CollectiveTotals> out;
  for (const auto& e : ledger.entries()) {
    if (out.count(e.op) != 0) continue;
    out[e.op] = {ledger.calls(e.op), ledger.bytes_sent(e.op), ledger.bytes_recv(e.op)};
  }
  return out;
}

namespace {

// Rank r's calls of an op's spec with the bytes of e: the spec is where each op's collectives
// are declared (ops/op_spec.hpp); the bytes are the runtime's (CallSpec::bytes).
OpTraffic traffic_of(const spec::OpSpec& s, int r, ElementBytes e) {
  OpTraffic t;
  for (const auto& c : s.calls.at(static_cast<std::size_t>(r))) {
    const auto b = c.bytes(c.elem == spec::Elem::value ? e.value : e.acc);
    (c.pass == spec::Pass::forward ? t.forward : t.backward).push_back({c.op, b.sent, b.recv});
  }
  return t;
}

}  // namespace

OpTraffic column_parallel_traffic(const ColumnParallelConfig& cfg, std::size_t tokens,
                                  std::size_t in, std::size_t out, int p, int r, ElementBytes e) {
  return traffic_of(column_parallel_linear_spec(cfg, tokens, in, out, false, p), r, e);
}

OpTraffic row_parallel_traffic(const RowParallelConfig& cfg, std::size_t tokens, std::size_t in,
                               std::size_t out, int p, int r, ElementBytes e) {
  return traffic_of(row_parallel_linear_spec(cfg, tokens, in, out, false, p), r, e);
}

OpTraffic sp_norm_traffic(const SequenceParallelNormConfig& cfg, std::size_t hidden, int p, int r,
                          ElementBytes e) {
  return traffic_of(sequence_parallel_norm_spec(cfg, hidden, p), r, e);
}

OpTraffic sp_block_traffic(const SequenceParallelNormConfig& norm, std::size_t hidden,
                           std::size_t ffn, const SplitPolicy& ffn_split, int p, int r,
                           ElementBytes e) {
  return traffic_of(sp_block_spec(norm, hidden, ffn, ffn_split, p), r, e);
}

OpTraffic vocab_embedding_traffic(const VocabEmbeddingConfig& cfg, std::size_t tokens,
                                  std::size_t hidden, int p, int r, ElementBytes e) {
  return traffic_of(vocab_parallel_embedding_spec(cfg, tokens, hidden, p), r, e);
}

OpTraffic vocab_cross_entropy_traffic(const VocabCrossEntropyConfig& cfg, std::size_t tokens, int p,
                                      int r, ElementBytes e) {
  return traffic_of(vocab_parallel_cross_entropy_spec(cfg, tokens, p), r, e);
}

OpTraffic cp_attention_traffic(const AttentionConfig& cfg, const ContextParallelConfig& cc,
                               std::size_t batch, int p, int r, ElementBytes e) {
  return traffic_of(context_parallel_attention_spec(cfg, cc, batch, p), r, e);
}

OpTraffic head_layer_traffic(const HeadParallelConfig& cfg, std::size_t batch, int tp, int tp_rank,
                             int cp, int cp_rank, ElementBytes e) {
  const int r = cfg.context_parallel ? cp_rank * tp + tp_rank : tp_rank;
  return traffic_of(attention_layer_spec(cfg, batch, cp, tp), r, e);
}

OpTraffic parallel_mlp_traffic(const MlpConfig& cfg, std::size_t tokens, std::size_t hidden,
                               bool has_bias, int p, int r, ElementBytes e) {
  return traffic_of(parallel_mlp_spec(cfg, tokens, hidden, has_bias, p), r, e);
}

}  // namespace shardcheck::budget
