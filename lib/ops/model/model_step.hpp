// One training step of the model on one rank of the mesh, as a class whose steps are virtual
// members (model.hpp describes the step; model_train_step runs this class). The library's
// step is this class as it is; a subclass that replaces one step is the same step with that one
// thing changed, which is how the model suite writes its mutants
// (properties/suites/model/model_mutants.cpp) and how a user can check a variant of their own.
// Explicitly instantiated for the four element types in model.cpp.
#pragma once

#include "layout/device_mesh.hpp"
#include "ops/attention/head_parallel_attention.hpp"
#include "ops/linear/linear.hpp"
#include "ops/mlp/mlp.hpp"
#include "ops/model/model.hpp"
#include "ops/norm/norm.hpp"
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"
#include "ops/workspace.hpp"
#include "runtime/errors.hpp"

#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck {

// ---------------------------------------------------------------- one rank's context

// The communicators of one rank: the mesh's four dimensions, and the groups the finalize uses.
struct ModelGroups {
  MeshGroups mesh;
  std::unique_ptr<Communicator> dp_cp;           // same pp, tp: ordered by (dp, cp)
  std::unique_ptr<Communicator> model_parallel;  // same dp, cp: ordered by (pp, tp)
  std::unique_ptr<Communicator> embedding;       // first and last stage (tied, pp > 1)

  ModelGroups(Communicator& world, const ModelConfig& cfg, const ModelParallelConfig& par)
      : mesh(world, model_mesh(par)) {
    const DeviceMesh& m = mesh.mesh();
    const std::vector<int> c = mesh.coordinates();
    std::vector<int> dc, mp;
    for (int d = 0; d < par.dp; ++d) {
      for (int k = 0; k < par.cp; ++k) dc.push_back(m.rank_of({c[0], d, k, c[3]}));
    }
    for (int p = 0; p < par.pp; ++p) {
      for (int t = 0; t < par.tp; ++t) mp.push_back(m.rank_of({p, c[1], c[2], t}));
    }
    dp_cp = world.group(dc);
    model_parallel = world.group(mp);
    if (cfg.tied_embedding && par.pp > 1 && (c[0] == 0 || c[0] == par.pp - 1)) {
      const std::vector<int> e{m.rank_of({0, c[1], c[2], c[3]}),
                               m.rank_of({par.pp - 1, c[1], c[2], c[3]})};
      embedding = world.group(e);
    }
  }
  Communicator& pp() const { return mesh.along(0); }
  Communicator& tp() const { return mesh.along(3); }
  Communicator& cp() const { return mesh.along(2); }
};

// One micro-batch on this rank: its sequences and positions, its tokens' ids and targets.
struct MicroBatch {
  std::size_t sequences = 0;               // b
  std::vector<std::size_t> positions;      // this cp rank's, in local order
  std::vector<std::int64_t> ids, targets;  // [b·L_c], sequence-major
  std::vector<std::size_t> token_rows;     // with sequence_parallel: every tp rank's rows
  std::size_t tokens() const { return sequences * positions.size(); }
};

namespace model_detail {

inline std::string str(std::size_t n) { return std::to_string(n); }

template <class T>
Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b) {
  using A = acc_t<T>;
  Tensor<T> c(a.shape());
  for (std::size_t i = 0; i < a.size(); ++i) {
    c[i] = static_cast<T>(static_cast<A>(a[i]) + static_cast<A>(b[i]));
  }
  return c;
}

template <class T>
Tensor<T> reshaped(Tensor<T> t, Shape s) {
  return Tensor<T>(std::move(s), std::move(t.values()));
}

// acc += g, in A (exact conversion of g). acc has the shape of the parameter the op's gradient
// g is of (zero_grads), so a different shape is the library's own bug.
template <class T>
void accumulate_into(Tensor<acc_t<T>>& acc, const Tensor<T>& g) {
  using A = acc_t<T>;
  if (acc.shape() != g.shape()) {
    throw std::logic_error("model_train_step: a gradient of shape " + format_shape(g.shape()) +
                           " for a parameter of shape " + format_shape(acc.shape()));
  }
  for (std::size_t i = 0; i < g.size(); ++i) acc[i] += static_cast<A>(g[i]);
}

