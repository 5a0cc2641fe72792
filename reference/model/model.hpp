// The dense training step of the decoder-only transformer (lib/ops/model/model_config.hpp) in
// the high-precision scalar R: the reference of lib/ops/model/model.hpp's model_train_step,
// composed of the other families' references, op for op as the model defines it:
//   x_0 = E[ids]                                                  (vocab/vocab_embedding.hpp)
//   per layer: a = norm1(x); q, k, v = a·Wqᵀ + bq, ...; o = attention(q, k, v), causal
//              (attention/); h = x + o·Woᵀ + bo; b = norm2(h); x = h + mlp(b)       (mlp/)
//   f = final_norm(x); logits = f·Wᵀ (W = E when tied); Σ_t loss_t (vocab cross-entropy,
//   reduction sum, ignore_index), loss = Σ_t loss_t / N
//   backward with dloss = 1 (the loss sum's gradient), every parameter gradient divided by N;
//   ‖g‖₂ over every parameter once; coef; p' = p − lr·coef·g (in R: not rounded)
// Nothing here knows of a mesh: the partition changes only the implementation's rounding, which
// model_bound.hpp bounds. The argument order is the library's (config, optimizer, parameters,
// batch), the dense parameters in place of a rank's shards.
#pragma once

#include "ops/model/model_config.hpp"
#include "reference/attention/attention.hpp"
#include "reference/linear/linear.hpp"
#include "reference/mlp/mlp.hpp"
#include "reference/norm/norm.hpp"
#include "reference/precision.hpp"
#include "reference/vocab/vocab_cross_entropy.hpp"
#include "reference/vocab/vocab_embedding.hpp"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardcheck::reference {

template <class R = hp>
struct ModelStepExact {
  R loss{0};               // Σ_t loss_t / N (0 when N = 0)
  std::size_t tokens = 0;  // N
  ModelParams<R> grads;    // ∂loss/∂p for every parameter (output empty when tied)
  R grad_norm{0}, clip_coef{1};
  ModelParams<R> params;  // p − lr·coef·g, exact
  Tensor<R> input_grad;   // ∂(Σ_t loss_t)/∂x_0 [B·L, H], tokens in batch order
};

// The attention configuration of the model's layers over sequences of length L.
inline AttentionConfig model_attention(const ModelConfig& cfg, std::size_t seq_len) {
  AttentionConfig a;
  a.q_heads = cfg.heads;
  a.kv_heads = cfg.kv_heads;
  a.head_dim = cfg.head_dim;
  a.mask.kind = MaskKind::causal;
  a.mask.q_len = seq_len;
  a.mask.k_len = seq_len;
  return a;
}

