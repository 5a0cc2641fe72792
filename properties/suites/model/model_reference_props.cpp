// The model reference's own checks (reference/model/): the bound's values are the definition's
// (the two are written apart: model.hpp composes the families' references, model_bound.hpp
// propagates values and bounds op by op), and the definition's gradients agree with central
// finite differences of its loss in high precision, which checks the chain rule's wiring through
// the whole step (residuals, tied embedding, the division by N) that no family's own check sees.
#include "testing/reference_gen.hpp"

#include "reference/model/model.hpp"
#include "reference/model/model_bound.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace shardcheck::props::ref::model_props {
namespace {

using reference::hp;

// Values k/16, k in [−16, 16]: exact in hp, O(1) like the suite's weights.
Tensor<hp> sixteenths(Shape shape, int scale_down) {
  const auto v = *rc::gen::container<std::vector<int>>(numel(shape), uniform(-16, 16));
  Tensor<hp> t(std::move(shape));
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = ldexp(hp(v[i]) / 16, -scale_down);
  return t;
}

struct Drawn {
  ModelConfig cfg;
  ModelParams<hp> params;
  ModelBatch batch;
};

Drawn draw() {
  Drawn d;
  auto& c = d.cfg;
  c.layers = *uniform<std::size_t>(0, 2);
  c.hidden = *uniform<std::size_t>(1, 4);
  c.head_dim = *uniform<std::size_t>(1, 2);
  c.kv_heads = *uniform<std::size_t>(1, 2);
  c.heads = c.kv_heads * *uniform<std::size_t>(1, 2);
  c.ffn = *uniform<std::size_t>(1, 4);
  c.vocab = *uniform<std::size_t>(1, 5);
  c.norm.kind =
      *rc::gen::element(NormKind::layer_norm, NormKind::rms_norm, NormKind::layer_norm_no_bias);
  c.norm.eps = 1.0 / 64;
  c.activation = *rc::gen::element(Activation::gelu, Activation::gelu_tanh, Activation::swiglu);
  c.linear_bias = *rc::gen::arbitrary<bool>();
  c.tied_embedding = *rc::gen::arbitrary<bool>();
  // The parameters written out here, not taken from lib/ (the reference's checks do not link
  // the library): O(1) values, matrices 2^-1 of the norms' scale, biases and betas 2^-2.
  const std::size_t H = c.hidden, hd = c.heads * c.head_dim, kd = c.kv_heads * c.head_dim;
  const std::size_t kf = (c.activation == Activation::swiglu ? 2 : 1) * c.ffn;
  const bool beta = c.norm.kind == NormKind::layer_norm;
  auto& p = d.params;
  p.embedding = sixteenths({c.vocab, H}, 0);
  for (std::size_t l = 0; l < c.layers; ++l) {
    TransformerLayerParams<hp> w;
    w.norm1_gamma = sixteenths({H}, 0);
    w.norm2_gamma = sixteenths({H}, 0);
    if (beta) {
      w.norm1_beta = sixteenths({H}, 2);
      w.norm2_beta = sixteenths({H}, 2);
    }
    w.wq = sixteenths({hd, H}, 1);
    w.wk = sixteenths({kd, H}, 1);
    w.wv = sixteenths({kd, H}, 1);
    w.wo = sixteenths({H, hd}, 1);
    w.w_up = sixteenths({kf, H}, 1);
    w.w_down = sixteenths({H, c.ffn}, 1);
    if (c.linear_bias) {
      for (auto [t, n] : {std::pair{&w.bq, hd},
                          {&w.bk, kd},
                          {&w.bv, kd},
                          {&w.bo, H},
                          {&w.b_up, kf},
                          {&w.b_down, H}}) {
        *t = sixteenths({n}, 2);
      }
    }
    p.layers.push_back(std::move(w));
  }
  p.final_gamma = sixteenths({H}, 0);
  if (beta) p.final_beta = sixteenths({H}, 2);
  if (!c.tied_embedding) p.output = sixteenths({c.vocab, H}, 1);
  auto& b = d.batch;
  b.sequences = *uniform<std::size_t>(1, 2);
  b.seq_len = *uniform<std::size_t>(1, 3);
  const int V = static_cast<int>(c.vocab);
  for (std::size_t t = 0; t < b.sequences * b.seq_len; ++t) {
    b.ids.push_back(*uniform(0, V - 1));
    b.targets.push_back(*uniform(0, 4) == 0 ? -100 : *uniform(0, V - 1));
  }
  return d;
}

// One op call holding every token: the dense step's partition.
reference::ModelPartition dense_partition(const Drawn& d) {
  reference::ModelPartition p;
  std::vector<std::size_t> all(d.batch.sequences * d.batch.seq_len);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  p.token_groups = {all};
  p.heads = {{0, d.cfg.heads, 0, d.cfg.kv_heads}};
  p.ffn_parts = {d.cfg.ffn};
  p.vocab_parts = {d.cfg.vocab};
  return p;
}

// |a − b| ≤ 2^-90·(|b| + 1): both are R evaluations of the same exact quantity, each within
// ~2^-100 relative of it (a few hundred roundings of 2^-113), so agreeing to 2^-90 is the claim
// "the same values" with room for the different evaluation orders.
bool same_value(const hp& a, const hp& b) {
  using std::abs;
  return abs(a - b) <= ldexp(hp(1), -90) * (abs(b) + 1);
}

RC_GTEST_PROP(model_reference, bound_values_are_the_definition, ()) {
  const Drawn d = draw();
  const OptimizerConfig opt{1.0, 0.5, 1.0 / 1024};
  const auto def = reference::model_train_step<hp>(d.cfg, opt, d.params, d.batch);
  const auto bnd = reference::model_train_step_bounds<hp>(
      d.cfg, opt, d.params, d.batch, dense_partition(d), reference::arithmetic_of<float>());
  RC_ASSERT(same_value(bnd.loss.v[0], def.loss));
  RC_ASSERT(same_value(bnd.grad_norm.v[0], def.grad_norm));
  RC_ASSERT(same_value(bnd.clip_coef.v[0], def.clip_coef));
  for (std::size_t i = 0; i < def.input_grad.size(); ++i) {
    RC_ASSERT(same_value(bnd.input_grad.v[i], def.input_grad[i]));
  }
  auto g = def.grads, gb = bnd.grads;
  reference::detail::for_each_param_pair(g, gb, [&](Tensor<hp>& a, Tensor<hp>& b) {
    RC_ASSERT(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) RC_ASSERT(same_value(b[i], a[i]));
  });
  auto p = def.params, pb = bnd.params;
  reference::detail::for_each_param_pair(p, pb, [&](Tensor<hp>& a, Tensor<hp>& b) {
    RC_ASSERT(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) RC_ASSERT(same_value(b[i], a[i]));
  });
}

// ∂loss/∂θ_i against (loss(θ + h e_i) − loss(θ − h e_i))/(2h), h = 2^-40, for a few drawn
// coordinates of every parameter tensor. Error of the difference: truncation h²/6·|∂³loss|
// (≤ 2^-83·M3) and R's evaluation of loss, ~2^-100·|loss| twice over 2h (≤ 2^-59·|loss|);
// the tolerance 2^-50·(|g| + |loss| + 1) holds both while M3 < 2^33, far above these O(1)
// models' third derivatives (weights ≤ 1, a few layers of width ≤ 4). A wrong chain rule (a
// residual or a tied use left out, a gradient of the mean taken as the sum's) is O(|g|) off.
RC_GTEST_PROP(model_reference, gradients_match_central_differences, ()) {
  Drawn d = draw();
  const OptimizerConfig opt;
  const auto exact = reference::model_train_step<hp>(d.cfg, opt, d.params, d.batch);
  const hp h = ldexp(hp(1), -40);
  auto loss_at = [&](Tensor<hp>& t, std::size_t i, const hp& v) {
    const hp keep = t[i];
    t[i] = v;
    hp l = reference::model_train_step<hp>(d.cfg, opt, d.params, d.batch).loss;
    t[i] = keep;
    return l;
  };
  auto grads = exact.grads;
  reference::detail::for_each_param_pair(d.params, grads, [&](Tensor<hp>& t, Tensor<hp>& g) {
    if (t.empty()) return;
    for (int k = 0; k < 2; ++k) {
      const std::size_t i = *uniform<std::size_t>(0, t.size() - 1);
      const hp fd = (loss_at(t, i, t[i] + h) - loss_at(t, i, t[i] - h)) / (2 * h);
      using std::abs;
      const hp tol = ldexp(hp(1), -50) * (abs(g[i]) + abs(exact.loss) + 1);
      RC_ASSERT(abs(fd - g[i]) <= tol);
    }
  });
}

}  // namespace
}  // namespace shardcheck::props::ref::model_props
