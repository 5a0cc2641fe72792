// The cross-entropy oracle's gradients are tested too: reference::cross_entropy's dlogits
// against central finite differences of f(z) = Σ_t dloss_t·loss_t(z) (reduction none) in the high
// precision, with ignore_index, label smoothing, PyTorch's per-class weights c and per-token
// weights ω (signed, zeros included); and the embedding oracle's dW, which is a plain
// selection-sum (affine along every axis: the central difference is exact).
//
// CE is smooth: loss_t = ω_t·(K_t·lse(z_t) − (1 − ε)c_y·z_ty − (ε/V)Σ_v c_v·z_tv) with
// K_t = (1 − ε)c_y + (ε/V)Σ_v c_v (c = 1 without class weights: K = 1), whose third derivative
// along z_tv is ω_t·K_t times lse's, p(1 − p)(1 − 2p), at most 1/(6√3) < 0.1 in magnitude; so
// M3 = 0.1·|dloss_t·ω_t·K_t|. The evaluation error is the reference's own per-token bound
// (token_loss_error) weighted by |dloss| plus the sum's gamma_{2·tokens}(u_R). The analytic
// gradient's own error: gamma_{4V+64}(u_R)·(|g| + 2 + |ω|(|K| + max|c|))·(|dloss_t| + 1). A
// gradient one float64 ulp off (relative to the same scale) must fail (the teeth property).
#include "testing/gradient_check.hpp"
#include "testing/reference_gen.hpp"

