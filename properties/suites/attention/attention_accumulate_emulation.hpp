// An attention kernel that accumulates in a declared accumulator Acc narrower than acc_t<T> (a
// 16-bit one: bfloat16), emulated independently of lib/ops/attention for the tests of the bound
// under a declared "accumulate" (reference/attention/attention_bound.hpp with A = Acc;
// docs/compare.md, "Contract").
#pragma once

#include "reference/attention/attention.hpp"
#include "suites/attention/attention_emulation_merge.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace shardcheck::attention_accumulate {

// out [batch, Lq, h, d] and dq as q; dk, dv as k; lse [batch, h, Lq] in Acc.
using AccumulateRun = attention_emulation::KernelRun;

// The natural-exp contract with every step one operation rounded to Acc: each operation in float
// on Acc operands, then rounded to Acc. For +, −, ×, ÷ of 8-bit (bfloat16) operands the float
// result rounded again to 8 bits is the correctly rounded one (float's 24 bits ≥ 2·8 + 2:
// Figueroa, "When is double rounding innocuous?", SIGNUM Newsletter 30(3), 1995); expf and logf
// rounded to Acc are within u_Acc + u_float of the exact value, inside the contract's 2u.
// Scores ŝ = fl(σ̂·(q·k)); per block of keys (`cuts`, as exp2_kernel's) p = fl(exp(fl(ŝ − m))),
// l = Σ p, acc = Σ fl(p·v), out_j = fl(acc/l), lse_j = fl(m + fl(log l)); blocks merged with
// w_j = fl(exp(fl(lse_j − max))), out = Σ fl(fl(w_j/Σw)·out_j), lse = fl(max + fl(log Σw)); out
// rounded to T. Backward: D = Σ fl(dout·out_T), P = fl(exp(fl(ŝ − lse))), dP = Σ fl(dout·v),
// dS = fl(P·fl(dP − D)), dq = fl(σ̂·Σ fl(dS·k)), dk = fl(σ̂·Σ fl(dS·q)), dv = Σ fl(P·dout),
// rounded to T. `drop_merge_normalization`: the merge's weights w_j not divided by Σw (the
// cp-merge-by-larger-lse bug, here as a mutant of the kernel).
template <class T, class Acc, class R>
AccumulateRun accumulate_kernel(const AttentionConfig& cfg, const Tensor<R>& tq,
                                const Tensor<R>& tk, const Tensor<R>& tv, const Tensor<R>& tdout,
                                const std::vector<std::size_t>& cuts,
                                bool drop_merge_normalization = false) {
  const auto D = reference::detail::attention_dims(cfg, tq, tk, tv, &tdout);
  const auto a = [](float x) { return static_cast<float>(Acc(x)); };  // one rounding to Acc
  const auto f = [&](const Tensor<R>& t) {
    std::vector<float> v(t.size());
    for (std::size_t i = 0; i < t.size(); ++i)
      v[i] = a(static_cast<float>(static_cast<double>(t[i])));
    return v;
  };
  const auto to_t = [](float x) { return static_cast<float>(T(x)); };
  const std::vector<float> q = f(tq), k = f(tk), v = f(tv), dout = f(tdout);
  const float sigma = a(static_cast<float>(reference::score_scale(cfg)));
  AccumulateRun r = attention_emulation::empty_run(D, q.size(), k.size());
  const auto score = [&](std::size_t b, std::size_t i, std::size_t t, std::size_t s) {
    float acc = 0;
    for (std::size_t e = 0; e < D.d; ++e) {
      acc = a(acc + a(q[D.qi(b, t, i, e)] * k[D.ki(b, s, i / D.group, e)]));
    }
    return a(sigma * acc);
  };
  attention_emulation::for_each_row(D, [&](std::size_t b, std::size_t i, std::size_t t) {
    const std::size_t j = i / D.group;
    std::vector<std::vector<float>> outs;
    std::vector<float> lses;
    for (const auto& keys : attention_emulation::visible_blocks(cfg.mask, b, t, cuts)) {
      const auto [ss, m] = attention_emulation::scores_and_max(
          keys, [&](std::size_t s) { return score(b, i, t, s); });
      float l = 0;
      std::vector<float> acc(D.d, 0.0F);
      for (std::size_t x = 0; x < keys.size(); ++x) {
        const float p = a(std::exp(a(ss[x] - m)));
        l = a(l + p);
        for (std::size_t e = 0; e < D.d; ++e) {
          acc[e] = a(acc[e] + a(p * v[D.ki(b, keys[x], j, e)]));
        }
      }
      for (auto& y : acc) y = a(y / l);
      outs.push_back(std::move(acc));
      lses.push_back(a(m + a(std::log(l))));
    }
    if (outs.empty()) return;  // an empty row: out 0, lse −inf, no gradient
    const auto [o, lse] =
        attention_emulation::merge_by_lse(outs, lses, a, !drop_merge_normalization);
    r.lse[D.li(b, i, t)] = lse;
    float dsum = 0;
    for (std::size_t e = 0; e < D.d; ++e) {
      const std::size_t oi = D.qi(b, t, i, e);
      r.out[oi] = to_t(o[e]);
      dsum = a(dsum + a(dout[oi] * r.out[oi]));
    }
    for (std::size_t s = 0; s < D.lk; ++s) {
      if (!reference::mask_visible(cfg.mask, b, t, s)) continue;
      const float p = a(std::exp(a(score(b, i, t, s) - lse)));
      float dp = 0;
      for (std::size_t e = 0; e < D.d; ++e) {
        dp = a(dp + a(dout[D.qi(b, t, i, e)] * v[D.ki(b, s, j, e)]));
      }
      const float ds = a(p * a(dp - dsum));
      for (std::size_t e = 0; e < D.d; ++e) {
        const std::size_t oi = D.qi(b, t, i, e), ki = D.ki(b, s, j, e);
        r.dq[oi] = a(r.dq[oi] + a(ds * k[ki]));
        r.dk[ki] = a(r.dk[ki] + a(ds * q[oi]));
        r.dv[ki] = a(r.dv[ki] + a(p * dout[oi]));
      }
    }
  });
  for (auto& x : r.dq) x = to_t(a(sigma * x));
  for (auto& x : r.dk) x = to_t(a(sigma * x));
  for (auto& x : r.dv) x = to_t(x);
  return r;
}

}  // namespace shardcheck::attention_accumulate
