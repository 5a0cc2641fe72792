// The dense cross-entropy over the vocabulary as PyTorch's F.cross_entropy defines it (its
// per-class `weight`, label smoothing over the global vocabulary, ignore_index), with per-token
// weights, forward and backward, in plain loops in the high-precision scalar R: the definition.
// The bound on an implementation's error is vocab_cross_entropy_bound.hpp; cross_entropy()
// (vocab_cross_entropy.hpp) pairs every value with its bound.
//
// Per token t (not ignored), target y, ε = label smoothing, V the global vocabulary size, c_v the
// class weights and ω_t the token weights (1 when not given):
//   m = max z;  S = Σ_v exp(z_v − m);  k = (1 − ε)·c_y;  w_v = (ε/V)·c_v;  K = k + Σ_v w_v
//   T = k·(m − z_y);  Q = Σ_v w_v·(m − z_v)
//   loss_t = ω_t·(K·log S + T + Q)
//          = ω_t·((1 − ε)·c_y·(lse − z_y) + (ε/V)·Σ_v c_v·(lse − z_v)),  lse = log S + m
//   ∂loss_t/∂z_v = ω_t·(K·exp(z_v − m)/S − (ε/V)·c_v − (v = y)·(1 − ε)·c_y)
// i.e. PyTorch's (1 − ε)·c_y·(−log p_y) + (ε/V)·Σ_v c_v·(−log p_v), times ω_t.
// Reductions: none (loss [tokens]); sum (Σ_t loss_t); mean (sum / D, D = Σ_{t non-ignored}
// ω_t·c_{y_t}, = N without weights; 0, with gradient 0, when D = 0, the library's documented
// convention where PyTorch gives NaN). Ignored tokens: loss 0, gradient 0. For sum and mean the
// library scales the token weights by 2^−e (max |ω_t|·2^−e ∈ [1/2, 1)): loss_denominator keeps
// e, 2^−e, D' = 2^−e·D, so the bound can follow those steps.
// Each quantity is evaluated in the grouping lib/ops/vocab/vocab_cross_entropy.cpp uses (e.g.
// (K·log S + T) + Q), so the bound's steps apply to these values one by one.
#pragma once

#include "ops/vocab/vocab_config.hpp"
#include "reference/precision.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

// The options are the library's own data type, shardcheck::CrossEntropyOptions
// (lib/ops/vocab/vocab_config.hpp: fields only, declared once for the library, the reference and
// the suite; the library's VocabCrossEntropyConfig adds the vocabulary's split). Its doubles
// (ε and the weights) convert exactly to R.

namespace shardcheck::reference::detail {

// logits [tokens, V], one target per token in [0, V) or ignore_index, dloss [tokens] (none) or
// [1], class_weight empty or [V], token_weight empty or [tokens].
// @throws std::invalid_argument otherwise.
template <class R>
void require_cross_entropy_inputs(const Tensor<R>& logits, std::span<const std::int64_t> targets,
                                  const Tensor<R>& dloss, const CrossEntropyOptions& opt) {
  auto fail = [](const std::string& why) {
    throw std::invalid_argument("reference::cross_entropy: " + why);
  };
  if (logits.ndim() != 2 || targets.size() != logits.dim(0))
    fail("logits must be [tokens, V] with one target per token");
  const std::size_t tokens = logits.dim(0), V = logits.dim(1);
  if (dloss.size() != (opt.reduction == LossReduction::none ? tokens : 1))
    fail("dloss must be [tokens] for none, [1] otherwise");
  if ((!opt.class_weight.empty() && opt.class_weight.size() != V) ||
      (!opt.token_weight.empty() && opt.token_weight.size() != tokens))
    fail("class_weight must be empty or [V], token_weight empty or [tokens]");
  for (const std::int64_t y : targets) {
    if (opt.ignore_index && y == *opt.ignore_index) continue;
    if (y < 0 || static_cast<std::uint64_t>(y) >= V)
      fail("target " + std::to_string(y) + " outside [0, V)");
  }
}

// The options as the formulas read them: ε, ε/V, c_v, ω_t (1 when not given) and C = Σ_v c_v.
template <class R>
struct CeSpec {
  CeSpec(const CrossEntropyOptions& o, std::size_t vocab)
      : opt(o), V(vocab), eps(R(o.label_smoothing)), q(eps / R(vocab)) {
    for (std::size_t v = 0; v < V; ++v) c_total += cls(v);
  }
  bool by_class() const { return !opt.class_weight.empty(); }
  bool by_token() const { return !opt.token_weight.empty(); }
  bool weighted() const { return by_class() || by_token(); }
  bool mean() const { return opt.reduction == LossReduction::mean; }
  bool ignored(std::int64_t y) const { return opt.ignore_index && y == *opt.ignore_index; }
  R cls(std::size_t v) const { return by_class() ? R(opt.class_weight[v]) : R(1); }  // c_v
  R tok(std::size_t t) const { return by_token() ? R(opt.token_weight[t]) : R(1); }  // ω_t

