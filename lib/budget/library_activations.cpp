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

// The bytes of one element of role `elem` (T, acc_t<T> or an int64 index).
std::uint64_t element_size(spec::Elem elem, ElementBytes e) {
  return elem == spec::Elem::value ? e.value
         : elem == spec::Elem::acc ? e.acc
                                   : sizeof(std::int64_t);
}

std::string num(std::size_t n) { return std::to_string(n); }

// The kept terms: the spec's kept tensors, rank r's local piece of each.
std::vector<Term> kept_of(const spec::OpSpec& s, int r, ElementBytes e) {
  std::vector<Term> kept;
  for (const auto& name : s.kept) {
    const auto& t = s.tensor(name);
    const auto shape = t.local_shape(s.mesh, r);
    std::string label = name + " [";
    for (std::size_t k = 0; k < shape.size(); ++k)
      label.append(k ? ", " : "").append(num(shape[k]));
    label.append("] (").append(spec::name(t.elem)).append(")");
    kept.push_back({std::move(label), t.local_elements(s.mesh, r) * element_size(t.elem, e)});
  }
  return kept;
}

// The peak of one pass: its first moment with the most bytes, as terms (none: no buffer).
std::vector<Term> peak_of(const std::vector<spec::Moment>& moments, ElementBytes e) {
  std::vector<Term> best;
  std::uint64_t most = 0;
  for (const auto& m : moments) {
    std::vector<Term> terms;
    terms.reserve(m.size());
    for (const auto& b : m) terms.push_back({b.name, b.elements * element_size(b.elem, e)});
    if (sum(terms) > most || (best.empty() && !terms.empty() && sum(terms) == most)) {
      most = sum(terms);
      best = std::move(terms);
    }
  }
  return best;
}

// Rank r's activations from the op's spec (ops/op_spec.hpp: the kept tensors and the collective
// buffers are declared with the op; this sizes them).
OpActivations activations_of(const spec::OpSpec& s, int r, ElementBytes e) {
  const auto& b = s.buffers.at(static_cast<std::size_t>(r));
  return {kept_of(s, r, e), peak_of(b.forward, e), peak_of(b.backward, e)};
}

}  // namespace

OpActivations column_parallel_activations(const ColumnParallelConfig& cfg, std::size_t tokens,
                                          std::size_t in, std::size_t out, int p, int r,
                                          ElementBytes e) {
  return activations_of(column_parallel_linear_spec(cfg, tokens, in, out, false, p), r, e);
}

OpActivations row_parallel_activations(const RowParallelConfig& cfg, std::size_t tokens,
                                       std::size_t in, std::size_t out, int p, int r,
                                       ElementBytes e) {
  return activations_of(row_parallel_linear_spec(cfg, tokens, in, out, false, p), r, e);
}

OpActivations sp_norm_activations(const SequenceParallelNormConfig& cfg, std::size_t hidden, int p,
                                  int r, ElementBytes e) {
  return activations_of(sequence_parallel_norm_spec(cfg, hidden, p), r, e);
}

OpActivations sp_block_activations(const SequenceParallelNormConfig& norm, std::size_t hidden,
                                   std::size_t ffn, const SplitPolicy& ffn_split, int p, int r,
                                   ElementBytes e) {
  return activations_of(sp_block_spec(norm, hidden, ffn, ffn_split, p), r, e);
}

OpActivations parallel_mlp_activations(const MlpConfig& cfg, std::size_t tokens, std::size_t hidden,
                                       bool has_bias, int p, int r, ElementBytes e) {
  return activations_of(parallel_mlp_spec(cfg, tokens, hidden, has_bias, p), r, e);
}

OpActivations vocab_embedding_activations(const VocabEmbeddingConfig& cfg, std::size_t tokens,
                                          std::size_t hidden, int p, int r, ElementBytes e) {
  return activations_of(vocab_parallel_embedding_spec(cfg, tokens, hidden, p), r, e);
}

OpActivations vocab_cross_entropy_activations(const VocabCrossEntropyConfig& cfg,
                                              std::size_t tokens, int p, int r, ElementBytes e) {
  return activations_of(vocab_parallel_cross_entropy_spec(cfg, tokens, p), r, e);
}

OpActivations cp_attention_activations(const AttentionConfig& cfg, const ContextParallelConfig& cc,
                                       std::size_t batch, int p, int r, ElementBytes e) {
  return activations_of(context_parallel_attention_spec(cfg, cc, batch, p), r, e);
}

OpActivations head_layer_activations(const HeadParallelConfig& cfg, std::size_t batch, int tp,
                                     int tp_rank, int cp, int cp_rank, ElementBytes e,
                                     bool grads_reduced_over_cp) {
  // The spec's world rank: cp_rank·tp + tp_rank (tp_rank alone without context parallelism).
  const int r = cfg.context_parallel ? cp_rank * tp + tp_rank : tp_rank;
  return activations_of(grads_reduced_over_cp
                            ? attention_layer_spec(cfg, batch, cp, tp)
                            : attention_layer_spec_grads_left_to_caller(cfg, batch, cp, tp),
                        r, e);
}

}  // namespace shardcheck::budget
