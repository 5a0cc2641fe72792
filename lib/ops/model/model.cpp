// One training step of the decoder-only transformer on a pp × dp × cp × tp mesh
// (ops/model/model.hpp): the partition, the parameters' shards, the pipeline schedule, the
// gradients' finalize, the global norm and the SGD step.
#include "ops/model/model.hpp"

#include "ops/model/model_step.hpp"

#include "ops/attention/context_parallel_attention.hpp"
#include "ops/linear/linear.hpp"
#include "ops/linear/linear_internal.hpp"
#include "ops/mlp/mlp.hpp"
#include "ops/norm/norm.hpp"
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"
#include "runtime/errors.hpp"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck {

namespace {

std::string str(std::size_t n) { return std::to_string(n); }

// Cuts n over parts by policy, its errors prefixed with what is cut.
std::vector<Piece> cut(const SplitPolicy& policy, std::size_t n, int parts,
                       const std::string& what) {
  try {
    return split(policy, n, parts);
  } catch (const UsageError& e) {
    throw UsageError("model: " + what + ": " + policy.to_string() + " cannot cut " + str(n) +
                     " into " + std::to_string(parts) + " pieces: " + e.what());
  }
}

ContextParallelConfig cp_config(const ModelParallelConfig& par, std::size_t seq_len) {
  ContextParallelConfig c;
  c.seq_len = seq_len;
  c.layout = par.cp_layout;
  c.split = par.seq_split;
  c.algorithm = par.cp_algorithm;
  return c;
}

}  // namespace

DeviceMesh model_mesh(const ModelParallelConfig& par) {
  return DeviceMesh({{"pp", par.pp}, {"dp", par.dp}, {"cp", par.cp}, {"tp", par.tp}});
}

std::string to_string(const ModelParallelConfig& par) {
  return "pp=" + std::to_string(par.pp) + " dp=" + std::to_string(par.dp) +
         " cp=" + std::to_string(par.cp) + " tp=" + std::to_string(par.tp) +
         " layer_split=" + par.layer_split.to_string() +
         " batch_split=" + par.batch_split.to_string() +
         " micro_batches=" + std::to_string(par.micro_batches) +
         " micro_batch_split=" + par.micro_batch_split.to_string() +
         " cp_layout=" + to_string(par.cp_layout) + " seq_split=" + par.seq_split.to_string() +
         " cp_algorithm=" + to_string(par.cp_algorithm) +
         (par.sequence_parallel ? " sequence_parallel token_split=" + par.token_split.to_string()
                                : std::string()) +
         " kv_head_split=" + par.kv_head_split.to_string() +
         " ffn_split=" + par.ffn_split.to_string() + " vocab_split=" + par.vocab_split.to_string() +
         " reduce=" + std::string(name(par.reduce_algorithm));
}

ModelCoordinates model_coordinates(const ModelConfig& cfg, const ModelParallelConfig& par,
                                   int world_rank) {
  const DeviceMesh mesh = model_mesh(par);
  const std::vector<int> c = mesh.coordinates(world_rank);
  ModelCoordinates m;
  m.pp = c[0];
  m.dp = c[1];
  m.cp = c[2];
  m.tp = c[3];
  m.layers = cut(par.layer_split, cfg.layers, par.pp,
                 "layer_split (layers over pp)")[static_cast<std::size_t>(m.pp)];
  return m;
}

Piece dp_sequences(const ModelParallelConfig& par, std::size_t sequences, int dp_rank) {
  return cut(par.batch_split, sequences, par.dp,
             "batch_split (sequences over dp)")[static_cast<std::size_t>(dp_rank)];
}

std::vector<Piece> micro_batch_pieces(const ModelParallelConfig& par, std::size_t sequences) {
  if (par.micro_batches < 1) {
    throw UsageError("model: micro_batches is " + std::to_string(par.micro_batches) +
                     "; pass at least 1");
  }
  return cut(par.micro_batch_split, sequences, par.micro_batches,
             "micro_batch_split (a dp rank's sequences over its micro-batches)");
}

std::vector<std::size_t> model_cp_positions(const ModelParallelConfig& par, std::size_t seq_len,
                                            int cp_rank) {
  if (par.cp == 1) return iota_positions(seq_len);
  return cp_positions(cp_config(par, seq_len), par.cp, cp_rank);
}

HeadParallelConfig model_attention_config(const ModelConfig& cfg, const ModelParallelConfig& par,
                                          std::size_t sequences, std::size_t seq_len) {
  HeadParallelConfig h;
  h.attention.q_heads = cfg.heads;
  h.attention.kv_heads = cfg.kv_heads;
  h.attention.head_dim = cfg.head_dim;
  h.attention.mask.kind = MaskKind::causal;
  h.attention.mask.q_len = seq_len;
  h.attention.mask.k_len = seq_len;
  h.hidden = cfg.hidden;
  h.has_bias = cfg.linear_bias;
  h.kv_head_split = par.kv_head_split;
  h.reduce_algorithm = par.reduce_algorithm;
  if (par.cp > 1) h.context_parallel = cp_config(par, seq_len);
  h.sequence_parallel = par.sequence_parallel;
  h.token_split = par.token_split;
  h.batch = sequences;
  return h;
}

