// Unit tests of reference/attention/attention.hpp's bound as a test of the attention kernel:
// realistic bugs (top-left causal alignment, lse without the max or in log2, a backward fed
// that lse, GQA head i reading kv head i mod g, dk/dv without the sum over the group's query
// heads) must exceed it, while the correct kernel stays within it. Part of
// ops_attention_unit_tests (attention_unit_support.hpp).
#include "attention_unit_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace shardcheck::test::attention_unit {
namespace {

// The largest |err|/bound of `computed` (any dtype) against the reference.
template <class C>
double ratio_of(const Tensor<C>& computed, const Tensor<hp>& ref, const Tensor<hp>& bound) {
  return judge(computed, ref, bound).max_ratio;
}

TYPED_TEST(AttentionTyped, the_bound_catches_realistic_bugs) {
  using T = TypeParam;
  using A = acc_t<T>;
  const std::string dt = dtype_name<T>();
  const std::size_t batch = 1, lq = 4, lk = 7, h = 4, g = 2, d = 8;
  AttentionConfig cfg;
  cfg.q_heads = h;
  cfg.kv_heads = g;
  cfg.head_dim = d;
  cfg.mask = {MaskKind::causal, lq, lk, {}, {}};
  const auto q = random_tensor<T>({batch, lq, h, d}, 31),
             k = random_tensor<T>({batch, lk, g, d}, 32),
             v = random_tensor<T>({batch, lk, g, d}, 33),
             dout = random_tensor<T>({batch, lq, h, d}, 34);
  const auto rq = to_hp(q), rk = to_hp(k), rv = to_hp(v), rdo = to_hp(dout);
  const auto rf = reference::attention_forward(cfg, rq, rk, rv);
  const auto rg = reference::attention_backward(cfg, rq, rk, rv, rf, rdo);
  const auto bnd = reference::attention_bounds(cfg, rq, rk, rv, rdo, arith<T>());
  const auto good = attention_forward(cfg, q, k, v);
  const auto good_g = attention_backward(cfg, q, k, v, good, dout);
  EXPECT_LE(ratio_of(good.out, rf.out, bnd.out), 1.0);

  // 1. Top-left causal alignment (s ≤ t) instead of bottom-right, Lq ≠ Lk.
  AttentionConfig tl = cfg;
  tl.mask.kind = MaskKind::explicit_mask;
  tl.mask.allowed = Tensor<std::uint8_t>(Shape{batch, lq, lk});
  for (std::size_t t = 0; t < lq; ++t)
    for (std::size_t s = 0; s < lk; ++s) tl.mask.allowed[t * lk + s] = s <= t ? 1 : 0;
  const double r_tl = ratio_of(attention_forward(tl, q, k, v).out, rf.out, bnd.out);
  record(dt + " mutant top-left causal out", r_tl);
  EXPECT_GT(r_tl, 1.0);

  // 2. Wrong lse: log(l) without the max, and log2 instead of the natural log.
  Tensor<A> no_max = good.lse, log2 = good.lse;
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t i = 0; i < h; ++i) {
      for (std::size_t t = 0; t < lq; ++t) {
        A m = -std::numeric_limits<A>::infinity();
        for (std::size_t s = 0; s < lk; ++s) {
          if (!visible(cfg.mask, b, t, s)) continue;
          A dot = 0;
          for (std::size_t e = 0; e < d; ++e)
            dot = dot +
                  A(q[((b * lq + t) * h + i) * d + e]) * A(k[((b * lk + s) * g + i / 2) * d + e]);
          m = std::max(m, dot * A(effective_scale(cfg)));
        }
        const std::size_t li = (b * h + i) * lq + t;
        no_max[li] = good.lse[li] - m;
        log2[li] = m + (good.lse[li] - m) / A(std::log(2.0));
      }
    }
  }
  const double r_nm = ratio_of(no_max, rf.lse, bnd.lse), r_l2 = ratio_of(log2, rf.lse, bnd.lse);
  record(dt + " mutant lse without max", r_nm);
  record(dt + " mutant lse in log2", r_l2);
  EXPECT_GT(r_nm, 1.0);
  EXPECT_GT(r_l2, 1.0);
  // ... and a backward fed the wrong lse gives wrong gradients.
  const AttentionOutput<T> bad_fwd{good.out, no_max};
  const double r_bl = ratio_of(attention_backward(cfg, q, k, v, bad_fwd, dout).dq, rg.dq, bnd.dq);
  record(dt + " mutant backward with lse without max dq", r_bl);
  EXPECT_GT(r_bl, 1.0);

  // 3. GQA head i reading kv head i mod g: run the kernel with the query heads permuted so that
  //    the correct mapping of the permuted tensor is the wrong mapping of the original.
  //    Original head i sits at position pos(i) with pos(i)/(h/g) = i mod g.
  std::vector<std::size_t> pos(h);
  {
    std::vector<std::size_t> fill(g, 0);
    for (std::size_t i = 0; i < h; ++i) pos[i] = (i % g) * (h / g) + fill[i % g]++;
  }
  auto permute_heads = [&](const Tensor<T>& x, bool inverse) {
    Tensor<T> y(x.shape());
    for (std::size_t bt = 0; bt < batch * lq; ++bt)
      for (std::size_t i = 0; i < h; ++i)
        for (std::size_t e = 0; e < d; ++e) {
          const std::size_t from = inverse ? pos[i] : i, to = inverse ? i : pos[i];
          y[(bt * h + to) * d + e] = x[(bt * h + from) * d + e];
        }
    return y;
  };
  const auto mod_out =
      permute_heads(attention_forward(cfg, permute_heads(q, false), k, v).out, true);
  const double r_mod = ratio_of(mod_out, rf.out, bnd.out);
  record(dt + " mutant gqa i mod g out", r_mod);
  EXPECT_GT(r_mod, 1.0);

  // 4. dk/dv without the sum over the group's query heads (only its first head).
  AttentionConfig first = cfg;
  first.q_heads = g;
  first.kv_heads = g;
  auto heads_of = [&](const Tensor<T>& x) {  // query heads 0, h/g, 2h/g, ...
    Tensor<T> y(Shape{batch, lq, g, d});
    for (std::size_t bt = 0; bt < batch * lq; ++bt)
      for (std::size_t j = 0; j < g; ++j)
        for (std::size_t e = 0; e < d; ++e)
          y[(bt * g + j) * d + e] = x[(bt * h + j * (h / g)) * d + e];
    return y;
  };
  Tensor<A> lse_first(Shape{batch, g, lq});
  for (std::size_t j = 0; j < g; ++j)
    for (std::size_t t = 0; t < lq; ++t) lse_first[j * lq + t] = good.lse[(j * (h / g)) * lq + t];
  const auto nogroup =
      attention_block_backward(first, heads_of(q), k, v, heads_of(good.out), lse_first,
                               heads_of(dout), iota_positions(lq), iota_positions(lk));
  const double r_grp = ratio_of(rounded<T>(nogroup.dk), rg.dk, bnd.dk);
  record(dt + " mutant dk without group sum", r_grp);
  EXPECT_GT(r_grp, 1.0);
  EXPECT_LE(ratio_of(good_g.dk, rg.dk, bnd.dk), 1.0);
}

}  // namespace
}  // namespace shardcheck::test::attention_unit
