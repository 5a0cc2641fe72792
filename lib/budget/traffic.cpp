#include "budget/traffic.hpp"

#include "ops/attention/context_parallel_attention.hpp"
#include "ops/attention/head_parallel_attention.hpp"
#include "ops/linear/linear.hpp"
#include "ops/norm/norm.hpp"
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"
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

std::size_t at(int k, int p) { return static_cast<std::size_t>(wrap_rank(k, p)); }

std::vector<std::size_t> times(std::vector<std::size_t> v, std::size_t by) {
  for (auto& x : v) x *= by;
  return v;
}

void append(std::vector<LedgerCall>& to, const std::vector<LedgerCall>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

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

OpTraffic column_parallel_traffic(const ColumnParallelConfig& cfg, std::size_t tokens,
                                  std::size_t in, std::size_t out, int p, int r, ElementBytes e) {
  OpTraffic t;
  const auto token_counts = times(split_sizes(cfg.token_split, tokens, p), in);
  if (cfg.sequence_parallel_input) t.forward.push_back(all_gather_call(token_counts, e.value, r));
  if (cfg.gather_output) {
    const auto out_counts = times(split_sizes(cfg.out_split, out, p), tokens);
    t.forward.push_back(all_gather_call(out_counts, e.value, r));
  }
  if (cfg.sequence_parallel_input) {
    t.backward.push_back(all_gather_call(token_counts, e.value, r));
    t.backward.push_back(reduce_scatter_call(token_counts, e.value, r, cfg.all_reduce_algorithm));
  } else {
    t.backward.push_back(all_reduce_call(tokens * in, e.value, p, r, cfg.all_reduce_algorithm));
  }
  return t;
}

OpTraffic row_parallel_traffic(const RowParallelConfig& cfg, std::size_t tokens, std::size_t in,
                               std::size_t out, int p, int r, ElementBytes e) {
  OpTraffic t;
  const auto token_counts = times(split_sizes(cfg.token_split, tokens, p), out);
  if (cfg.sequence_parallel_output) {
    t.forward.push_back(reduce_scatter_call(token_counts, e.value, r, cfg.reduce_algorithm));
    t.backward.push_back(all_gather_call(token_counts, e.value, r));
  } else {
    t.forward.push_back(all_reduce_call(tokens * out, e.value, p, r, cfg.reduce_algorithm));
  }
  if (!cfg.input_is_parallel) {
    const auto in_counts = times(split_sizes(cfg.in_split, in, p), tokens);
    t.backward.push_back(all_gather_call(in_counts, e.value, r));
  }
  return t;
}

OpTraffic sp_norm_traffic(const SequenceParallelNormConfig& cfg, std::size_t hidden, int p, int r,
                          ElementBytes e) {
  OpTraffic t;
  const std::size_t n = has_beta(cfg.norm.kind) ? 2 * hidden : hidden;
  t.backward.push_back(all_reduce_call(n, e.value, p, r, cfg.reduce_algorithm));
  return t;
}

OpTraffic sp_block_traffic(const SequenceParallelNormConfig& norm, std::size_t hidden,
                           std::size_t ffn, const SplitPolicy& ffn_split, int p, int r,
                           ElementBytes e) {
  const auto n = sp_norm_traffic(norm, hidden, p, r, e);
  const auto c = column_parallel_traffic(sp_block_column_config(norm, ffn, ffn_split), norm.tokens,
                                         hidden, ffn, p, r, e);
  const auto w =
      row_parallel_traffic(sp_block_row_config(norm, ffn_split), norm.tokens, ffn, hidden, p, r, e);
  OpTraffic t;
  append(t.forward, n.forward);
  append(t.forward, c.forward);
  append(t.forward, w.forward);
  append(t.backward, w.backward);
  append(t.backward, c.backward);
  append(t.backward, n.backward);
  return t;
}

OpTraffic vocab_embedding_traffic(const VocabEmbeddingConfig& cfg, std::size_t tokens,
                                  std::size_t hidden, int p, int r, ElementBytes e) {
  OpTraffic t;
  if (cfg.sequence_parallel_output) {
    const auto counts = times(split_sizes(cfg.token_split, tokens, p), hidden);
    t.forward.push_back(reduce_scatter_call(counts, e.value, r, cfg.reduce_algorithm));
    t.backward.push_back(all_gather_call(counts, e.value, r));
  } else {
    t.forward.push_back(all_reduce_call(tokens * hidden, e.value, p, r, cfg.reduce_algorithm));
  }
  return t;
}

OpTraffic vocab_cross_entropy_traffic(const VocabCrossEntropyConfig& cfg, std::size_t tokens, int p,
                                      int r, ElementBytes e) {
  OpTraffic t;
  const std::size_t k = cfg.label_smoothing > 0 ? 3 : 2;
  t.forward.push_back(all_reduce_call(tokens, e.acc, p, r, cfg.reduce_algorithm));
  t.forward.push_back(all_reduce_call(k * tokens, e.acc, p, r, cfg.reduce_algorithm));
  return t;
}

std::vector<std::size_t> cp_lengths(const ContextParallelConfig& cc, int p) {
  if (cc.layout == CpLayout::contiguous) return split_sizes(cc.split, cc.seq_len, p);
  const auto chunks = split_sizes(cc.split, cc.seq_len, 2 * p);
  std::vector<std::size_t> lens(static_cast<std::size_t>(p));
  for (std::size_t j = 0; j < lens.size(); ++j) lens[j] = chunks[j] + chunks[chunks.size() - 1 - j];
  return lens;
}

OpTraffic cp_attention_traffic(const AttentionConfig& cfg, const ContextParallelConfig& cc,
                               std::size_t batch, int p, int r, ElementBytes e) {
  OpTraffic t;
  const auto lens = cp_lengths(cc, p);
  const std::size_t row = cfg.kv_heads * cfg.head_dim;  // elements per position of k (or v)
  if (cc.algorithm == CpAlgorithm::all_gather) {
    const auto counts = times(lens, batch * row);
    for (int i = 0; i < 2; ++i) t.forward.push_back(all_gather_call(counts, e.value, r));
    for (int i = 0; i < 2; ++i) t.backward.push_back(all_gather_call(counts, e.value, r));
    for (int i = 0; i < 2; ++i) t.backward.push_back(reduce_scatter_call(counts, e.acc, r));
    return t;
  }
  // The chunk rank j's K and V make: 2·batch·L_j·g·d elements; at step s this rank holds the
  // chunk of rank (r − s) mod p.
  auto chunk = [&](int s) { return 2 * batch * lens[at(r - s, p)] * row; };
  for (int s = 0; s + 1 < p; ++s) {
    t.forward.push_back(ring_shift_call(chunk(s), chunk(s + 1), e.value, p));
  }
  for (int s = 0; s < p && p > 1; ++s) {
    if (s + 1 < p) t.backward.push_back(ring_shift_call(chunk(s), chunk(s + 1), e.value, p));
    t.backward.push_back(ring_shift_call(chunk(s), chunk(s + 1), e.acc, p));
  }
  return t;
}

OpTraffic head_layer_traffic(const HeadParallelConfig& cfg, std::size_t batch, int tp, int tp_rank,
                             int cp, int cp_rank, ElementBytes e) {
  const HeadAssignment a = head_assignment(cfg, tp, tp_rank);
  const std::size_t d = cfg.attention.head_dim, hidden = cfg.hidden;
  const std::size_t len = cfg.context_parallel ? cp_lengths(*cfg.context_parallel,
                                                            cp)[static_cast<std::size_t>(cp_rank)]
                                               : cfg.attention.mask.q_len;
  const std::size_t n = batch * len;
  OpTraffic t;
  OpTraffic core;
  if (a.q_count > 0 && cfg.context_parallel) {
    AttentionConfig local = cfg.attention;
    local.q_heads = a.q_count;
    local.kv_heads = a.kv_count;
    core = cp_attention_traffic(local, *cfg.context_parallel, batch, cp, cp_rank, e);
  }
  append(t.forward, core.forward);
  t.forward.push_back(all_reduce_call(n * hidden, e.value, tp, tp_rank, cfg.reduce_algorithm));
  append(t.backward, core.backward);
  t.backward.push_back(all_reduce_call(n * hidden, e.value, tp, tp_rank, cfg.reduce_algorithm));
  const std::size_t hq = a.q_count * d, hkv = a.kv_count * d;
  if (a.kv_replicas > 1) {
    const std::size_t elems = 2 * hkv * hidden + (cfg.has_bias ? 2 * hkv : 0);
    t.backward.push_back(all_reduce_call(elems, e.value, a.kv_replicas, tp_rank - a.kv_group_first,
                                         cfg.reduce_algorithm));
  }
  if (cfg.context_parallel && cp > 1) {
    const std::size_t elems =
        hq * hidden + 2 * hkv * hidden + hidden * hq + (cfg.has_bias ? hq + 2 * hkv : 0);
    t.backward.push_back(all_reduce_call(elems, e.value, cp, cp_rank, cfg.reduce_algorithm));
    if (cfg.has_bias) {  // dbo, replicated over tp, alone: the same layout on every tp rank
      t.backward.push_back(all_reduce_call(hidden, e.value, cp, cp_rank, cfg.reduce_algorithm));
    }
  }
  return t;
}

}  // namespace shardcheck::budget