SequenceParallelNormConfig model_norm_config(const ModelConfig& cfg, const ModelParallelConfig& par,
                                             std::size_t tokens) {
  SequenceParallelNormConfig n;
  n.norm = cfg.norm;
  n.tokens = tokens;
  n.token_split = par.token_split;
  n.reduce_algorithm = par.reduce_algorithm;
  return n;
}

MlpConfig model_mlp_config(const ModelConfig& cfg, const ModelParallelConfig& par,
                           std::size_t tokens) {
  MlpConfig c;
  c.activation = cfg.activation;
  c.ffn_features = cfg.ffn;
  c.ffn_split = par.ffn_split;
  c.tokens = tokens;
  c.sequence_parallel = par.sequence_parallel;
  c.token_split = par.token_split;
  c.reduce_algorithm = par.reduce_algorithm;
  return c;
}

ColumnParallelConfig model_output_config(const ModelConfig& cfg, const ModelParallelConfig& par,
                                         std::size_t tokens) {
  ColumnParallelConfig c = linear_detail::block_column_config(
      tokens, par.sequence_parallel, par.token_split, par.reduce_algorithm);
  c.out_features = cfg.vocab;
  c.out_split = par.vocab_split;
  return c;
}

VocabEmbeddingConfig model_embedding_config(const ModelConfig& cfg,
                                            const ModelParallelConfig& par) {
  VocabEmbeddingConfig c;
  c.vocab = cfg.vocab;
  c.vocab_split = par.vocab_split;
  c.sequence_parallel_output = par.sequence_parallel;
  c.token_split = par.token_split;
  c.reduce_algorithm = par.reduce_algorithm;
  return c;
}

VocabCrossEntropyConfig model_loss_config(const ModelConfig& cfg, const ModelParallelConfig& par) {
  VocabCrossEntropyConfig c;
  c.ignore_index = cfg.ignore_index;
  c.reduction = LossReduction::sum;
  c.vocab = cfg.vocab;
  c.vocab_split = par.vocab_split;
  c.reduce_algorithm = par.reduce_algorithm;
  return c;
}

ModelParams<double> model_param_shapes(const ModelConfig& c) {
  const std::size_t H = c.hidden, hd = c.heads * c.head_dim, kd = c.kv_heads * c.head_dim;
  const std::size_t kf = up_rows_per_feature(c.activation) * c.ffn;
  const bool beta = has_beta(c.norm.kind), bias = c.linear_bias;
  auto t = [](Shape s) { return Tensor<double>(std::move(s)); };
  ModelParams<double> p;
  p.embedding = t({c.vocab, H});
  for (std::size_t l = 0; l < c.layers; ++l) {
    TransformerLayerParams<double> w;
    w.norm1_gamma = t({H});
    w.norm2_gamma = t({H});
    if (beta) {
      w.norm1_beta = t({H});
      w.norm2_beta = t({H});
    }
    w.wq = t({hd, H});
    w.wk = t({kd, H});
    w.wv = t({kd, H});
    w.wo = t({H, hd});
    w.w_up = t({kf, H});
    w.w_down = t({H, c.ffn});
    if (bias) {
      w.bq = t({hd});
      w.bk = t({kd});
      w.bv = t({kd});
      w.bo = t({H});
      w.b_up = t({kf});
      w.b_down = t({H});
    }
    p.layers.push_back(std::move(w));
  }
  p.final_gamma = t({H});
  if (beta) p.final_beta = t({H});
  if (!c.tied_embedding) p.output = t({c.vocab, H});
  return p;
}