#include "reference/vocab/vocab_cross_entropy.hpp"
#include "reference/vocab/vocab_embedding.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace shardcheck::props::ref::vocab_props {
namespace {

struct CeCase {
  std::size_t tokens = 1, vocab = 1;
  std::vector<std::int64_t> targets;
  CrossEntropyOptions opt;
  Tensor<hp> z, dloss;
};

rc::Gen<CeCase> genCeCase() {
  return rc::gen::exec([] {
    CeCase c;
    c.tokens = *uniform<std::size_t>(1, 3);
    c.vocab = *uniform<std::size_t>(1, 6);
    c.opt.reduction = LossReduction::none;
    c.opt.label_smoothing = *rc::gen::element(0.0, 0.25, 0.125);
    for (std::size_t t = 0; t < c.tokens; ++t) {
      c.targets.push_back(*uniform<int>(0, 4) == 0
                              ? std::int64_t{-100}
                              : static_cast<std::int64_t>(*uniform<std::size_t>(0, c.vocab - 1)));
    }
    std::vector<double> z, d;
    for (std::size_t i = 0; i < c.tokens * c.vocab; ++i) z.push_back(*genLogUniform<double>(-4, 5));
    for (std::size_t t = 0; t < c.tokens; ++t) d.push_back(*genLogUniform<double>(-2, 1));
    c.z = to_hp(Tensor<double>({c.tokens, c.vocab}, z));
    c.dloss = to_hp(Tensor<double>({c.tokens}, d));
    auto weight = [] { return *uniform(0, 5) == 0 ? 0.0 : *genLogUniform<double>(-3, 2, true, 4); };
    if (*uniform(0, 1) == 1) {
      for (std::size_t v = 0; v < c.vocab; ++v) c.opt.class_weight.push_back(weight());
    }
    if (*uniform(0, 1) == 1) {
      for (std::size_t t = 0; t < c.tokens; ++t) c.opt.token_weight.push_back(weight());
    }
    return c;
  });
}

Evaluation<hp> objective(const CeCase& c, const Tensor<hp>& theta) {
  using std::abs;
  const Tensor<hp> z({c.tokens, c.vocab}, theta.values());
  const auto r = reference::cross_entropy<hp>(c.opt, z, c.targets, c.dloss,
                                              reference::arithmetic_of<double>());
  hp value(0), err(0), mag(0);
  for (std::size_t t = 0; t < c.tokens; ++t) {
    value += c.dloss[t] * r.token_loss[t];
    err += abs(c.dloss[t]) * r.token_loss_error[t];
    mag += abs(c.dloss[t] * r.token_loss[t]);
  }
  return {value, err + gamma<hp>(2 * c.tokens + 2, u_hp) * mag};
}

// |ω_t·K_t| and |ω_t|·max|c_v| per token (1 and 1 without weights).
struct WeightScale {
  std::vector<hp> wk, wc;
};

WeightScale weight_scale(const CeCase& c) {
  using std::abs;
  WeightScale s;
  hp c_total(0), c_max(0);
  for (std::size_t v = 0; v < c.vocab; ++v) {
    const hp cv = c.opt.class_weight.empty() ? hp(1) : hp(c.opt.class_weight[v]);
    c_total += cv;
    c_max = abs(cv) > c_max ? abs(cv) : c_max;
  }
  const hp eps(c.opt.label_smoothing);
  for (std::size_t t = 0; t < c.tokens; ++t) {
    const hp om = c.opt.token_weight.empty() ? hp(1) : hp(c.opt.token_weight[t]);
    const std::int64_t y = c.targets[t];
    hp cy(1);
    if (!c.opt.class_weight.empty() && y >= 0)
      cy = hp(c.opt.class_weight[static_cast<std::size_t>(y)]);
    s.wk.push_back(abs(om * ((1 - eps) * cy + eps / hp(c.vocab) * c_total)));
    s.wc.push_back(abs(om) * c_max);
  }
  return s;
}

void ce_fd_case(bool perturb) {
  using std::abs;
  const CeCase c = *genCeCase();
  const WeightScale ws = weight_scale(c);
  reference::FdOptions<hp> fo;
  fo.smoothness = reference::Smoothness::smooth;
  fo.third_derivative_bound = [&](std::size_t i, const hp&) {
    return hp(0.1) * abs(c.dloss[i / c.vocab]) * ws.wk[i / c.vocab];
  };
  const Tensor<hp> theta({c.tokens * c.vocab}, c.z.values());
  const auto fd = central_difference_gradient<hp>(
      [&](const Tensor<hp>& th) { return objective(c, th); }, theta, fo);
  const auto r = reference::cross_entropy<hp>(c.opt, c.z, c.targets, c.dloss,
                                              reference::arithmetic_of<double>());
  std::vector<hp> g = r.grad.values(), err(g.size());
  const hp g_ref = gamma<hp>(4 * c.vocab + 64, u_hp);
  for (std::size_t i = 0; i < g.size(); ++i) {
    const std::size_t t = i / c.vocab;
    err[i] = g_ref * (abs(g[i]) + 2 + ws.wk[t] + ws.wc[t]) * (abs(c.dloss[t]) + 1);
  }
  if (perturb) {
    const std::size_t j = *uniform<std::size_t>(0, g.size() - 1);
    if (c.opt.ignore_index && c.targets[j / c.vocab] == *c.opt.ignore_index) {
      g[j] += hp(1e-3);  // an ignored token's gradient must stay exactly 0
    } else {
      const std::size_t t = j / c.vocab;
      g[j] += reference::pow2<hp>(-52) * (abs(g[j]) + abs(c.dloss[t]) * (1 + ws.wk[t] + ws.wc[t]));
    }
    RC_ASSERT(!compare_gradient<hp>(fd, g, err).pass);
    return;
  }
  const auto v = compare_gradient<hp>(fd, g, err);
  if (!v.pass) {
    RC_FAIL("tokens " + std::to_string(c.tokens) + ", V " + std::to_string(c.vocab) +
            ": coordinate " + std::to_string(v.worst) + ": central difference " +
            show_hp(fd.estimate[v.worst]) + ", backward " + show_hp(g[v.worst]) + ", ratio " +
            show_hp(v.worst_ratio));
  }
}

RC_GTEST_PROP(cross_entropy_reference, backward_matches_central_differences, ()) {
  ce_fd_case(false);
}

RC_GTEST_PROP(cross_entropy_reference, a_gradient_one_float64_ulp_off_is_caught, ()) {
  ce_fd_case(true);
}

// The embedding's dW: f(W) = Σ dy ⊙ W[ids] is affine along every axis; the central difference is
// exact up to R's roundings, and padding rows must get exactly 0.
RC_GTEST_PROP(embedding_reference, backward_matches_central_differences, ()) {
  using std::abs;
  const std::size_t tokens = *uniform<std::size_t>(1, 5), vocab = *uniform<std::size_t>(1, 5),
                    h = *uniform<std::size_t>(1, 3);
  std::vector<std::int64_t> ids;
  for (std::size_t t = 0; t < tokens; ++t) {
    ids.push_back(static_cast<std::int64_t>(*uniform<std::size_t>(0, vocab - 1)));
  }
  const std::optional<std::int64_t> pad =
      *uniform(0, 1) == 1 ? std::optional<std::int64_t>(ids[0]) : std::nullopt;
  std::vector<double> wv, dv;
  for (std::size_t i = 0; i < vocab * h; ++i) wv.push_back(*genLogUniform<double>(-4, 4));
  for (std::size_t i = 0; i < tokens * h; ++i) dv.push_back(*genLogUniform<double>(-4, 4));
  const auto w = to_hp(Tensor<double>({vocab, h}, wv));
  const auto dy = to_hp(Tensor<double>({tokens, h}, dv));
  auto f = [&](const Tensor<hp>& th) {
    const Tensor<hp> wt({vocab, h}, th.values());
    const auto y = reference::embedding<hp>(ids, wt);
    hp value(0), mag(0);
    for (std::size_t t = 0; t < tokens; ++t) {
      if (pad && ids[t] == *pad) continue;  // padding rows do not contribute (no gradient)
      for (std::size_t j = 0; j < h; ++j) {
        value += dy(t, j) * y(t, j);
        mag += abs(dy(t, j) * y(t, j));
      }
    }
    return Evaluation<hp>{value, gamma<hp>(2 * tokens * h + 2, u_hp) * mag};
  };
  const auto fd = central_difference_gradient<hp>(f, Tensor<hp>({vocab * h}, w.values()));
  const auto g =
      reference::embedding_backward<hp>(ids, dy, vocab, pad, reference::arithmetic_of<double>());
  hp dy_abs(0);
  for (const hp& v : dy.values()) dy_abs += abs(v);
  // dW's own rounding in R: a sum of at most `tokens` values, ≤ gamma_{tokens}(u_R)·Σ|dy|.
  const std::vector<hp> err(g.dw.size(), gamma<hp>(tokens + 2, u_hp) * dy_abs);
  RC_ASSERT(compare_gradient<hp>(fd, g.dw.values(), err).pass);
  if (pad) {
    for (std::size_t j = 0; j < h; ++j) {
      RC_ASSERT(g.dw(static_cast<std::size_t>(*pad), j) == hp(0));
    }
  }
}

// padding_idx outside [0, V) is refused, as the library refuses it (PyTorch's -1 is V - 1 there):
// -1 must not silently give row V - 1 a gradient.
TEST(embedding_reference, padding_idx_outside_the_vocabulary_is_refused) {
  const std::vector<std::int64_t> ids = {0, 2};
  const Tensor<hp> dy({2, 1}, std::vector<hp>{hp(1), hp(2)});
  for (const std::int64_t pad : {std::int64_t{-1}, std::int64_t{3}}) {
    try {
      (void)reference::embedding_backward<hp>(ids, dy, 3, pad, reference::arithmetic_of<double>());
      ADD_FAILURE() << "padding_idx " << pad << " was accepted";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(
          what.find("padding_idx " + std::to_string(pad) + " is outside the vocabulary [0, V = 3)"),
          std::string::npos)
          << what;
      EXPECT_NE(what.find("V - 1 for PyTorch's -1"), std::string::npos) << what;
    }
  }
  const auto g = reference::embedding_backward<hp>(ids, dy, 3, std::int64_t{2},
                                                   reference::arithmetic_of<double>());
  EXPECT_EQ(g.dw(2, 0), hp(0));
  EXPECT_EQ(g.dw(0, 0), hp(1));
}

}  // namespace
}  // namespace shardcheck::props::ref::vocab_props