// fn(tensor) for every tensor of a ModelParams.
template <class P, class Fn>
void for_each_tensor(P& a, Fn&& fn) {
  for_each_param(a, a, [&](const std::string&, auto& x, auto&) { fn(x); });
}

// Zero gradients with the shards' shapes.
template <class T>
ModelParams<acc_t<T>> zero_grads(const ModelParams<T>& shard) {
  ModelParams<acc_t<T>> g;
  g.layers.resize(shard.layers.size());
  for_each_param(g, shard, [](const std::string&, Tensor<acc_t<T>>& a, const Tensor<T>& p) {
    if (p.ndim() > 0) a = Tensor<acc_t<T>>(p.shape());  // an absent tensor (shape []) stays so
  });
  return g;
}

}  // namespace model_detail

// What the forward of one layer keeps for its backward.
template <class T>
struct LayerSaved {
  Tensor<T> x, a, h, b;
  AttentionLayerWeights<T> weights;
  AttentionLayerOutput<T> attention;
  MlpForward<T> mlp;
};

// What the last stage keeps: the final norm's input and output, the logits, the loss's saved.
template <class T>
struct HeadSaved {
  Tensor<T> x, f, logits;
  VocabCrossEntropySaved<T> ce;
};

// The step on one rank, step by step: model_train_step runs it. Each step is a virtual member
// a subclass may replace (the suite's mutants are this class with one step changed:
// properties/suites/model/model_mutants.cpp); run() calls them in the order the header of
// model.hpp describes.
template <class T>
class ModelRankStep {
 public:
  using A = acc_t<T>;

  ModelRankStep(Communicator& world, const ModelConfig& cfg, const ModelParallelConfig& par,
                const ModelParams<T>& shard, const ModelBatch& batch)
      : cfg_(cfg),
        par_(par),
        shard_(shard),
        batch_(batch),
        groups_(world, cfg, par),
        where_("model_train_step on rank " + std::to_string(world.rank()) + " (" +
               model_mesh(par).to_string() + " coordinates pp " +
               std::to_string(groups_.mesh.coordinates()[0]) + ", dp " +
               std::to_string(groups_.mesh.coordinates()[1]) + ", cp " +
               std::to_string(groups_.mesh.coordinates()[2]) + ", tp " +
               std::to_string(groups_.mesh.coordinates()[3]) + "): ") {
    check_batch();
    coords_ = model_coordinates(cfg, par, world.rank());
    sequences_ = dp_sequences(par, batch.sequences, coords_.dp);
    check_shard();
    make_micro_batches();
  }
  virtual ~ModelRankStep() = default;
  ModelRankStep(const ModelRankStep&) = delete;
  ModelRankStep& operator=(const ModelRankStep&) = delete;
  ModelRankStep(ModelRankStep&&) = delete;
  ModelRankStep& operator=(ModelRankStep&&) = delete;

  ModelStepResult<T> run(const OptimizerConfig& opt) {
    ModelStepResult<T> out;
    grads_ = model_detail::zero_grads(shard_);
    const auto m = micro_.size();
    saved_layers_.assign(m, {});
    saved_head_.assign(m, {});
    kept_.resize(m);
    out.input_grads.resize(coords_.first_stage() ? m : 0);
    for (std::size_t k = 0; k < m; ++k) forward(k);
    for (std::size_t k = m; k-- > 0;) {
      Tensor<T> dx0 = backward(k);
      if (coords_.first_stage()) out.input_grads[k] = std::move(dx0);
    }
    out.tokens = count_tokens();
    reduce_over_data_parallel();
    sum_tied_embedding();
    scale_by_tokens(out.tokens);
    if (coords_.last_stage(par_)) out.loss = global_loss(out.tokens);
    out.grad_norm = global_norm();
    out.clip_coef = clip_coefficient(opt, out.grad_norm);
    out.params = sgd(opt, out.clip_coef);
    out.grads = std::move(grads_);
    return out;
  }