namespace detail {

template <class R>
Tensor<R> add(const Tensor<R>& a, const Tensor<R>& b) {
  Tensor<R> c(a.shape());
  for (std::size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];
  return c;
}

template <class R>
Tensor<R> reshape(const Tensor<R>& t, Shape s) {
  return Tensor<R>(std::move(s), t.values());
}

// What one layer's forward keeps for its backward (values in R).
template <class R>
struct LayerValues {
  Tensor<R> x, a, q, k, v, o, h, b;  // tokens × features ([B·L, ·]); q/k/v/o per head flat
  AttentionOutput<R> attn;           // out [B, L, h, d], lse
  MlpForward<R> mlp;
};

template <class R>
LayerValues<R> layer_forward(const ModelConfig& cfg, const TransformerLayerParams<R>& w,
                             const Tensor<R>& x, std::size_t B, std::size_t L) {
  const std::size_t hd = cfg.heads * cfg.head_dim, kd = cfg.kv_heads * cfg.head_dim;
  const AttentionConfig att = model_attention(cfg, L);
  const R eps(cfg.norm.eps);
  LayerValues<R> s;
  s.x = x;
  s.a = reference::norm_forward<R>(cfg.norm.kind, x, w.norm1_gamma, w.norm1_beta, eps).y;
  s.q = reference::linear<R>(s.a, w.wq, w.bq).value;
  s.k = reference::linear<R>(s.a, w.wk, w.bk).value;
  s.v = reference::linear<R>(s.a, w.wv, w.bv).value;
  s.attn = reference::attention_forward<R>(att, reshape(s.q, Shape{B, L, cfg.heads, cfg.head_dim}),
                                           reshape(s.k, Shape{B, L, cfg.kv_heads, cfg.head_dim}),
                                           reshape(s.v, Shape{B, L, cfg.kv_heads, cfg.head_dim}));
  s.o = reshape(s.attn.out, Shape{B * L, hd});
  (void)kd;
  s.h = add(x, reference::linear<R>(s.o, w.wo, w.bo).value);
  s.b = reference::norm_forward<R>(cfg.norm.kind, s.h, w.norm2_gamma, w.norm2_beta, eps).y;
  s.mlp = reference::mlp<R>(s.b, w.w_up, w.b_up, w.w_down, w.b_down, cfg.activation);
  return s;
}

// Returns ∂/∂x of the layer for the upstream dx (∂ of its output), adding the parameters'
// gradients into g.
template <class R>
Tensor<R> layer_backward(const ModelConfig& cfg, const TransformerLayerParams<R>& w,
                         const LayerValues<R>& s, const Tensor<R>& dy, std::size_t B, std::size_t L,
                         TransformerLayerParams<R>& g) {
  const bool bias = cfg.linear_bias;
  const AttentionConfig att = model_attention(cfg, L);
  const R eps(cfg.norm.eps);
  // x_next = h + mlp(norm2(h))
  const MlpGrads<R> gm =
      reference::mlp_backward<R>(s.b, w.w_up, w.w_down, s.mlp, bias, dy, cfg.activation);
  g.w_up = gm.dw_up;
  g.b_up = gm.db_up;
  g.w_down = gm.dw_down;
  g.b_down = gm.db_down;
  const auto g2 = reference::norm_backward<R>(cfg.norm.kind, s.h, w.norm2_gamma, gm.dx, eps);
  g.norm2_gamma = g2.dgamma;
  g.norm2_beta = g2.dbeta;
  const Tensor<R> dh = add(dy, g2.dx);
  // h = x + attention(norm1(x))·Woᵀ + bo
  const auto go = reference::linear_backward<R>(s.o, w.wo, bias, dh);
  g.wo = go.dw.value;
  g.bo = go.db.value;
  const auto ga = reference::attention_backward<R>(
      att, reshape(s.q, Shape{B, L, cfg.heads, cfg.head_dim}),
      reshape(s.k, Shape{B, L, cfg.kv_heads, cfg.head_dim}),
      reshape(s.v, Shape{B, L, cfg.kv_heads, cfg.head_dim}), s.attn,
      reshape(go.dx.value, Shape{B, L, cfg.heads, cfg.head_dim}));
  const std::size_t hd = cfg.heads * cfg.head_dim, kd = cfg.kv_heads * cfg.head_dim;
  const auto gq = reference::linear_backward<R>(s.a, w.wq, bias, reshape(ga.dq, Shape{B * L, hd}));
  const auto gk = reference::linear_backward<R>(s.a, w.wk, bias, reshape(ga.dk, Shape{B * L, kd}));
  const auto gv = reference::linear_backward<R>(s.a, w.wv, bias, reshape(ga.dv, Shape{B * L, kd}));
  g.wq = gq.dw.value;
  g.bq = gq.db.value;
  g.wk = gk.dw.value;
  g.bk = gk.db.value;
  g.wv = gv.dw.value;
  g.bv = gv.db.value;
  const Tensor<R> da = add(add(gq.dx.value, gk.dx.value), gv.dx.value);
  const auto g1 = reference::norm_backward<R>(cfg.norm.kind, s.x, w.norm1_gamma, da, eps);
  g.norm1_gamma = g1.dgamma;
  g.norm1_beta = g1.dbeta;
  return add(dh, g1.dx);
}

// fn(tensor_a, tensor_b) over every parameter tensor of two ModelParams.
template <class P, class Q, class Fn>
void for_each_param_pair(P& a, Q& b, Fn&& fn) {
  fn(a.embedding, b.embedding);
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    auto& x = a.layers[l];
    auto& y = b.layers[l];
    for (auto [p, q] : {std::pair{&x.norm1_gamma, &y.norm1_gamma},
                        {&x.norm1_beta, &y.norm1_beta},
                        {&x.wq, &y.wq},
                        {&x.bq, &y.bq},
                        {&x.wk, &y.wk},
                        {&x.bk, &y.bk},
                        {&x.wv, &y.wv},
                        {&x.bv, &y.bv},
                        {&x.wo, &y.wo},
                        {&x.bo, &y.bo},
                        {&x.norm2_gamma, &y.norm2_gamma},
                        {&x.norm2_beta, &y.norm2_beta},
                        {&x.w_up, &y.w_up},
                        {&x.b_up, &y.b_up},
                        {&x.w_down, &y.w_down},
                        {&x.b_down, &y.b_down}}) {
      fn(*p, *q);
    }
  }
  fn(a.final_gamma, b.final_gamma);
  fn(a.final_beta, b.final_beta);
  fn(a.output, b.output);
}

}  // namespace detail