template <class T>
ModelParams<T> shard_model_params(const ModelConfig& cfg, const ModelParallelConfig& par,
                                  const ModelParams<T>& dense, int world_rank) {
  if (dense.layers.size() != cfg.layers) {
    throw UsageError("shard_model_params: the dense parameters have " + str(dense.layers.size()) +
                     " layers but cfg.layers is " + str(cfg.layers));
  }
  const ModelCoordinates m = model_coordinates(cfg, par, world_rank);
  const HeadParallelConfig hp = model_attention_config(cfg, par, 0, 1);
  const HeadAssignment heads = head_assignment(hp, par.tp, m.tp);
  ModelParams<T> s;
  const bool last = m.last_stage(par);
  const Tensor<T>& out_w = cfg.tied_embedding ? dense.embedding : dense.output;
  if (m.first_stage()) {
    s.embedding = split_weight_by_output_features(dense.embedding, par.vocab_split, par.tp, m.tp);
  }
  for (std::size_t l = m.layers.offset; l < m.layers.offset + m.layers.size; ++l) {
    const TransformerLayerParams<T>& d = dense.layers[l];
    TransformerLayerParams<T> r;
    r.norm1_gamma = d.norm1_gamma;
    r.norm1_beta = d.norm1_beta;
    const AttentionLayerWeights<T> a = shard_attention_weights(attention_weights(d), hp, heads);
    r.wq = a.wq;
    r.bq = a.bq;
    r.wk = a.wk;
    r.bk = a.bk;
    r.wv = a.wv;
    r.bv = a.bv;
    r.wo = a.wo;
    r.bo = a.bo;
    r.norm2_gamma = d.norm2_gamma;
    r.norm2_beta = d.norm2_beta;
    r.w_up = split_fused_up(d.w_up, cfg.activation, par.ffn_split, par.tp, m.tp);
    if (cfg.linear_bias) {
      r.b_up = split_fused_up(d.b_up, cfg.activation, par.ffn_split, par.tp, m.tp);
      r.b_down = d.b_down;
    }
    r.w_down = split_weight_by_input_features(d.w_down, par.ffn_split, par.tp, m.tp);
    s.layers.push_back(std::move(r));
  }
  if (last) {
    s.final_gamma = dense.final_gamma;
    s.final_beta = dense.final_beta;
    if (!cfg.tied_embedding || par.pp > 1) {
      s.output = split_weight_by_output_features(out_w, par.vocab_split, par.tp, m.tp);
    }
  }
  return s;
}

std::vector<NamedShape> model_local_param_shapes(const ModelConfig& cfg,
                                                 const ModelParallelConfig& par, int world_rank) {
  const ModelCoordinates m = model_coordinates(cfg, par, world_rank);
  const HeadAssignment heads =
      head_assignment(model_attention_config(cfg, par, 0, 1), par.tp, m.tp);
  const auto t = static_cast<std::size_t>(m.tp);
  const std::size_t H = cfg.hidden, d = cfg.head_dim;
  const std::size_t q = heads.q_count * d, kv = heads.kv_count * d;
  const std::size_t f = split_sizes(par.ffn_split, cfg.ffn, par.tp)[t];
  const std::size_t up = up_rows_per_feature(cfg.activation) * f;
  const std::size_t v = split_sizes(par.vocab_split, cfg.vocab, par.tp)[t];
  const bool beta = has_beta(cfg.norm.kind), bias = cfg.linear_bias;
  const bool last = m.last_stage(par);
  std::vector<NamedShape> out;
  auto add = [&](std::string name, bool held, Shape s) {
    out.push_back({std::move(name), held ? std::move(s) : Shape{}});
  };
  // A norm's <prefix>_gamma and <prefix>_beta [H] (beta for LayerNorm only).
  auto add_norm = [&](const std::string& prefix, bool held) {
    add(prefix + "_gamma", held, {H});
    add(prefix + "_beta", held && beta, {H});
  };
  // A linear's <layer>w<name> [out, in] and <layer>b<name> [out] (held with linear_bias).
  auto add_linear = [&](const std::string& layer, const std::string& name, std::size_t out_features,
                        std::size_t in_features) {
    add(layer + "w" + name, true, {out_features, in_features});
    add(layer + "b" + name, bias, {out_features});
  };
  add("embedding", m.first_stage(), {v, H});
  for (std::size_t l = 0; l < m.layers.size; ++l) {
    const std::string n = "layers." + std::to_string(l) + ".";
    add_norm(n + "norm1", true);
    add_linear(n, "q", q, H);
    add_linear(n, "k", kv, H);
    add_linear(n, "v", kv, H);
    add_linear(n, "o", H, q);
    add_norm(n + "norm2", true);
    add_linear(n, "_up", up, H);
    add_linear(n, "_down", H, f);
  }
  add_norm("final", last);
  add("output", last && (!cfg.tied_embedding || par.pp > 1), {v, H});
  return out;
}

template <class T>
ModelStepResult<T> model_train_step(Communicator& world, const ModelConfig& cfg,
                                    const ModelParallelConfig& par, const OptimizerConfig& opt,
                                    const ModelParams<T>& shard, const ModelBatch& batch) {
  ModelRankStep<T> step(world, cfg, par, shard, batch);
  return step.run(opt);
}

#define SHARDCHECK_MODEL(T)                                                                        \
  template class ModelRankStep<T>;                                                                 \
  template ModelParams<T> shard_model_params(const ModelConfig&, const ModelParallelConfig&,       \
                                             const ModelParams<T>&, int);                          \
  template ModelStepResult<T> model_train_step(Communicator&, const ModelConfig&,                  \
                                               const ModelParallelConfig&, const OptimizerConfig&, \
                                               const ModelParams<T>&, const ModelBatch&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_MODEL)
#undef SHARDCHECK_MODEL

}  // namespace shardcheck