 protected:
  // ---- checks and the micro-batches

  void check_batch() const {
    const std::size_t n = batch_.sequences * batch_.seq_len;
    if (batch_.ids.size() != n || batch_.targets.size() != n) {
      throw UsageError(where_ + "the batch has " + model_detail::str(batch_.ids.size()) +
                       " ids and " + model_detail::str(batch_.targets.size()) +
                       " targets but sequences·seq_len = " + model_detail::str(batch_.sequences) +
                       "·" + model_detail::str(batch_.seq_len) + " = " + model_detail::str(n) +
                       "; pass one id and one target per token");
    }
  }

  void check_shard() const {
    const bool first = coords_.first_stage(), last = coords_.last_stage(par_);
    if (shard_.layers.size() != coords_.layers.size) {
      throw UsageError(where_ + "the shard holds " + model_detail::str(shard_.layers.size()) +
                       " layers but this stage holds " + model_detail::str(coords_.layers.size) +
                       " (layers [" + model_detail::str(coords_.layers.offset) + ", " +
                       model_detail::str(coords_.layers.offset + coords_.layers.size) +
                       ") under layer_split); pass shard_model_params' shard");
    }
    if (first == (shard_.embedding.ndim() == 0)) {
      throw UsageError(where_ +
                       (first ? "the first stage needs the embedding's vocab rows"
                              : "only the first stage holds the embedding") +
                       " (embedding is " + format_shape(shard_.embedding.shape()) +
                       "); pass shard_model_params' shard");
    }
    const bool wants_output = last && (!cfg_.tied_embedding || par_.pp > 1);
    if (wants_output == (shard_.output.ndim() == 0)) {
      throw UsageError(where_ +
                       (wants_output ? "the last stage needs the output projection's "
                                       "vocab rows"
                                     : "this rank holds no output projection") +
                       " (output is " + format_shape(shard_.output.shape()) +
                       "); pass shard_model_params' shard");
    }
  }

  void make_micro_batches() {
    const std::vector<Piece> pieces = micro_batch_pieces(par_, sequences_.size);
    const auto positions = model_cp_positions(par_, batch_.seq_len, coords_.cp);
    for (const Piece& p : pieces) {
      MicroBatch mb;
      mb.sequences = p.size;
      mb.positions = positions;
      for (std::size_t s = 0; s < p.size; ++s) {
        const std::size_t seq = sequences_.offset + p.offset + s;
        for (const std::size_t t : positions) {
          mb.ids.push_back(batch_.ids[seq * batch_.seq_len + t]);
          mb.targets.push_back(batch_.targets[seq * batch_.seq_len + t]);
        }
      }
      if (par_.sequence_parallel) {
        mb.token_rows = split_sizes(par_.token_split, mb.tokens(), par_.tp);
      }
      micro_.push_back(std::move(mb));
    }
  }

  // This rank's activation rows of micro-batch k: its token rows with SP, else all tokens.
  std::size_t rows(std::size_t k) const {
    const MicroBatch& mb = micro_[k];
    return par_.sequence_parallel ? mb.token_rows[static_cast<std::size_t>(coords_.tp)]
                                  : mb.tokens();
  }

  // ---- the ops' configurations for micro-batch k

  // The ops' configurations for micro-batch k (model.hpp: the spec derives the same ones).
  SequenceParallelNormConfig norm_config(std::size_t k) const {
    return model_norm_config(cfg_, par_, micro_[k].tokens());
  }
  MlpConfig mlp_config(std::size_t k) const {
    return model_mlp_config(cfg_, par_, micro_[k].tokens());
  }
  ColumnParallelConfig output_config(std::size_t k) const {
    return model_output_config(cfg_, par_, micro_[k].tokens());
  }
  VocabEmbeddingConfig embedding_config() const { return model_embedding_config(cfg_, par_); }
  VocabCrossEntropyConfig loss_config() const { return model_loss_config(cfg_, par_); }

