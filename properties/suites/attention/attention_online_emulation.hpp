// FlashAttention's online softmax forward, emulated in float independently of lib/ops/attention
// for the tests of the online bound (reference/attention/attention_bound.hpp, "the online
// softmax"): natural exp or the exp2 contract's pre-scaled exp2.
#pragma once

#include "reference/attention/attention.hpp"
#include "suites/attention/attention_emulation_merge.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace shardcheck::attention_online {

// q [batch, Lq, h, d], k and v [batch, Lk, g, d] (values of T in R). Per query row, the keys in
// order in blocks of `block` keys (the masked ones skipped): m_b = max(m_{b−1}, the block's
// scores), r = exp(m_{b−1} − m_b) (exp2((m_{b−1} − m_b)·scale_log2) under exp2, on raw dots),
// l ← r·l + Σ p, acc ← r·acc + Σ p·v with p = exp(s − m_b) (exp2(fma(raw, scale_log2,
// −m_b·scale_log2))); out = acc/l rounded to T, lse = m + log l (under exp2 m₂ + log2 l, times
// ln 2). `forget_l_rescale`: l is never rescaled (a mutant). `form`: FlashAttention-2's CUDA
// departures (attention_emulation::KernelForm: the exp2 argument unfused, the lse as fl(fl(m·σ̂)
// + logf(l)), out = acc·(1/l)). Returns out and lse (dq, dk, dv empty: the backward is the dense
// one's).
template <class T, class R>
attention_emulation::KernelRun online_kernel(const AttentionConfig& cfg, const Tensor<R>& tq,
                                             const Tensor<R>& tk, const Tensor<R>& tv,
                                             std::size_t block, bool exp2,
                                             bool forget_l_rescale = false,
                                             attention_emulation::KernelForm form = {}) {
  const auto D =
      reference::detail::attention_dims(cfg, tq, tk, tv, static_cast<const Tensor<R>*>(nullptr));
  const auto f = [](const Tensor<R>& t) {
    std::vector<float> v(t.size());
    for (std::size_t i = 0; i < t.size(); ++i) v[i] = static_cast<float>(static_cast<double>(t[i]));
    return v;
  };
  const std::vector<float> q = f(tq), k = f(tk), v = f(tv);
  const auto sigma = static_cast<float>(reference::score_scale(cfg));
  const auto sl = static_cast<float>(static_cast<double>(sigma) * 1.4426950408889634);
  const auto ln2 = static_cast<float>(0.6931471805599453);
  auto r = attention_emulation::empty_run(D, q.size(), k.size());
  const auto raw = [&](std::size_t b, std::size_t i, std::size_t t, std::size_t s) {
    float acc = 0;
    for (std::size_t e = 0; e < D.d; ++e)
      acc += q[D.qi(b, t, i, e)] * k[D.ki(b, s, i / D.group, e)];
    return acc;
  };
  attention_emulation::for_each_row(D, [&](std::size_t b, std::size_t i, std::size_t t) {
    const std::size_t j = i / D.group;
    // m is in the scores' units: σ·raw (exp) or raw (exp2, whose argument scales it).
    float m = -std::numeric_limits<float>::infinity(), l = 0;
    std::vector<float> acc(D.d, 0.0F);
    bool any = false;
    for (std::size_t s0 = 0; s0 < D.lk; s0 += block) {
      std::vector<std::size_t> keys;
      for (std::size_t s = s0; s < std::min(D.lk, s0 + block); ++s) {
        if (reference::mask_visible(cfg.mask, b, t, s)) keys.push_back(s);
      }
      if (keys.empty()) continue;
      const auto [ss, mblk] = attention_emulation::scores_and_max(
          keys, [&](std::size_t s) { return exp2 ? raw(b, i, t, s) : sigma * raw(b, i, t, s); });
      const float mb = std::max(m, mblk);
      if (any) {
        const float resc = exp2 ? std::exp2((m - mb) * sl) : std::exp(m - mb);
        if (!forget_l_rescale) l = resc * l;
        for (auto& a : acc) a = resc * a;
      }
      const float mb2 = mb * sl;
      for (std::size_t x = 0; x < keys.size(); ++x) {
        const float p =
            exp2 ? std::exp2(attention_emulation::fma_or_not(ss[x], sl, -mb2, form.unfused))
                 : std::exp(ss[x] - mb);
        l += p;
        for (std::size_t e = 0; e < D.d; ++e) acc[e] += p * v[D.ki(b, keys[x], j, e)];
      }
      m = mb;
      any = true;
    }
    if (!any) return;  // an empty row: out 0, lse −inf
    const float inv = 1 / l;
    for (std::size_t e = 0; e < D.d; ++e) {
      r.out[D.qi(b, t, i, e)] = static_cast<float>(T(form.reciprocal ? acc[e] * inv : acc[e] / l));
    }
    if (exp2 && form.natural_lse) {
      r.lse[D.li(b, i, t)] = m * sigma + std::log(l);  // FlashAttention-2: row_max·scale + log
    } else {
      r.lse[D.li(b, i, t)] = exp2 ? (m * sl + std::log2(l)) * ln2 : m + std::log(l);
    }
  });
  return r;
}

}  // namespace shardcheck::attention_online
