// Dense cross-entropy over the vocabulary (PyTorch F.cross_entropy semantics, without `weight`),
// forward and backward, in the high-precision scalar R, with elementwise a-priori error bounds for
// lib/ops/vocab_cross_entropy.hpp's arithmetic contract. The derivation is in docs/vocab.md
// ("Cross-entropy"); each term below names its step.
//
// Per token t (not ignored), target y, ε = label smoothing, V the global vocabulary size:
//   m = max z;  S = Σ_v exp(z_v − m);  lse = log S + m;  Z = Σ_v z_v
//   loss_t = lse − (1 − ε)·z_y − (ε/V)·Z
//   ∂loss_t/∂z_v = exp(z_v − m)/S − ε/V − (v = y)·(1 − ε)
// Reductions: none (loss [tokens]); sum (Σ_t loss_t); mean (sum / N, N = non-ignored tokens;
// 0 when N = 0, the library's documented convention where PyTorch gives NaN). Ignored tokens:
// loss 0, gradient 0, bound 0 (the implementation writes exact zeros).
//
// The implementation computes every step in A = acc_t<T> (u = u_A, η = smallest subnormal of A),
// with the C library's exp and log, assumed within 1 ulp (relative error ≤ 2u, plus η below the
// normal range: glibc's documented maximum errors for exp, expf, log, logf are ≤ 1 ulp), and
// rounds the results once to T. Bounds (all first-order terms kept exactly; products of error
// terms covered by the final factor 1 + 16u):
//   exp terms   α_v = e_v·((1 + expm1(u·|z_v − m|))·(1 + 2u) − 1) + η       (d_v rounds once)
//   S           E_S = Σ α_v + γ_{V−1}(u)·(S + Σ α_v)                         (V terms, any order)
//   log S       λ = −log(1 − E_S/S);  E_L = λ + 2u·(log S + λ) + η             (S ≥ 1)
//   lse         E_lse = E_L + u·(|lse| + E_L)
//   Z           E_Z = γ_{V−1}(u)·Σ|z_v|
//   w = (1−ε)z_y + q·Z, q = fl(ε/V):  E_a = u·|(1−ε)z_y| + η;
//               E_b = (ε/V)·(E_Z + 2u·(|Z| + E_Z)) + η;  E_w = E_a + E_b + u·(|w| + E_a + E_b)
//   loss_t      E_t = E_lse + E_w + u·(|loss_t| + E_lse + E_w)
//   sum         E = Σ E_t + γ_{N−1}(u)·Σ(|loss_t| + E_t);  mean: E/N + u·(|L|/N + E/N) + η
//   gradient    E_p = (α_v + p_v·E_S)/(S − E_S) + u·(p_v + ·) + η;  E_c ≤ 2u·|c| + 2η;
//               E_d = E_p + E_c + u·(|p − c| + E_p + E_c);  s: E_s = u·|s| + η (mean), else 0
//               E_g = |s|·E_d + |d|·E_s + E_d·E_s + u·(|g| + ·) + η
//   to T        + u_T·(|x| + E) + η_T/2  (when T ≠ A)
// plus the reference's own rounding in R: γ_{4V+64}(u_R) times the magnitudes involved.
// ε is assumed exact in A, and 1 − ε exact (true for the dyadic ε the suite draws).
#pragma once

#include "reference/bounds.hpp"
#include "reference/precision.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardcheck::reference {

enum class CeReduction { none, sum, mean };

template <class R = hp>
struct CrossEntropyOptions {
  std::optional<std::int64_t> ignore_index = -100;
  R label_smoothing{0};
  CeReduction reduction = CeReduction::mean;
};

template <class R = hp>
struct CrossEntropyResult {
  Tensor<R> loss, loss_bound;  // [tokens] (none) or [1]
  Tensor<R> grad, grad_bound;  // [tokens, V]: the gradient for the upstream dloss
  // Per token (for the finite-difference checks): the loss in R and a bound on R's own error.
  std::vector<R> token_loss, token_loss_error;
  std::size_t count = 0;  // N
};