  // A micro-batch's gradient (T, as the op returns it) added into its accumulator (A).
  virtual void accumulate(Tensor<A>& acc, const Tensor<T>& g) {
    model_detail::accumulate_into(acc, g);
  }

  const Tensor<T>& output_weight() const {
    return shard_.output.ndim() == 0 ? shard_.embedding : shard_.output;
  }
  // The output projection's gradient: grads_.output, or with a tied embedding on one stage a
  // buffer of its own, added to E's after the dp × cp reduction as the embedding group's
  // all_reduce adds the two stages' copies (so the bits do not depend on pp).
  Tensor<A>& output_grad() {
    if (shard_.output.ndim() > 0) return grads_.output;
    if (tied_output_grad_.empty()) tied_output_grad_ = Tensor<A>(shard_.embedding.shape());
    return tied_output_grad_;
  }

  // ---- the norms: sequence-parallel on token rows, or on every tp rank whole

  virtual Tensor<T> norm(std::size_t k, const Tensor<T>& x, const Tensor<T>& gamma,
                         const Tensor<T>& beta) {
    if (par_.sequence_parallel) {
      return sequence_parallel_norm(groups_.tp(), norm_config(k), x, gamma, beta);
    }
    return norm_forward(cfg_.norm, x, gamma, beta);
  }

  virtual NormGrads<T> norm_grads(std::size_t k, const Tensor<T>& x, const Tensor<T>& gamma,
                                  const Tensor<T>& dy) {
    if (par_.sequence_parallel) {
      return sequence_parallel_norm_backward(groups_.tp(), norm_config(k), x, gamma, dy);
    }
    return norm_backward(cfg_.norm, x, gamma, dy);
  }

  // ---- forward

  // The attention layer's input and output: [b, L_c, H] without SP, the token rows with it.
  Tensor<T> to_layer(std::size_t k, const Tensor<T>& x) const {
    if (par_.sequence_parallel) return x;
    return model_detail::reshaped(
        x, Shape{micro_[k].sequences, micro_[k].positions.size(), cfg_.hidden});
  }
  Tensor<T> from_layer(std::size_t k, const Tensor<T>& y) const {
    return model_detail::reshaped(y, Shape{rows(k), cfg_.hidden});
  }

  // Micro-batch k's input to this stage: the embedding on the first stage, the previous
  // stage's activation (recv, tag k) on the others.
  virtual Tensor<T> stage_input(std::size_t k) {
    if (coords_.first_stage()) {
      return vocab_parallel_embedding(groups_.tp(), embedding_config(), micro_[k].ids,
                                      shard_.embedding);
    }
    Tensor<T> x(Shape{rows(k), cfg_.hidden});
    groups_.pp().recv(x.span(), coords_.pp - 1, static_cast<int>(k));
    return x;
  }

  virtual void forward(std::size_t k) {
    const MicroBatch& mb = micro_[k];
    Tensor<T> x = stage_input(k);
    const HeadParallelConfig hp = model_attention_config(cfg_, par_, mb.sequences, batch_.seq_len);
    for (std::size_t l = 0; l < shard_.layers.size(); ++l) {
      const TransformerLayerParams<T>& w = shard_.layers[l];
      LayerSaved<T> s;
      s.x = x;
      s.a = norm(k, x, w.norm1_gamma, w.norm1_beta);
      s.weights = attention_weights(w);
      s.attention = attention_layer(groups_.tp(), groups_.cp(), hp, to_layer(k, s.a), s.weights);
      s.h = model_detail::add(x, from_layer(k, s.attention.y));
      s.b = norm(k, s.h, w.norm2_gamma, w.norm2_beta);
      s.mlp = parallel_mlp(groups_.tp(), mlp_config(k), s.b, w.w_up, w.b_up, w.w_down, w.b_down);
      x = model_detail::add(s.h, s.mlp.y);
      keep_layer(k, s);
      saved_layers_[k].push_back(std::move(s));
    }
    if (!coords_.last_stage(par_)) {
      groups_.pp().send(std::span<const T>(x.span()), coords_.pp + 1, static_cast<int>(k));
      return;
    }
    HeadSaved<T>& h = saved_head_[k];
    h.x = std::move(x);
    h.f = norm(k, h.x, shard_.final_gamma, shard_.final_beta);
    h.logits =
        column_parallel_linear(groups_.tp(), output_config(k), h.f, output_weight(), Tensor<T>()).y;
    auto ce = vocab_parallel_cross_entropy(groups_.tp(), loss_config(), h.logits, mb.targets);
    h.ce = std::move(ce.saved);
    loss_sum_ += static_cast<A>(ce.loss[0]);
    keep_head(k, h);
  }

