// LayerNorm and RMSNorm, forward and backward, in plain loops in the high-precision scalar R: the
// definition. The bound on an implementation's error is norm_bound.hpp; norm.hpp includes both
// and pairs every value with its bound (norm_expected).
//
// Shapes and formulas are lib/ops/norm/norm.hpp's (docs/norm.md): x [tokens, hidden], gamma
// [hidden], beta [hidden] (layer_norm only; empty otherwise), per token t with n = hidden:
//   layer_norm          mean = (Σ_i x_i)/n, d_i = x_i − mean, var = (Σ_i d_i²)/n,
//                       rstd = 1/sqrt(var + eps), xhat_i = d_i·rstd, y_i = xhat_i·gamma_i + beta_i
//   layer_norm_no_bias  the same without beta
//   rms_norm            ms = (Σ_i x_i²)/n, rstd = 1/sqrt(ms + eps), xhat_i = x_i·rstd,
//                       y_i = xhat_i·gamma_i
// and, given dy, with g_i = dy_i·gamma_i:
//   layer_norm          c1 = (Σ g_i)/n, c2 = (Σ g_i·xhat_i)/n, dx_i = ((g_i − c1) − xhat_i·c2)·rstd
//   rms_norm            c2 = (Σ g_i·xhat_i)/n, dx_i = (g_i − xhat_i·c2)·rstd
//   dgamma_j = Σ_t dy_tj·xhat_tj,  dbeta_j = Σ_t dy_tj.
// Every step is evaluated in R in the order and grouping written (sums in index order), the
// grouping norm_bound.hpp's propagation follows, so the two compute the same values in R
// (norm_reference_props checks it bit for bit). `eps` is the accumulator's eps (acc_t<T>(cfg.eps),
// exact in R), as the contract says.
// Sources: Ba, Kiros, Hinton 2016 (LayerNorm); Zhang & Sennrich 2019 (RMSNorm).
#pragma once

#include "ops/norm/norm_config.hpp"
#include "reference/precision.hpp"

#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardcheck::reference {

namespace detail {

// x [tokens, hidden] with hidden ≥ 1, gamma [hidden], beta [hidden] for layer_norm and empty
// otherwise, dy (when given) x's shape. @throws std::invalid_argument otherwise.
template <class R>
void require_norm_shapes(NormKind kind, const Shape& x, const Tensor<R>& gamma,
                         const Tensor<R>& beta, const Shape* dy) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("reference::norm: x " + format_shape(x) + ", gamma " +
                                format_shape(gamma.shape()) + ", beta " +
                                format_shape(beta.shape()) + ": " + why);
  };
  if (x.size() != 2 || x[1] == 0) fail("x must be [tokens, hidden] with hidden >= 1");
  if (gamma.shape() != Shape({x[1]})) fail("gamma must be [hidden]");
  if (kind == NormKind::layer_norm && beta.shape() != Shape({x[1]})) fail("beta must be [hidden]");
  if (kind != NormKind::layer_norm && !beta.empty()) fail("this kind has no beta: pass it empty");
  if (dy != nullptr && *dy != x) fail("dy must have x's shape");
}

// The token counts of the parts (empty: one part, every token). @throws std::invalid_argument
// when they do not add up to `tokens`.
inline std::vector<std::size_t> norm_token_parts(std::span<const std::size_t> token_parts,
                                                 std::size_t tokens) {
  std::vector<std::size_t> parts(token_parts.begin(), token_parts.end());
  if (parts.empty()) parts.push_back(tokens);
  std::size_t total = 0;
  for (auto p : parts) total += p;
  if (total != tokens)
    throw std::invalid_argument("reference::norm_backward: token_parts must add up to tokens");
  return parts;
}

}  // namespace detail

template <class R = hp>
struct NormForward {
  Tensor<R> y;          // [tokens, hidden]
  Tensor<R> xhat;       // [tokens, hidden]
  std::vector<R> rstd;  // [tokens]
};

