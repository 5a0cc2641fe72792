#include "budget/library_activations.hpp"

#include "ops/attention/attention_spec.hpp"
#include "ops/linear/linear_spec.hpp"
#include "ops/mlp/mlp_spec.hpp"
#include "ops/norm/norm_spec.hpp"
#include "ops/vocab/vocab_spec.hpp"

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

std::string num(std::size_t n) { return std::to_string(n); }

// One op of a chain of ops run one after another, and its name in the chain's terms.
struct Link {
  const char* op;
  const OpActivations& a;
};

// The peaks of ops run in sequence: each frees its collective buffers before it returns, so the
// chain's peak is the largest of its ops' peaks (the first of equal ones), each term tagged with
// its op ("column: all_gathered x [tokens, in]"). `forward` and `backward` list the links in the
// order the chain runs them (the backward in reverse).
void chain_peaks(OpActivations& chain, const std::vector<Link>& forward,
                 const std::vector<Link>& backward) {
  auto tagged = [](const char* op, std::vector<Term> terms) {
    for (auto& t : terms) t.name = std::string(op) + ": " + t.name;
    return terms;
  };
  std::vector<Moment> f, b;
  for (const auto& l : forward) f.push_back(tagged(l.op, l.a.forward_peak));
  for (const auto& l : backward) b.push_back(tagged(l.op, l.a.backward_peak));
  chain.forward_peak = peak_of(f);
  chain.backward_peak = peak_of(b);
}

// The kept terms: the spec's kept tensors, rank r's local piece of each (ops/op_spec.hpp: the
// activation model is declared with the op; the peaks below are the buffers its code uses).
std::vector<Term> kept_of(const spec::OpSpec& s, int r, ElementBytes e) {
  std::vector<Term> kept;
  for (const auto& name : s.kept) {
    const auto& t = s.tensor(name);
    const auto shape = t.local_shape(s.mesh, r);
    std::string label = name + " [";
    for (std::size_t k = 0; k < shape.size(); ++k)
      label.append(k ? ", " : "").append(num(shape[k]));
    label.append("] (").append(spec::name(t.elem)).append(")");
    const std::uint64_t size = t.elem == spec::Elem::value ? e.value
                               : t.elem == spec::Elem::acc ? e.acc
                                                           : sizeof(std::int64_t);
    kept.push_back({std::move(label), t.local_elements(s.mesh, r) * size});
  }
  return kept;
}

}  // namespace

OpActivations column_parallel_activations(const ColumnParallelConfig& cfg, std::size_t tokens,
                                          std::size_t in, std::size_t out, int p, int r,
                                          ElementBytes e) {
  OpActivations a;
  const bool sp = cfg.sequence_parallel_input;
  a.kept = kept_of(column_parallel_linear_spec(cfg, tokens, in, out, false, p), r, e);
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
  a.kept = kept_of(row_parallel_linear_spec(cfg, tokens, in, out, false, p), r, e);
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
  a.kept = kept_of(sequence_parallel_norm_spec(cfg, hidden, p), r, e);
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
  a.kept = kept_of(sp_block_spec(norm, hidden, ffn, ffn_split, p), r, e);
  chain_peaks(a, {{"norm", n}, {"column", c}, {"row", w}},
              {{"row", w}, {"column", c}, {"norm", n}});
  return a;
}

OpActivations parallel_mlp_activations(const MlpConfig& cfg, std::size_t tokens, std::size_t hidden,
                                       bool has_bias, int p, int r, ElementBytes e) {
  // fc1 is one [F, hidden] projection here: its peaks are of x and dx, which the fused
  // [k·F_r, hidden] weight does not change.
  const auto fc1 =
      column_parallel_activations(fc1_config(cfg), tokens, hidden, cfg.ffn_features, p, r, e);
  const auto fc2 =
      row_parallel_activations(fc2_config(cfg), tokens, cfg.ffn_features, hidden, p, r, e);
  OpActivations a;
  a.kept = kept_of(parallel_mlp_spec(cfg, tokens, hidden, has_bias, p), r, e);
  chain_peaks(a, {{"fc1", fc1}, {"fc2", fc2}}, {{"fc2", fc2}, {"fc1", fc1}});
  return a;
}