  // What the step keeps of micro-batch k for its backward, counted in the rank's live bytes
  // until that backward ends (ops/workspace.hpp; budget/model_activations.hpp models it): per
  // layer its input x, the norms' outputs a and b, h, the attention's q, k, v, out and lse (y is
  // dropped, the backward does not read it), the MLP's pre-activation h (its y dropped); on the
  // last stage the final norm's input and output, the logits and the loss's max and sum_exp.
  void keep_layer(std::size_t k, LayerSaved<T>& s) {
    s.attention.y = Tensor<T>();
    s.mlp.y = Tensor<T>();
    const Workspace ws = Workspace::of_this_rank();
    for (const Tensor<T>* t : {&s.x, &s.a, &s.h, &s.b, &s.attention.q, &s.attention.k,
                               &s.attention.v, &s.attention.attn.out, &s.mlp.h}) {
      kept_[k].push_back(ws.keep(*t));
    }
    kept_[k].push_back(ws.keep(s.attention.attn.lse));
  }
  void keep_head(std::size_t k, const HeadSaved<T>& h) {
    const Workspace ws = Workspace::of_this_rank();
    for (const Tensor<T>* t : {&h.x, &h.f, &h.logits}) kept_[k].push_back(ws.keep(*t));
    kept_[k].push_back(ws.keep(h.ce.max));
    kept_[k].push_back(ws.keep(h.ce.sum_exp));
  }

  // ---- backward: returns the first stage's ∂(Σ loss)/∂x_0 (empty elsewhere)

  // The gradient the backward of micro-batch k starts from, ∂(what is summed)/∂(its loss sum):
  // 1 (the per-token loss: the division by N comes in scale_by_tokens).
  virtual Tensor<T> loss_seed(std::size_t /*k*/) {
    return Tensor<T>(Shape{1}, std::vector<T>{T(1)});
  }

