// An attention kernel of the exp2 contract, emulated independently of lib/ops/attention for the
// tests of its bound (reference/attention/attention_bound.hpp, "the exp2 contract";
// docs/attention.md).
#pragma once

#include "reference/attention/attention.hpp"
#include "suites/attention/attention_emulation_merge.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace shardcheck::attention_exp2 {

// An attention kernel of the exp2 contract (reference/attention/attention_bound.hpp, "the exp2
// contract"), emulated in float as FlashAttention-2/3 and Triton compute it: scale_log2 =
// fl(fl(σ)·log2 e) precomputed (in double, rounded once, as FlashAttention's host code), the raw
// dots unscaled, per block of keys p = exp2f(fmaf(r, scale_log2, −fl(m·scale_log2))), l = Σ p,
// acc = Σ p·v, out = acc/l, lse = fl(fl(m₂ + log2f(l))·fl(ln 2)); blocks (the keys cut into
// `parts` pieces at random points) merged in natural units (w = expf(lse_j − max), out = Σ
// (w/Σw)·out_j, lse = max + logf(Σw)); out rounded to T, lse kept in float. The backward as
// FlashAttention-2's: D = dout·out (out in T), P = exp2f(fmaf(r, scale_log2, −fl(lse·log2 e))),
// dS = P·(dP − D), dq = fl(σ)·Σ dS·k, dk = fl(σ)·Σ dS·q, dv = Σ P·dout, rounded to T. `form`:
// the argument unfused, and each block's lse fl(fl(m·σ̂) + logf(l)) as FlashAttention-2's CUDA
// code (attention_emulation::KernelForm; `reciprocal` is for the online kernel).
using Exp2Run = attention_emulation::KernelRun;

// q [batch, Lq, h, d], k and v [batch, Lk, g, d], dout as q: values of T (in R); `cuts` the
// block boundaries of the keys, from 0 to Lk ascending (blocks may be empty).
template <class T, class R>
Exp2Run exp2_kernel(const AttentionConfig& cfg, const Tensor<R>& tq, const Tensor<R>& tk,
                    const Tensor<R>& tv, const Tensor<R>& tdout,
                    const std::vector<std::size_t>& cuts,
                    attention_emulation::KernelForm form = {}) {
  const auto D = reference::detail::attention_dims(cfg, tq, tk, tv, &tdout);
  const auto f = [](const Tensor<R>& t) {
    std::vector<float> v(t.size());
    for (std::size_t i = 0; i < t.size(); ++i) v[i] = static_cast<float>(static_cast<double>(t[i]));
    return v;
  };
  const auto to_t = [](float x) { return static_cast<float>(T(x)); };
  const std::vector<float> q = f(tq), k = f(tk), v = f(tv), dout = f(tdout);
  const auto sigma = static_cast<float>(reference::score_scale(cfg));
  const auto scale_log2 = static_cast<float>(static_cast<double>(sigma) * 1.4426950408889634);
  const auto ln2 = static_cast<float>(0.6931471805599453);
  const auto log2e = static_cast<float>(1.4426950408889634);
  Exp2Run r = attention_emulation::empty_run(D, q.size(), k.size());
  const auto raw = [&](std::size_t b, std::size_t i, std::size_t t, std::size_t s) {
    float acc = 0;
    for (std::size_t e = 0; e < D.d; ++e)
      acc += q[D.qi(b, t, i, e)] * k[D.ki(b, s, i / D.group, e)];
    return acc;
  };
  attention_emulation::for_each_row(D, [&](std::size_t b, std::size_t i, std::size_t t) {
    const std::size_t j = i / D.group;
    // Forward: each block's partial (out_j, lse_j), then the merge.
    std::vector<std::vector<float>> outs;
    std::vector<float> lses;
    for (const auto& keys : attention_emulation::visible_blocks(cfg.mask, b, t, cuts)) {
      const auto [rs, m] =
          attention_emulation::scores_and_max(keys, [&](std::size_t s) { return raw(b, i, t, s); });
      const float m2 = m * scale_log2;
      float l = 0;
      std::vector<float> acc(D.d, 0.0F);
      for (std::size_t x = 0; x < keys.size(); ++x) {
        const float p =
            std::exp2(attention_emulation::fma_or_not(rs[x], scale_log2, -m2, form.unfused));
        l += p;
        for (std::size_t e = 0; e < D.d; ++e) acc[e] += p * v[D.ki(b, keys[x], j, e)];
      }
      for (auto& a : acc) a /= l;
      outs.push_back(std::move(acc));
      lses.push_back(form.natural_lse ? m * sigma + std::log(l) : (m2 + std::log2(l)) * ln2);
    }
    if (outs.empty()) return;  // an empty row: out 0, lse −inf, no gradient
    const auto [o, lse] = attention_emulation::merge_by_lse(outs, lses, [](float x) { return x; });
    r.lse[D.li(b, i, t)] = lse;
    float dsum = 0;
    for (std::size_t e = 0; e < D.d; ++e) {
      const std::size_t oi = D.qi(b, t, i, e);
      r.out[oi] = to_t(o[e]);
      dsum += dout[oi] * r.out[oi];
    }
    // Backward: P recomputed in base 2 from the forward's lse.
    const float lse2 = lse * log2e;
    for (std::size_t s = 0; s < D.lk; ++s) {
      if (!reference::mask_visible(cfg.mask, b, t, s)) continue;
      const float p = std::exp2(
          attention_emulation::fma_or_not(raw(b, i, t, s), scale_log2, -lse2, form.unfused));
      float dp = 0;
      for (std::size_t e = 0; e < D.d; ++e) dp += dout[D.qi(b, t, i, e)] * v[D.ki(b, s, j, e)];
      const float ds = p * (dp - dsum);
      for (std::size_t e = 0; e < D.d; ++e) {
        const std::size_t oi = D.qi(b, t, i, e), ki = D.ki(b, s, j, e);
        r.dq[oi] += ds * k[ki];
        r.dk[ki] += ds * q[oi];
        r.dv[ki] += p * dout[oi];
      }
    }
  });
  for (auto& x : r.dq) x = to_t(sigma * x);
  for (auto& x : r.dk) x = to_t(sigma * x);
  for (auto& x : r.dv) x = to_t(x);
  return r;
}

}  // namespace shardcheck::attention_exp2