// The number of targets that count (not ignore_index).
inline std::size_t counted_targets(const ModelConfig& cfg, const ModelBatch& batch) {
  std::size_t n = 0;
  for (const std::int64_t t : batch.targets) n += !cfg.ignore_index || t != *cfg.ignore_index;
  return n;
}

// The global norm's coefficient: max/(norm + eps) when clipping applies and that is < 1.
template <class R>
R clip_coefficient(const OptimizerConfig& opt, const R& norm) {
  if (!(opt.max_grad_norm > 0)) return R(1);
  const R c = R(opt.max_grad_norm) / (norm + R(opt.clip_eps));
  return c < R(1) ? c : R(1);
}

// The step. @throws std::invalid_argument on shapes, ids or targets the families' references
// refuse.
template <HighPrecision R = hp>
ModelStepExact<R> model_train_step(const ModelConfig& cfg, const OptimizerConfig& opt,
                                   const ModelParams<R>& p, const ModelBatch& batch) {
  using std::sqrt;
  const std::size_t B = batch.sequences, L = batch.seq_len, V = cfg.vocab;
  if (p.layers.size() != cfg.layers) {
    throw std::invalid_argument("reference::model_train_step: " + std::to_string(p.layers.size()) +
                                " layers given, cfg.layers " + std::to_string(cfg.layers));
  }
  const R eps(cfg.norm.eps);
  const Tensor<R>& W = cfg.tied_embedding ? p.embedding : p.output;
  // Forward.
  std::vector<detail::LayerValues<R>> saved;
  Tensor<R> x = reference::embedding<R>(batch.ids, p.embedding);
  for (const auto& w : p.layers) {
    saved.push_back(detail::layer_forward<R>(cfg, w, x, B, L));
    x = detail::add(saved.back().h, saved.back().mlp.y);
  }
  const Tensor<R> f =
      reference::norm_forward<R>(cfg.norm.kind, x, p.final_gamma, p.final_beta, eps).y;
  const Tensor<R> logits = reference::linear<R>(f, W, Tensor<R>()).value;
  CrossEntropyOptions ce;
  ce.ignore_index = cfg.ignore_index;
  ce.reduction = LossReduction::sum;
  const Tensor<R> one(Shape{1}, std::vector<R>{R(1)});
  const auto loss =
      reference::cross_entropy<R>(ce, logits, batch.targets, one, arithmetic_of<double>());
  ModelStepExact<R> out;
  out.tokens = counted_targets(cfg, batch);
  out.loss = out.tokens == 0 ? R(0) : loss.loss[0] / R(out.tokens);
  // Backward of the loss sum.
  ModelParams<R>& g = out.grads;
  g.layers.resize(cfg.layers);
  const auto go = reference::linear_backward<R>(f, W, false, loss.grad);
  const auto gf = reference::norm_backward<R>(cfg.norm.kind, x, p.final_gamma, go.dx.value, eps);
  g.final_gamma = gf.dgamma;
  g.final_beta = gf.dbeta;
  Tensor<R> dx = gf.dx;
  for (std::size_t l = cfg.layers; l-- > 0;) {
    dx = detail::layer_backward<R>(cfg, p.layers[l], saved[l], dx, B, L, g.layers[l]);
  }
  out.input_grad = dx;
  g.embedding =
      reference::embedding_backward<R>(batch.ids, dx, V, std::nullopt, arithmetic_of<double>()).dw;
  if (cfg.tied_embedding) {
    g.embedding = detail::add(g.embedding, go.dw.value);
  } else {
    g.output = go.dw.value;
  }
  // The mean's gradient, the norm, the step.
  R sq(0);
  detail::for_each_param_pair(g, g, [&](Tensor<R>& t, Tensor<R>&) {
    for (R& v : t.values()) {
      v = out.tokens == 0 ? R(0) : v / R(out.tokens);
      sq += v * v;
    }
  });
  out.grad_norm = sqrt(sq);
  out.clip_coef = clip_coefficient(opt, out.grad_norm);
  out.params = p;
  const R step = R(opt.learning_rate) * out.clip_coef;
  detail::for_each_param_pair(out.params, g, [&](Tensor<R>& w, Tensor<R>& d) {
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= step * d[i];
  });
  return out;
}

}  // namespace shardcheck::reference