  virtual Tensor<T> backward(std::size_t k) {
    const MicroBatch& mb = micro_[k];
    Tensor<T> dx;
    if (coords_.last_stage(par_)) {
      HeadSaved<T>& h = saved_head_[k];
      const Tensor<T> dlogits = vocab_parallel_cross_entropy_backward(
          groups_.tp(), loss_config(), h.logits, mb.targets, h.ce, loss_seed(k));
      LinearGrads<T> go = column_parallel_linear_backward(groups_.tp(), output_config(k), h.f,
                                                          output_weight(), false, dlogits);
      accumulate(output_grad(), go.dw);
      NormGrads<T> gf = norm_grads(k, h.x, shard_.final_gamma, go.dx);
      accumulate(grads_.final_gamma, gf.dgamma);
      accumulate(grads_.final_beta, gf.dbeta);
      dx = std::move(gf.dx);
    } else {
      dx = Tensor<T>(Shape{rows(k), cfg_.hidden});
      groups_.pp().recv(dx.span(), coords_.pp + 1, static_cast<int>(k));
    }
    const HeadParallelConfig hp = model_attention_config(cfg_, par_, mb.sequences, batch_.seq_len);
    for (std::size_t l = shard_.layers.size(); l-- > 0;) {
      const TransformerLayerParams<T>& w = shard_.layers[l];
      TransformerLayerParams<A>& g = grads_.layers[l];
      LayerSaved<T>& s = saved_layers_[k][l];
      // x_next = h + mlp(norm2(h))
      MlpGrads<T> gm = parallel_mlp_backward(groups_.tp(), mlp_config(k), s.b, w.w_up, w.w_down,
                                             s.mlp, cfg_.linear_bias, dx);
      accumulate(g.w_up, gm.dw_up);
      accumulate(g.b_up, gm.db_up);
      accumulate(g.w_down, gm.dw_down);
      accumulate(g.b_down, gm.db_down);
      NormGrads<T> g2 = norm_grads(k, s.h, w.norm2_gamma, gm.dx);
      accumulate(g.norm2_gamma, g2.dgamma);
      accumulate(g.norm2_beta, g2.dbeta);
      const Tensor<T> dh = model_detail::add(dx, g2.dx);
      // h = x + attention(norm1(x))
      AttentionLayerGrads<T> ga =
          attention_layer_backward_partial(groups_.tp(), groups_.cp(), hp, to_layer(k, s.a),
                                           s.weights, s.attention, to_layer(k, dh));
      all_reduce_replicated_kv_grads(groups_.tp(), hp, ga);
      accumulate(g.wq, ga.dwq);
      accumulate(g.bq, ga.dbq);
      accumulate(g.wk, ga.dwk);
      accumulate(g.bk, ga.dbk);
      accumulate(g.wv, ga.dwv);
      accumulate(g.bv, ga.dbv);
      accumulate(g.wo, ga.dwo);
      accumulate(g.bo, ga.dbo);
      NormGrads<T> g1 = norm_grads(k, s.x, w.norm1_gamma, from_layer(k, ga.dx));
      accumulate(g.norm1_gamma, g1.dgamma);
      accumulate(g.norm1_beta, g1.dbeta);
      dx = model_detail::add(dh, g1.dx);
    }
    saved_layers_[k].clear();
    kept_[k].clear();
    if (!coords_.first_stage()) {
      groups_.pp().send(std::span<const T>(dx.span()), coords_.pp - 1, static_cast<int>(k));
      return {};
    }
    accumulate(grads_.embedding,
               vocab_parallel_embedding_backward(groups_.tp(), embedding_config(), mb.ids, dx));
    return dx;
  }

  // ---- finalize, norm, SGD

  virtual std::size_t count_tokens() const {
    std::size_t n = 0;
    for (const std::int64_t t : batch_.targets)
      n += (!cfg_.ignore_index || t != *cfg_.ignore_index);
    return n;
  }

  // finalize, 1: every gradient over dp × cp, one all_reduce per tensor (the same order on
  // every tp rank).
  virtual void reduce_over_data_parallel() {
    auto reduce = [&](const std::string& name, Tensor<A>& g) {
      Communicator& group = data_parallel_group(name);
      if (!g.empty() && group.size() > 1) {
        group.all_reduce(g.span(), ReduceOp::sum, par_.reduce_algorithm);
      }
    };
    for_each_param(grads_, grads_,
                   [&](const std::string& n, Tensor<A>& g, auto&) { reduce(n, g); });
    reduce("output", tied_output_grad_);
  }

  // The group a parameter's gradient is summed over in the finalize: dp × cp (the rank saw only
  // its sequences' and its positions' tokens).
  virtual Communicator& data_parallel_group(const std::string& /*name*/) { return *groups_.dp_cp; }

  // finalize, 2: a tied embedding's two uses' gradients summed, over the embedding group when
  // they are on two stages, here when on one (a + b: the same bits as the group's sum of two).
  virtual void sum_tied_embedding() {
    if (groups_.embedding) {
      // The two ranks hold the same vocab rows (the same tp coordinate): both or neither empty.
      Tensor<A>& g = coords_.first_stage() ? grads_.embedding : grads_.output;
      if (!g.empty()) groups_.embedding->all_reduce(g.span(), ReduceOp::sum, par_.reduce_algorithm);
    } else if (!tied_output_grad_.empty()) {
      for (std::size_t i = 0; i < tied_output_grad_.size(); ++i) {
        grads_.embedding[i] += tied_output_grad_[i];
      }
    }
  }