// logits [tokens, V]; dloss [tokens] (none) or [1]. `arith`: the implementation's storage T and
// accumulator (arithmetic_of<T>()).
template <HighPrecision R = hp>
CrossEntropyResult<R> cross_entropy(const Tensor<R>& logits, std::span<const std::int64_t> targets,
                                    const Tensor<R>& dloss, const CrossEntropyOptions<R>& opt,
                                    const Arithmetic& arith) {
  using std::abs;
  using std::exp;
  using std::log;
  if (logits.ndim() != 2 || targets.size() != logits.dim(0)) {
    throw std::invalid_argument(
        "reference::cross_entropy: logits must be [tokens, V] with one "
        "target per token");
  }
  const std::size_t tokens = logits.dim(0), V = logits.dim(1);
  const bool none = opt.reduction == CeReduction::none;
  if (dloss.size() != (none ? tokens : 1)) {
    throw std::invalid_argument(
        "reference::cross_entropy: dloss must be [tokens] for none, [1] "
        "otherwise");
  }
  const Format ac = arith.accumulate, st = arith.storage;
  const bool same = ac == st;
  const R u = unit_roundoff<R>(ac), eta = smallest_subnormal<R>(ac);
  const R u_t = unit_roundoff<R>(st), eta_t = smallest_subnormal<R>(st);
  const R u_r = unit_roundoff_of<R>();
  const R g_ref = gamma<R>(4 * V + 64, u_r);
  const R slack = 1 + 16 * u;
  const R eps = opt.label_smoothing;
  const R q = eps / R(V);
  const R gV = V >= 1 ? gamma<R>(V - 1, u) : R(0);
  auto to_t = [&](const R& x, const R& e) {
    return same ? e : R(e + u_t * (abs(x) + e) + eta_t / 2);
  };
  auto is_ignored = [&](std::int64_t y) { return opt.ignore_index && y == *opt.ignore_index; };

  CrossEntropyResult<R> res;
  res.token_loss.assign(tokens, R(0));
  res.token_loss_error.assign(tokens, R(0));
  std::vector<R> e_tok(tokens, R(0));
  std::size_t n = 0;
  for (std::size_t t = 0; t < tokens; ++t) n += is_ignored(targets[t]) ? 0 : 1;
  res.count = n;

  // The upstream scale per token: s_t and its computed error E_s.
  R common(0), common_err(0);
  if (!none) {
    common = dloss[0];
    if (opt.reduction == CeReduction::mean) {
      common = n == 0 ? R(0) : R(common / R(n));
      common_err = n == 0 ? R(0) : R(u * abs(common) + eta);
    }
  }
  res.grad = Tensor<R>({tokens, V});
  res.grad_bound = Tensor<R>({tokens, V});
  for (std::size_t t = 0; t < tokens; ++t) {
    const std::int64_t y = targets[t];
    if (is_ignored(y)) continue;
    if (y < 0 || static_cast<std::uint64_t>(y) >= V) {
      throw std::invalid_argument("reference::cross_entropy: target " + std::to_string(y) +
                                  " outside [0, V)");
    }
    R m = logits(t, 0);
    for (std::size_t v = 1; v < V; ++v) m = logits(t, v) > m ? logits(t, v) : m;
    R s(0), sum_alpha(0), z_sum(0), z_abs(0);
    std::vector<R> e(V), alpha(V);
    for (std::size_t v = 0; v < V; ++v) {
      const R d = logits(t, v) - m;  // exact in R: both are values of T
      e[v] = exp(d);
      alpha[v] = e[v] * ((exp(u * abs(d))) * (1 + 2 * u) - 1) + eta;
      s += e[v];
      sum_alpha += alpha[v];
      z_sum += logits(t, v);
      z_abs += abs(logits(t, v));
    }
    const R e_s = sum_alpha + gV * (s + sum_alpha);
    const R rho = e_s / s;
    const R lam = -log(1 - rho);
    const R log_s = log(s);
    const R e_l = lam + 2 * u * (log_s + lam) + eta;
    const R lse = log_s + m;
    const R e_lse = e_l + u * (abs(lse) + e_l);
    const R zy = logits(t, static_cast<std::size_t>(y));
    const R a = (1 - eps) * zy;
    const R e_a = u * abs(a) + eta;
    const R e_z = gV * z_abs;
    const R b = q * z_sum;
    const R e_b = eps > 0 ? R(q * (e_z + 2 * u * (abs(z_sum) + e_z)) + eta) : R(0);
    const R w = a + b;
    const R e_w = e_a + e_b + u * (abs(w) + e_a + e_b);
    const R loss = lse - w;
    const R e_loss = (e_lse + e_w + u * (abs(loss) + e_lse + e_w)) * slack;
    res.token_loss[t] = loss;
    res.token_loss_error[t] = g_ref * (abs(m) + abs(log_s) + abs(a) + abs(b) + z_abs + 1);
    e_tok[t] = e_loss + res.token_loss_error[t];

    const R st_scale = none ? R(dloss[t]) : common;
    const R e_scale = none ? R(0) : common_err;
    for (std::size_t v = 0; v < V; ++v) {
      const R p = e[v] / s;
      const bool tgt = static_cast<std::int64_t>(v) == y;
      const R c = tgt ? R(1 - eps + q) : q;
      const R pe = (alpha[v] + p * e_s) / (s - e_s);
      const R e_p = pe + u * (p + pe) + eta;
      const R e_c = 2 * u * abs(c) + 2 * eta;
      const R d = p - c;
      const R e_d = e_p + e_c + u * (abs(d) + e_p + e_c);
      const R gv = d * st_scale;
      const R e_prod = abs(st_scale) * e_d + abs(d) * e_scale + e_d * e_scale;
      const R e_g = (e_prod + u * (abs(gv) + e_prod) + eta) * slack +
                    g_ref * (abs(p) + abs(c)) * (abs(st_scale) + 1);
      res.grad(t, v) = gv;
      res.grad_bound(t, v) = to_t(gv, e_g);
    }
  }
  if (none) {
    res.loss = Tensor<R>({tokens});
    res.loss_bound = Tensor<R>({tokens});
    for (std::size_t t = 0; t < tokens; ++t) {
      res.loss[t] = res.token_loss[t];
      res.loss_bound[t] = is_ignored(targets[t]) ? R(0) : to_t(res.token_loss[t], e_tok[t]);
    }
    return res;
  }
  R total(0), e_sum(0), mag(0);
  for (std::size_t t = 0; t < tokens; ++t) {
    total += res.token_loss[t];
    e_sum += e_tok[t];
    mag += abs(res.token_loss[t]) + e_tok[t];
  }
  R e = e_sum + (n >= 2 ? R(gamma<R>(n - 1, u) * mag) : R(0));
  if (opt.reduction == CeReduction::mean) {
    if (n == 0) {
      total = 0;
      e = 0;
    } else {
      total = total / R(n);
      e = (e / R(n) + u * (abs(total) + e / R(n)) + eta) * slack;
    }
  }
  res.loss = Tensor<R>({1});
  res.loss_bound = Tensor<R>({1});
  res.loss[0] = total;
  res.loss_bound[0] = (opt.reduction == CeReduction::mean && n == 0) ? R(0) : to_t(total, e);
  return res;
}

}  // namespace shardcheck::reference