// The forward: the library's norm_forward(cfg, x, gamma, beta) with cfg.kind first and the
// accumulator's eps last.
template <HighPrecision R = hp>
NormForward<R> norm_forward(NormKind kind, const Tensor<R>& x, const Tensor<R>& gamma,
                            const Tensor<R>& beta, const R& eps) {
  using std::sqrt;
  detail::require_norm_shapes(kind, x.shape(), gamma, beta, nullptr);
  const std::size_t tokens = x.dim(0), n = x.dim(1);
  const R count(n);
  NormForward<R> out{Tensor<R>(x.shape()), Tensor<R>(x.shape()), {}};
  std::vector<R> d(n);
  for (std::size_t t = 0; t < tokens; ++t) {
    const R* xt = &x[t * n];
    R mean(0);
    if (kind != NormKind::rms_norm) {
      R s(0);
      for (std::size_t i = 0; i < n; ++i) s += xt[i];
      mean = s / count;
    }
    R sq(0);
    for (std::size_t i = 0; i < n; ++i) {
      d[i] = kind == NormKind::rms_norm ? xt[i] : R(xt[i] - mean);
      sq += d[i] * d[i];
    }
    const R rstd = R(1) / sqrt(sq / count + eps);  // var (or ms) + eps
    out.rstd.push_back(rstd);
    for (std::size_t i = 0; i < n; ++i) {
      const R xhat = d[i] * rstd;
      out.xhat[t * n + i] = xhat;
      R y = xhat * gamma[i];
      if (kind == NormKind::layer_norm) y += beta[i];
      out.y[t * n + i] = y;
    }
  }
  return out;
}

template <class R = hp>
struct NormGradients {
  Tensor<R> dx;      // [tokens, hidden]
  Tensor<R> dgamma;  // [hidden]
  Tensor<R> dbeta;   // [hidden], empty without beta
};

// The backward: the library's norm_backward(cfg, x, gamma, dy), arguments as norm_forward's.
// `token_parts` (reference-only, last): the token counts of the sequence-parallel ranks in order
// (empty: one part); dgamma and dbeta are summed per part, then over the parts, the grouping the
// library's all_reduce has (exactly, the same sum; in R, the grouping the bound follows).
template <HighPrecision R = hp>
NormGradients<R> norm_backward(NormKind kind, const Tensor<R>& x, const Tensor<R>& gamma,
                               const Tensor<R>& dy, const R& eps,
                               std::span<const std::size_t> token_parts = {}) {
  const bool beta = kind == NormKind::layer_norm;
  detail::require_norm_shapes(kind, x.shape(), gamma, beta ? gamma : Tensor<R>(), &dy.shape());
  const std::size_t tokens = x.dim(0), n = x.dim(1);
  const auto parts = detail::norm_token_parts(token_parts, tokens);
  const auto fwd = norm_forward<R>(kind, x, gamma, beta ? gamma : Tensor<R>(), eps);
  const R count(n);
  NormGradients<R> out{Tensor<R>(x.shape()), Tensor<R>(Shape{n}),
                       beta ? Tensor<R>(Shape{n}) : Tensor<R>()};
  std::vector<R> g(n);
  for (std::size_t t = 0; t < tokens; ++t) {
    R sg(0), sgx(0);
    for (std::size_t i = 0; i < n; ++i) g[i] = dy[t * n + i] * gamma[i];
    for (std::size_t i = 0; i < n; ++i) sgx += g[i] * fwd.xhat[t * n + i];
    const R c2 = sgx / count;
    R c1(0);
    if (kind != NormKind::rms_norm) {
      for (std::size_t i = 0; i < n; ++i) sg += g[i];
      c1 = sg / count;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const R centered = kind == NormKind::rms_norm ? g[i] : R(g[i] - c1);
      out.dx[t * n + i] = (centered - fwd.xhat[t * n + i] * c2) * fwd.rstd[t];
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    R dgamma(0), dbeta(0);
    std::size_t t0 = 0;
    for (const std::size_t len : parts) {
      if (len == 0) continue;
      R pg(0), pb(0);
      for (std::size_t t = t0; t < t0 + len; ++t) {
        pg += dy[t * n + i] * fwd.xhat[t * n + i];
        pb += dy[t * n + i];
      }
      dgamma += pg;
      dbeta += pb;
      t0 += len;
    }
    out.dgamma[i] = dgamma;
    if (beta) out.dbeta[i] = dbeta;
  }
  return out;
}

}  // namespace shardcheck::reference
