#include "ops/model/model_spec.hpp"

#include "ops/attention/attention_spec.hpp"
#include "ops/linear/linear_spec.hpp"
#include "ops/mlp/mlp.hpp"
#include "ops/mlp/mlp_spec.hpp"
#include "ops/norm/norm.hpp"
#include "ops/norm/norm_spec.hpp"
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"
#include "ops/vocab/vocab_spec.hpp"

#include <map>
#include <string>
#include <vector>

namespace shardcheck {

using spec::Elem;
using spec::Pass;
using spec::Role;

namespace {

// A shard's tensor name as the dense model's: its stage's layer index made global, and a tied
// embedding's output copy named "embedding".
std::string global_name(const ModelConfig& c, const ModelCoordinates& m, const std::string& n) {
  if (n == "output" && c.tied_embedding) return "embedding";
  if (n.rfind("layers.", 0) != 0) return n;
  const auto dot = n.find('.', 7);
  const std::size_t l = std::stoul(n.substr(7, dot - 7)) + m.layers.offset;
  return "layers." + std::to_string(l) + n.substr(dot);
}

// The tp placement of a dense parameter (model.hpp's sharding), for the printed spec.
Placement tp_placement(const ModelConfig& c, const ModelParallelConfig& par, const std::string& n,
                       const std::vector<HeadAssignment>& heads) {
  const std::size_t d = c.head_dim;
  std::vector<std::size_t> q, kv;
  for (const auto& a : heads) {
    q.push_back(a.q_count * d);
    kv.push_back(a.kv_count * d);
  }
  const bool kv_shared = !heads.empty() && heads.front().kv_replicas > 1;
  const auto leaf = n.substr(n.rfind('.') + 1);
  if (leaf == "embedding" || leaf == "output") return Placement::shard(0, par.vocab_split);
  if (leaf == "wq" || leaf == "bq") return Placement::shard(0, SplitPolicy::explicit_sizes(q));
  if (leaf == "wo") return Placement::shard(1, SplitPolicy::explicit_sizes(q));
  if (leaf == "wk" || leaf == "bk" || leaf == "wv" || leaf == "bv") {
    return kv_shared ? Placement::replicate()
                     : Placement::shard(0, SplitPolicy::explicit_sizes(kv));
  }
  if (leaf == "w_up" || leaf == "b_up") return Placement::shard(0, par.ffn_split);
  if (leaf == "w_down") return Placement::shard(1, par.ffn_split);
  return Placement::replicate();
}

// Rank r's collectives, in the order model_train_step makes them.
spec::RankCalls rank_calls(const ModelConfig& c, const ModelParallelConfig& par,
                           std::size_t sequences, std::size_t seq_len, int r) {
  const ModelCoordinates m = model_coordinates(c, par, r);
  const Piece seqs = dp_sequences(par, sequences, m.dp);
  const std::vector<Piece> mbs = micro_batch_pieces(par, seqs.size);
  const std::size_t H = c.hidden, Lc = model_cp_positions(par, seq_len, m.cp).size();
  const bool first = m.first_stage(), last = m.last_stage(par), sp = par.sequence_parallel;
  const int tp_cp_rank = m.cp * par.tp + m.tp;
  const std::size_t layers = m.layers.size;
  spec::RankCalls calls;
  auto add = [&](spec::RankCalls from) { spec::append_calls(calls, std::move(from)); };
  auto norm_cfg = [&](std::size_t tokens) { return model_norm_config(c, par, tokens); };
  auto mlp_cfg = [&](std::size_t tokens) { return model_mlp_config(c, par, tokens); };
  auto out_cfg = [&](std::size_t tokens) { return model_output_config(c, par, tokens); };
  const VocabEmbeddingConfig emb = model_embedding_config(c, par);
  const VocabCrossEntropyConfig ce = model_loss_config(c, par);
  auto rows = [&](std::size_t tokens) {
    return sp ? split_sizes(par.token_split, tokens, par.tp)[static_cast<std::size_t>(m.tp)]
              : tokens;
  };
  const int pp_rank = m.pp;
  for (const Piece& mb : mbs) {  // forward
    const std::size_t tokens = mb.size * Lc;
    if (first) {
      add(vocab_parallel_embedding_spec(emb, tokens, H, par.tp).calls_of(m.tp, Pass::forward));
    } else {
      calls.push_back(spec::recv_spec(Pass::forward, "x", "pp", Elem::value, rows(tokens) * H,
                                      par.pp, pp_rank));
    }
    const auto att = attention_layer_spec(model_attention_config(c, par, mb.size, seq_len), mb.size,
                                          par.cp, par.tp);
    const auto mlp = parallel_mlp_spec(mlp_cfg(tokens), tokens, H, c.linear_bias, par.tp);
    for (std::size_t l = 0; l < layers; ++l) {
      add(att.calls_of(tp_cp_rank, Pass::forward));
      add(mlp.calls_of(m.tp, Pass::forward));
    }
    if (!last) {
      calls.push_back(spec::send_spec(Pass::forward, "x", "pp", Elem::value, rows(tokens) * H,
                                      par.pp, pp_rank));
      continue;
    }
    add(column_parallel_linear_spec(out_cfg(tokens), tokens, H, c.vocab, false, par.tp)
            .calls_of(m.tp, Pass::forward));
    add(vocab_parallel_cross_entropy_spec(ce, tokens, par.tp).calls_of(m.tp, Pass::forward));
  }
  for (std::size_t k = mbs.size(); k-- > 0;) {  // backward, micro-batches in reverse
    const std::size_t tokens = mbs[k].size * Lc;
    const auto norm = sequence_parallel_norm_spec(norm_cfg(tokens), H, par.tp);
    auto norm_backward = [&] {
      if (sp) add(norm.calls_of(m.tp, Pass::backward));
    };
    if (last) {
      add(column_parallel_linear_spec(out_cfg(tokens), tokens, H, c.vocab, false, par.tp)
              .calls_of(m.tp, Pass::backward));
      norm_backward();
    } else {
      calls.push_back(spec::recv_spec(Pass::backward, "dx", "pp", Elem::value, rows(tokens) * H,
                                      par.pp, pp_rank));
    }
    // The layer's parameter gradients are summed over dp × cp once, in the finalize below.
    const auto att = attention_layer_spec_grads_left_to_caller(
        model_attention_config(c, par, mbs[k].size, seq_len), mbs[k].size, par.cp, par.tp);
    const auto mlp = parallel_mlp_spec(mlp_cfg(tokens), tokens, H, c.linear_bias, par.tp);
    for (std::size_t l = 0; l < layers; ++l) {
      add(mlp.calls_of(m.tp, Pass::backward));
      norm_backward();
      add(att.calls_of(tp_cp_rank, Pass::backward));
      norm_backward();
    }
    if (!first) {
      calls.push_back(spec::send_spec(Pass::backward, "dx", "pp", Elem::value, rows(tokens) * H,
                                      par.pp, pp_rank));
    } else {
      add(vocab_parallel_embedding_spec(emb, tokens, H, par.tp).calls_of(m.tp, Pass::backward));
    }
  }
  // The finalize: every gradient over dp × cp (one all_reduce per tensor), a tied embedding's
  // two uses, then the loss over dp × cp and the norm over the model-parallel group.
  const std::vector<NamedShape> shard = model_local_param_shapes(c, par, r);
  auto size_of = [&](const std::string& name) {
    for (const NamedShape& p : shard) {
      if (p.name == name) return p.shape.empty() ? std::size_t{0} : numel(p.shape);
    }
    return std::size_t{0};
  };
  const int dc = par.dp * par.cp, dc_rank = m.dp * par.cp + m.cp;
  if (dc > 1) {
    for (const NamedShape& p : shard) {
      if (!p.shape.empty() && numel(p.shape) > 0) {
        calls.push_back(spec::all_reduce_spec(Pass::backward, "d" + p.name, "dp_cp", Elem::acc,
                                              numel(p.shape), dc, dc_rank, par.reduce_algorithm));
      }
    }
    if (c.tied_embedding && par.pp == 1 && size_of("embedding") > 0) {
      calls.push_back(spec::all_reduce_spec(Pass::backward, "doutput", "dp_cp", Elem::acc,
                                            size_of("embedding"), dc, dc_rank,
                                            par.reduce_algorithm));
    }
  }
  if (c.tied_embedding && par.pp > 1 && (first || last)) {
    const std::size_t n = first ? size_of("embedding") : size_of("output");
    if (n > 0) {
      calls.push_back(spec::all_reduce_spec(Pass::backward, "dembedding", "embedding", Elem::acc, n,
                                            2, first ? 0 : 1, par.reduce_algorithm));
    }
  }
  if (last && dc > 1) {
    calls.push_back(spec::all_reduce_spec(Pass::backward, "loss", "dp_cp", Elem::acc, 1, dc,
                                          dc_rank, par.reduce_algorithm));
  }
  if (par.pp * par.tp > 1) {
    calls.push_back(spec::all_reduce_spec(Pass::backward, "grad_norm", "model_parallel", Elem::acc,
                                          1, par.pp * par.tp, m.pp * par.tp + m.tp,
                                          par.reduce_algorithm));
  }
  return calls;
}

}  // namespace

spec::RankCalls model_train_step_calls(const ModelConfig& cfg, const ModelParallelConfig& par,
                                       std::size_t sequences, std::size_t seq_len, int world_rank) {
  return rank_calls(cfg, par, sequences, seq_len, world_rank);
}

spec::OpSpec model_train_step_spec(const ModelConfig& cfg, const ModelParallelConfig& par,
                                   std::size_t sequences, std::size_t seq_len) {
  const DeviceMesh mesh = model_mesh(par);
  const int world = mesh.world_size();
  auto s = spec::op_spec(
      "model_train_step", "model",
      spec::JsonObject().raw("model", to_json(cfg)).raw("parallel", to_json(par)).str(),
      {{"sequences", sequences},
       {"seq_len", seq_len},
       {"vocab", cfg.vocab},
       {"hidden", cfg.hidden},
       {"layers", cfg.layers}},
      {{"pp", static_cast<std::size_t>(par.pp)},
       {"dp", static_cast<std::size_t>(par.dp)},
       {"cp", static_cast<std::size_t>(par.cp)},
       {"tp", static_cast<std::size_t>(par.tp)}});
  // The dense parameters, names and shapes in for_each_param's order: the one rank's of a mesh of
  // one (no tensor is made; properties/suites/model/model_shapes_tests.cpp checks the two agree).
  const std::vector<NamedShape> dense = model_local_param_shapes(cfg, ModelParallelConfig{}, 0);
  // Each rank's local shape of each (its first dimension 0 on a rank without the tensor).
  std::map<std::string, std::vector<std::vector<std::size_t>>> local;
  for (const NamedShape& p : dense) {
    if (p.shape.empty()) continue;
    std::vector<std::size_t> none = p.shape;
    none[0] = 0;
    local[p.name].assign(static_cast<std::size_t>(world), none);
  }
  for (int r = 0; r < world; ++r) {
    const ModelCoordinates m = model_coordinates(cfg, par, r);
    for (const NamedShape& p : model_local_param_shapes(cfg, par, r)) {
      if (!p.shape.empty())
        local[global_name(cfg, m, p.name)][static_cast<std::size_t>(r)] = p.shape;
    }
  }
  std::vector<HeadAssignment> heads;
  heads.reserve(static_cast<std::size_t>(par.tp));
  const HeadParallelConfig hp = model_attention_config(cfg, par, 0, 1);
  for (int t = 0; t < par.tp; ++t) heads.push_back(head_assignment(hp, par.tp, t));
  const auto rep = Placement::replicate();
  for (const NamedShape& p : dense) {
    if (p.shape.empty()) continue;
    const std::string& n = p.name;
    const std::vector<Placement> pl{rep, rep, rep, tp_placement(cfg, par, n, heads)};
    const std::string where = n == "embedding" ? "first stage (and a tied copy on the last)"
                              : n == "output"  ? "last stage"
                              : n.rfind("layers.", 0) == 0
                                  ? "the stage holding the layer (layer_split)"
                                  : "last stage";
    auto add = [&](std::string name, Role role, Elem elem) {
      auto ts = spec::tensor_of(
          elem, std::move(name), role, p.shape, pl,
          "held on the " + where +
              (n.find("w_up") != std::string::npos || n.find("b_up") != std::string::npos
                   ? "; rank r holds [W_gate,r; W_up,r]"
                   : ""));
      ts.local_shapes = local[n];
      s.tensors.push_back(std::move(ts));
    };
    add(n, Role::parameter, Elem::value);
    add("d" + n, Role::grad_input, Elem::acc);
    add("new." + n, Role::output, Elem::value);
  }
  s.tensors.push_back(spec::tensor_of(Elem::acc, "loss", Role::output, {1}, {rep, rep, rep, rep},
                                      "the last stage's ranks"));
  s.tensors.push_back(
      spec::tensor_of(Elem::acc, "grad_norm", Role::output, {1}, {rep, rep, rep, rep}));
  s.tensors.push_back(
      spec::tensor_of(Elem::acc, "clip_coef", Role::output, {1}, {rep, rep, rep, rep}));
  for (int r = 0; r < world; ++r) s.calls.push_back(rank_calls(cfg, par, sequences, seq_len, r));
  return s;
}

std::vector<spec::OpSpec> model_example_specs() {
  // Two layers, GQA (2 query heads sharing 1 kv head), SwiGLU, on pp = cp = tp = 2 with
  // sequence parallelism and 2 micro-batches.
  ModelConfig c;
  c.vocab = 8;
  c.hidden = c.ffn = 4;
  c.heads = c.head_dim = c.layers = 2;
  c.activation = Activation::swiglu;
  ModelParallelConfig par;
  par.pp = par.cp = par.tp = par.micro_batches = 2;
  par.sequence_parallel = true;
  return {model_train_step_spec(c, par, 2, 4)};
}

}  // namespace shardcheck