OpActivations vocab_embedding_activations(const VocabEmbeddingConfig& cfg, std::size_t tokens,
                                          std::size_t hidden, int p, int r, ElementBytes e) {
  OpActivations a;
  a.kept = kept_of(vocab_parallel_embedding_spec(cfg, tokens, hidden, p), r, e);
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
  a.kept = kept_of(vocab_parallel_cross_entropy_spec(cfg, tokens, p), r, e);
  const std::size_t k = cfg.label_smoothing > 0 ? 3 : 2;
  a.forward_peak.push_back(
      {"sums all_reduce buffer [" + num(k) + "·tokens] (acc)", k * tokens * e.acc});
  return a;
}

OpActivations cp_attention_activations(const AttentionConfig& cfg, const ContextParallelConfig& cc,
                                       std::size_t batch, int p, int r, ElementBytes e) {
  OpActivations a;
  const auto lens = cp_lengths(cc, p);
  const std::size_t g = cfg.kv_heads, d = cfg.head_dim;
  a.kept = kept_of(context_parallel_attention_spec(cfg, cc, batch, p), r, e);

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
                                     int tp_rank, int cp, int cp_rank, ElementBytes e,
                                     bool grads_reduced_over_cp) {
  const HeadAssignment as = head_assignment(cfg, tp, tp_rank);
  const std::size_t d = cfg.attention.head_dim, hidden = cfg.hidden;
  const std::size_t hq = as.q_count * d, hkv = as.kv_count * d;
  OpActivations a;
  a.kept = kept_of(attention_layer_spec(cfg, batch, cp, tp),
                   cfg.context_parallel ? cp_rank * tp + tp_rank : tp_rank, e);
  // Sequence parallelism: [n, hidden] buffers of T, n = batch·L_r the tokens of the rank's cp
  // piece, one at a time (each freed before the next is taken): forward the all_gathered x (while
  // the QKV projection reads it), then the core's, then the output projection's full partial y;
  // backward the all_gathered dy, the core's, x gathered again (while the QKV backward reads
  // it), the full dx, then the gradient packs.
  const std::size_t len = cfg.context_parallel ? cp_lengths(*cfg.context_parallel,
                                                            cp)[static_cast<std::size_t>(cp_rank)]
                                               : cfg.attention.mask.q_len;
  const std::uint64_t rows_bytes = batch * len * hidden * e.value;
  const std::string rows = " [" + num(batch * len) + ", " + num(hidden) + "]";
  auto sp_moment = [&](const std::string& name) {
    return cfg.sequence_parallel ? Moment{{name + rows, rows_bytes}} : Moment{};
  };
  std::vector<Moment> fwd = {sp_moment("all_gathered x")};
  std::vector<Moment> back = {sp_moment("all_gathered dy")};
  if (as.q_count > 0 && cfg.context_parallel) {
    AttentionConfig local = cfg.attention;
    local.q_heads = as.q_count;
    local.kv_heads = as.kv_count;
    const auto core = cp_attention_activations(local, *cfg.context_parallel, batch, cp, cp_rank, e);
    fwd.push_back(core.forward_peak);
    back.push_back(core.backward_peak);
  }
  fwd.push_back(sp_moment("full partial y (reduce_scatter input)"));
  a.forward_peak = peak_of(fwd);
  back.push_back(sp_moment("x all_gathered again"));
  back.push_back(sp_moment("full dx (reduce_scatter input)"));
  if (as.kv_replicas > 1) {
    back.push_back({{"kv group pack [dWk | dbk | dWv | dbv]",
                     (2 * hkv * hidden + (cfg.has_bias ? 2 * hkv : 0)) * e.value}});
  }
  if (grads_reduced_over_cp && cfg.context_parallel && cp > 1) {
    back.push_back(
        {{"cp pack of every parameter gradient but dbo",
          (hq * hidden + 2 * hkv * hidden + hidden * hq + (cfg.has_bias ? hq + 2 * hkv : 0)) *
              e.value}});
  }
  a.backward_peak = peak_of(back);
  return a;
}

}  // namespace shardcheck::budget