  // finalize, 3: ∂(Σ loss)/∂p to ∂loss/∂p, times fl(1/N) in A.
  virtual void scale_by_tokens(std::size_t n) {
    scale_grads(n == 0 ? A(0) : A(1) / static_cast<A>(n));
  }

  // Every gradient times `by`, in A.
  void scale_grads(A by) {
    model_detail::for_each_tensor(grads_, [&](Tensor<A>& g) {
      for (A& v : g.values()) v *= by;
    });
  }

  virtual A global_loss(std::size_t n) {
    A sum = loss_sum_;
    if (par_.dp * par_.cp > 1) {
      groups_.dp_cp->all_reduce(std::span<A>(&sum, 1), ReduceOp::sum, par_.reduce_algorithm);
    }
    return n == 0 ? A(0) : sum / static_cast<A>(n);
  }

  // Whether this rank counts a tensor in the global norm: the one owner of every element (a tp
  // shard on its rank; a tensor replicated over tp on tp rank 0; a kv head shared by a kv group
  // on its first rank; a tied embedding on the first stage).
  virtual bool counted_in_norm(const std::string& name) const {
    const HeadParallelConfig hp = model_attention_config(cfg_, par_, 0, 1);
    const HeadAssignment heads = head_assignment(hp, par_.tp, coords_.tp);
    const std::string leaf = name.substr(name.rfind('.') + 1);
    if (leaf == "output") return !cfg_.tied_embedding;
    if (leaf == "embedding" || leaf == "wq" || leaf == "bq" || leaf == "wo" || leaf == "w_up" ||
        leaf == "b_up" || leaf == "w_down") {
      return true;
    }
    if (leaf == "wk" || leaf == "bk" || leaf == "wv" || leaf == "bv") {
      return heads.kv_group_first == coords_.tp;
    }
    return coords_.tp == 0;  // the norms, bo, b_down: replicated over tp
  }

  virtual A global_norm() {
    A sq(0);
    for_each_param(grads_, grads_, [&](const std::string& name, const Tensor<A>& g, auto&) {
      if (!counted_in_norm(name)) return;
      for (const A v : g.values()) sq += v * v;
    });
    if (par_.pp * par_.tp > 1) {
      groups_.model_parallel->all_reduce(std::span<A>(&sq, 1), ReduceOp::sum,
                                         par_.reduce_algorithm);
    }
    using std::sqrt;
    return sqrt(sq);
  }

  virtual A clip_coefficient(const OptimizerConfig& opt, A norm) const {
    if (!(opt.max_grad_norm > 0)) return A(1);
    const A c = static_cast<A>(opt.max_grad_norm) / (norm + static_cast<A>(opt.clip_eps));
    return c < A(1) ? c : A(1);
  }

  virtual ModelParams<T> sgd(const OptimizerConfig& opt, A coef) {
    ModelParams<T> p = shard_;
    const A step = static_cast<A>(opt.learning_rate) * coef;
    for_each_param(p, grads_, [&](const std::string&, Tensor<T>& w, const Tensor<A>& g) {
      for (std::size_t i = 0; i < w.size(); ++i) {
        w[i] = static_cast<T>(static_cast<A>(w[i]) - step * g[i]);
      }
    });
    return p;
  }

  const ModelConfig& cfg_;
  const ModelParallelConfig& par_;
  const ModelParams<T>& shard_;
  const ModelBatch& batch_;
  ModelGroups groups_;
  std::string where_;
  ModelCoordinates coords_;
  Piece sequences_;  // this dp rank's sequences of the batch
  std::vector<MicroBatch> micro_;
  std::vector<std::vector<LayerSaved<T>>> saved_layers_;
  std::vector<HeadSaved<T>> saved_head_;
  std::vector<std::vector<CountedBytes>> kept_;  // micro-batch k's kept bytes (keep_layer)
  ModelParams<A> grads_;
  Tensor<A> tied_output_grad_;  // the output projection's gradient when it is E on this stage
  A loss_sum_{0};
};

}  // namespace shardcheck