  const CrossEntropyOptions& opt;
  std::size_t V;
  R eps, q;      // ε, ε/V
  R c_total{0};  // C
};

// D = Σ_{t non-ignored} ω_t·c_{y_t} (N exactly without weights) and N; the token weights' scale
// 2^−e (e the frexp exponent of max |ω_t| over the non-ignored tokens; 0 without token
// weights or when all are 0) and the scaled D' = 2^−e·D.
template <class R>
struct LossDenominator {
  R value{0};
  R magnitude{0};  // Σ |ω_t·c_{y_t}|: 0 exactly when every term is 0
  std::size_t count = 0;
  int exponent = 0;                           // e
  R scale{1};                                 // 2^−e (exact in R)
  R class_magnitude{0};                       // Σ |c_{y_t}| over the non-ignored tokens
  R scaled() const { return scale * value; }  // D'
  R scaled_magnitude() const { return scale * magnitude; }
  // D = 0, where the mean gives 0 (the library's convention, on its computed D'): every term 0,
  // or terms of mixed sign that cancel (then the computed D' need not be 0: the bound gives up).
  bool zero() const { return value == 0; }
  bool cancels() const { return value == 0 && magnitude != 0; }
};

template <class R>
LossDenominator<R> loss_denominator(const CeSpec<R>& spec, std::span<const std::int64_t> targets) {
  using std::abs;
  LossDenominator<R> d;
  double top = 0;
  for (std::size_t t = 0; t < targets.size(); ++t) {
    if (spec.ignored(targets[t])) continue;
    ++d.count;
    const auto y = static_cast<std::size_t>(targets[t]);
    d.value += spec.tok(t) * spec.cls(y);
    d.magnitude += abs(spec.tok(t) * spec.cls(y));
    d.class_magnitude += abs(spec.cls(y));
    if (spec.by_token()) top = std::max(top, std::fabs(spec.opt.token_weight[t]));
  }
  if (!spec.weighted()) d.value = d.magnitude = R(d.count);
  if (top > 0 && std::isfinite(top)) std::frexp(top, &d.exponent);
  for (int i = 0; i < d.exponent; ++i) d.scale = d.scale / 2;
  for (int i = 0; i > d.exponent; --i) d.scale = d.scale * 2;
  return d;
}

// One token's log-sum-exp with the max shift: m = max_v z_v, e_v = exp(z_v − m), S = Σ_v e_v,
// lse = log S + m.
template <class R>
struct TokenLogSumExp {
  R m{0};
  std::vector<R> e;
  R s{0}, log_s{0}, lse{0};
};

template <class R>
TokenLogSumExp<R> token_logsumexp(const Tensor<R>& z, std::size_t t) {
  using std::exp;
  using std::log;
  const std::size_t V = z.dim(1);
  TokenLogSumExp<R> r;
  r.m = z(t, 0);
  for (std::size_t v = 1; v < V; ++v) r.m = z(t, v) > r.m ? z(t, v) : r.m;
  r.e.resize(V);
  for (std::size_t v = 0; v < V; ++v) {
    r.e[v] = exp(z(t, v) - r.m);
    r.s += r.e[v];
  }
  r.log_s = log(r.s);
  r.lse = r.log_s + r.m;
  return r;
}

// loss_t = ω_t·l_t, with the intermediate values the bound is evaluated at:
//   k = (1 − ε)·c_y, T = k·(m − z_y), Q = Σ_v w_v·(m − z_v) (ε > 0, else 0), K = k + Σ_v w_v
//   (K = 1 without class weights), kl = K·log S, p = kl + T, l_t = p + Q
template <class R>
struct TokenLoss {
  R z_y{0};
  R k{0}, K{1}, t{0}, q_sum{0}, kl{0}, p{0};
  R l{0}, loss{0};
};

template <class R>
TokenLoss<R> token_loss(const Tensor<R>& z, std::size_t t, std::size_t y,
                        const TokenLogSumExp<R>& s, const CeSpec<R>& spec) {
  const R& eps = spec.eps;
  TokenLoss<R> r;
  r.z_y = z(t, y);
  r.k = (1 - eps) * spec.cls(y);
  r.t = r.k * (s.m - r.z_y);
  // Only with smoothing, as the library: (ε/V)·(m − z_v) with ε = 0 and a −inf logit is
  // 0·inf = NaN, not the 0 it stands for (found by fuzz/vocab_cross_entropy).
  if (eps > 0) {
    for (std::size_t v = 0; v < spec.V; ++v) r.q_sum += spec.q * spec.cls(v) * (s.m - z(t, v));
  }
  r.K = spec.by_class() ? R(r.k + (eps > 0 ? R(spec.q * spec.c_total) : R(0))) : R(1);
  r.kl = r.K * s.log_s;
  r.p = r.kl + r.t;
  r.l = r.p + r.q_sum;
  r.loss = spec.tok(t) * r.l;
  return r;
}

// The upstream factor of token t's gradient before ω_t: dloss_t (none), dloss (sum), dloss/D
// (mean; 0 when D = 0).
template <class R>
R upstream_base(const Tensor<R>& dloss, std::size_t t, const CeSpec<R>& spec,
                const LossDenominator<R>& d) {
  if (spec.opt.reduction == LossReduction::none) return dloss[t];
  if (!spec.mean()) return dloss[0];
  return d.zero() ? R(0) : R(dloss[0] / d.value);
}

// K = (1 − ε)·c_y + (ε/V)·C, the factor of p_v in the gradient with class weights.
template <class R>
R gradient_k(const TokenLoss<R>& l, const CeSpec<R>& spec) {
  return l.k + (spec.eps > 0 ? R(spec.q * spec.c_total) : R(0));
}

// One element of the gradient, g = s·(K·p_v − c'_v) with p_v = e_v/S,
// c'_v = (ε/V)·c_v + (v = y)·(1 − ε)·c_y (without class weights K = 1, c'_v = ε/V (+ 1 − ε)),
// s = ω_t·upstream_base, with its intermediate values (kp = K·p_v, cv = (ε/V)·c_v, c = c'_v,
// d = kp − c).
template <class R>
struct GradientTerm {
  R p{0}, kp{0}, cv{0}, c{0}, d{0}, g{0};
};

template <class R>
GradientTerm<R> gradient_term(const TokenLogSumExp<R>& s, const TokenLoss<R>& l, const R& K,
                              std::size_t v, bool target, const R& scale, const CeSpec<R>& spec) {
  GradientTerm<R> g;
  g.p = s.e[v] / s.s;
  if (!spec.by_class()) {
    g.kp = g.p;
    g.c = target ? R(1 - spec.eps + spec.q) : spec.q;
  } else {
    g.kp = K * g.p;
    g.cv = spec.q * spec.cls(v);
    g.c = target ? R(g.cv + l.k) : g.cv;
  }
  g.d = g.kp - g.c;
  g.g = g.d * scale;
  return g;
}

// Σ_t loss_t, and the reduced loss: that sum (sum), over D (mean; 0 when D = 0).
template <class R>
R loss_sum(std::span<const R> token_loss) {
  R total(0);
  for (const R& x : token_loss) total += x;
  return total;
}

template <class R>
R reduced_loss(const R& sum, const CeSpec<R>& spec, const LossDenominator<R>& d) {
  if (!spec.mean()) return sum;
  return d.zero() ? R(0) : R(sum / d.value);
}

}  // namespace shardcheck::reference::detail
