#include "budget/library_activations.hpp"

#include "ops/attention/context_parallel_attention.hpp"
#include "ops/attention/head_parallel_attention.hpp"
#include "ops/linear/linear.hpp"
#include "ops/norm/norm.hpp"
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"

#include <numeric>

namespace shardcheck::budget {

std::uint64_t sum(const std::vector<Term>& terms) {
  std::uint64_t s = 0;
  for (const auto& t : terms) s += t.bytes;
  return s;
}

namespace {

using Moment = std::vector<Term>;  // the collective buffers live at one moment

// The first moment with the most bytes (none: no buffer).
std::vector<Term> peak_of(const std::vector<Moment>& moments) {
  std::vector<Term> best;
  std::uint64_t most = 0;
  for (const auto& m : moments) {
    if (sum(m) > most || (best.empty() && !m.empty() && sum(m) == most)) {
      most = sum(m);
      best = m;
    }
  }
  return best;
}

std::size_t piece(const SplitPolicy& policy, std::size_t n, int p, int r) {
  return split_sizes(policy, n, p)[static_cast<std::size_t>(r)];
}

std::string num(std::size_t n) { return std::to_string(n); }

}  // namespace

OpActivations column_parallel_activations(const ColumnParallelConfig& cfg, std::size_t tokens,
                                          std::size_t in, std::size_t out, int p, int r,
                                          ElementBytes e) {
  OpActivations a;
  const bool sp = cfg.sequence_parallel_input;
  const std::size_t mine = sp ? piece(cfg.token_split, tokens, p, r) : tokens;
  a.kept.push_back({sp ? "x [tokens_r, in] (token shard)" : "x [tokens, in]", mine * in * e.value});
  const Term gathered{"all_gathered x [tokens, in]", tokens * in * e.value};
  if (sp) a.forward_peak.push_back(gathered);
  if (cfg.gather_output) {
    a.forward_peak.push_back(
        {"all_gather_last_axis blocks of y [tokens, out]", tokens * out * e.value});
  }
  if (sp) {
    a.backward_peak = {gathered,
                       {"full dx [tokens, in] (reduce_scatter input)", tokens * in * e.value}};
  }
  return a;
}

OpActivations row_parallel_activations(const RowParallelConfig& cfg, std::size_t tokens,
                                       std::size_t in, std::size_t out, int p, int r,
                                       ElementBytes e) {
  OpActivations a;
  const std::size_t width = cfg.input_is_parallel ? piece(cfg.in_split, in, p, r) : in;
  a.kept.push_back({cfg.input_is_parallel ? "x [tokens, in_r] (feature shard)" : "x [tokens, in]",
                    tokens * width * e.value});
  if (cfg.sequence_parallel_output) {
    a.forward_peak.push_back(
        {"full partial y [tokens, out] (reduce_scatter input)", tokens * out * e.value});
    a.backward_peak.push_back({"all_gathered dy [tokens, out]", tokens * out * e.value});
  }
  if (!cfg.input_is_parallel) {
    a.backward_peak.push_back(
        {"all_gather_last_axis blocks of dx [tokens, in]", tokens * in * e.value});
  }
  return a;
}

OpActivations sp_norm_activations(const SequenceParallelNormConfig& cfg, std::size_t hidden, int p,
                                  int r, ElementBytes e) {
  OpActivations a;
  const std::size_t mine = piece(cfg.token_split, cfg.tokens, p, r);
  a.kept.push_back({"x [tokens_r, hidden]", mine * hidden * e.value});
  const bool beta = has_beta(cfg.norm.kind);
  a.backward_peak.push_back({beta ? "[dgamma | dbeta] all_reduce buffer [2·hidden]"
                                  : "[dgamma] all_reduce buffer [hidden]",
                             (beta ? 2 : 1) * hidden * e.value});
  return a;
}

OpActivations sp_block_activations(const SequenceParallelNormConfig& norm, std::size_t hidden,
                                   std::size_t ffn, const SplitPolicy& ffn_split, int p, int r,
                                   ElementBytes e) {
  const auto n = sp_norm_activations(norm, hidden, p, r, e);
  const auto c = column_parallel_activations(sp_block_column_config(norm, ffn, ffn_split),
                                             norm.tokens, hidden, ffn, p, r, e);
  const auto w = row_parallel_activations(sp_block_row_config(norm, ffn_split), norm.tokens, ffn,
                                          hidden, p, r, e);
  OpActivations a;
  a.kept.push_back({"norm: x [tokens_r, hidden]", n.kept_bytes()});
  a.kept.push_back({"column: z [tokens_r, hidden] (norm output)", c.kept_bytes()});
  a.kept.push_back({"row: a [tokens, ffn_r] (column output)", w.kept_bytes()});
  auto tagged = [](const char* op, std::vector<Term> terms) {
    for (auto& t : terms) t.name = std::string(op) + ": " + t.name;
    return terms;
  };
  a.forward_peak = peak_of({tagged("norm", n.forward_peak), tagged("column", c.forward_peak),
                            tagged("row", w.forward_peak)});
  a.backward_peak = peak_of({tagged("row", w.backward_peak), tagged("column", c.backward_peak),
                             tagged("norm", n.backward_peak)});
  return a;
}

OpActivations vocab_embedding_activations(const VocabEmbeddingConfig& cfg, std::size_t tokens,
                                          std::size_t hidden, int /*p*/, int /*r*/,
                                          ElementBytes e) {
  OpActivations a;
  a.kept.push_back({"ids [tokens] (int64)", tokens * sizeof(std::int64_t)});
  if (cfg.sequence_parallel_output) {
    a.forward_peak.push_back(
        {"full partial rows [tokens, hidden] (reduce_scatter input)", tokens * hidden * e.value});
    a.backward_peak.push_back({"all_gathered dy [tokens, hidden]", tokens * hidden * e.value});
  }
  return a;
}

OpActivations vocab_cross_entropy_activations(const VocabCrossEntropyConfig& cfg,
                                              std::size_t tokens, int p, int r, ElementBytes e) {
  OpActivations a;
  const std::size_t vr = piece(cfg.vocab_split, cfg.vocab, p, r);
  a.kept.push_back({"logits [tokens, V_r]", tokens * vr * e.value});
  a.kept.push_back({"targets [tokens] (int64)", tokens * sizeof(std::int64_t)});
  a.kept.push_back({"max [tokens] (acc)", tokens * e.acc});
  a.kept.push_back({"sum_exp [tokens] (acc)", tokens * e.acc});
  const std::size_t k = cfg.label_smoothing > 0 ? 3 : 2;
  a.forward_peak.push_back(
      {"sums all_reduce buffer [" + num(k) + "·tokens] (acc)", k * tokens * e.acc});
  return a;
}

OpActivations cp_attention_activations(const AttentionConfig& cfg, const ContextParallelConfig& cc,
                                       std::size_t batch, int p, int r, ElementBytes e) {
  OpActivations a;
  const auto lens = cp_lengths(cc, p);
  const std::size_t h = cfg.q_heads, g = cfg.kv_heads, d = cfg.head_dim;
  const std::size_t len = lens[static_cast<std::size_t>(r)];
  a.kept.push_back({"q [b, L_r, h, d]", batch * len * h * d * e.value});
  a.kept.push_back({"k [b, L_r, g, d]", batch * len * g * d * e.value});
  a.kept.push_back({"v [b, L_r, g, d]", batch * len * g * d * e.value});
  a.kept.push_back({"out [b, L_r, h, d]", batch * len * h * d * e.value});
  a.kept.push_back({"lse [b, h, L_r] (acc)", batch * h * len * e.acc});

  if (cc.algorithm == CpAlgorithm::all_gather) {
    const std::size_t n = batch * cc.seq_len * g * d;
    const Term k_recv{"all_gathered K (received)", n * e.value};
    const Term k_seq{"all_gathered K (sequence order)", n * e.value};
    const Term v_recv{"all_gathered V (received)", n * e.value};
    const Term v_seq{"all_gathered V (sequence order)", n * e.value};
    const std::vector<Moment> gathers = {
        {k_recv}, {k_recv, k_seq}, {k_seq, v_recv}, {k_seq, v_recv, v_seq}};
    a.forward_peak = peak_of(gathers);
    std::vector<Moment> back = gathers;
    const Term dk{"full dK [b, seq, g, d] (acc)", n * e.acc};
    const Term dv{"full dV [b, seq, g, d] (acc)", n * e.acc};
    const Term dk_ranks{"dK by rank (reduce_scatter input, acc)", n * e.acc};
    const Term dv_ranks{"dV by rank (reduce_scatter input, acc)", n * e.acc};
    back.push_back({k_seq, v_seq, dk});
    back.push_back({k_seq, v_seq, dk, dv});
    back.push_back({k_seq, v_seq, dk, dv, dk_ranks});
    back.push_back({k_seq, v_seq, dk, dv, dk_ranks, dv_ranks});
    a.backward_peak = peak_of(back);
    return a;
  }

  // The ring: at step s this rank holds the K/V chunk of rank src(s) = (r − s) mod p.
  auto src = [&](int s) { return static_cast<std::size_t>((((r - s) % p) + p) % p); };
  auto chunk = [&](int s) { return 2 * batch * lens[src(s)] * g * d; };
  auto held = [&](int s) {
    return Term{"K/V chunk of rank " + num(src(s)) + " (held)", chunk(s) * e.value};
  };
  auto received = [&](int s) {
    return Term{"K/V chunk of rank " + num(src(s)) + " (received)", chunk(s) * e.value};
  };
  auto grad = [&](int s, const char* what) {
    return Term{"dK/dV chunk of rank " + num(src(s)) + " (" + what + ", acc)", chunk(s) * e.acc};
  };
  std::vector<Moment> fwd = {{held(0)}};
  for (int s = 0; s + 1 < p; ++s) fwd.push_back({held(s), received(s + 1)});
  a.forward_peak = peak_of(fwd);

  std::vector<Moment> back = {{held(0)}, {held(0), grad(0, "accumulated")}};
  for (int s = 0; s < p && p > 1; ++s) {
    int kv = s;
    if (s + 1 < p) {
      back.push_back({held(s), grad(s, "accumulated"), received(s + 1)});
      kv = s + 1;
    }
    back.push_back({held(kv), grad(s, "accumulated"), grad(s + 1, "received")});
  }
  a.backward_peak = peak_of(back);
  return a;
}

OpActivations head_layer_activations(const HeadParallelConfig& cfg, std::size_t batch, int tp,
                                     int tp_rank, int cp, int cp_rank, ElementBytes e) {
  const HeadAssignment as = head_assignment(cfg, tp, tp_rank);
  const std::size_t d = cfg.attention.head_dim, hidden = cfg.hidden;
  const std::size_t len = cfg.context_parallel ? cp_lengths(*cfg.context_parallel,
                                                            cp)[static_cast<std::size_t>(cp_rank)]
                                               : cfg.attention.mask.q_len;
  const std::size_t n = batch * len, hq = as.q_count * d, hkv = as.kv_count * d;
  OpActivations a;
  a.kept.push_back({"x [b, L_r, hidden]", n * hidden * e.value});
  a.kept.push_back({"q [b, L_r, h_r, d]", n * hq * e.value});
  a.kept.push_back({"k [b, L_r, g_r, d]", n * hkv * e.value});
  a.kept.push_back({"v [b, L_r, g_r, d]", n * hkv * e.value});
  a.kept.push_back({"out [b, L_r, h_r, d]", n * hq * e.value});
  a.kept.push_back({"lse [b, h_r, L_r] (acc)", n * as.q_count * e.acc});
  std::vector<Moment> back;
  if (as.q_count > 0 && cfg.context_parallel) {
    AttentionConfig local = cfg.attention;
    local.q_heads = as.q_count;
    local.kv_heads = as.kv_count;
    const auto core = cp_attention_activations(local, *cfg.context_parallel, batch, cp, cp_rank, e);
    a.forward_peak = core.forward_peak;
    back.push_back(core.backward_peak);
  }
  if (as.kv_replicas > 1) {
    back.push_back({{"kv group pack [dWk | dbk | dWv | dbv]",
                     (2 * hkv * hidden + (cfg.has_bias ? 2 * hkv : 0)) * e.value}});
  }
  if (cfg.context_parallel && cp > 1) {
    back.push_back(
        {{"cp pack of every parameter gradient but dbo",
          (hq * hidden + 2 * hkv * hidden + hidden * hq + (cfg.has_bias ? hq + 2 * hkv : 0)) *
              e.value}});
  }
  a.backward_peak = peak_of(back);
  return a;
}

}  // namespace shardcheck::budget
