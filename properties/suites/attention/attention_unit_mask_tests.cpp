// Unit tests of lib/ops/attention/attention.hpp, the masks: causal is bottom-right aligned by
// default (query t sees keys up to t + Lk - Lq) and top-left when declared (keys up to t; the
// two agree only when Lq = Lk), empty rows (fully padded, fully masked, or leading
// causal rows with Lq > Lk) give out 0, lse -inf and zero gradients, key padding equals
// attention over the valid keys bit for bit, and an explicit causal pattern reproduces the
// causal mask. Part of ops_attention_unit_tests (attention_unit_support.hpp).
#include "attention_unit_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::test::attention_unit {
namespace {

TEST(Attention, causal_is_bottom_right_aligned) {
  const std::vector<std::pair<std::size_t, std::size_t>> shapes{{2, 4}, {4, 2}, {3, 3}};
  for (const auto& [lq, lk] : shapes) {
    AttentionConfig cfg;
    cfg.mask = {MaskKind::causal, lq, lk, {}, {}};
    const Tensor<double> q(Shape{1, lq, 1, 1});  // zeros
    const auto k = seq_values<double>(1, lk, 1, 1, 0);
    const auto v = seq_values<double>(1, lk, 1, 1, 0);  // v_s = s + 1
    const auto f = attention_forward(cfg, q, k, v);
    for (std::size_t t = 0; t < lq; ++t) {
      // Query t sees keys 0..t + (Lk − Lq) (bottom-right): mean of 1..t + Lk − Lq + 1.
      const long last = static_cast<long>(t + lk) - static_cast<long>(lq);
      if (last < 0) {
        EXPECT_EQ(f.out[t], 0.0) << "Lq=" << lq << " Lk=" << lk << " t=" << t;
        EXPECT_EQ(f.lse[t], -std::numeric_limits<double>::infinity());
        continue;
      }
      const auto n = static_cast<double>(last + 1);
      EXPECT_NEAR(f.out[t], (n + 1) / 2, 1e-14) << "Lq=" << lq << " Lk=" << lk << " t=" << t;
      EXPECT_NEAR(f.lse[t], std::log(n), 1e-14);
    }
  }
  // The last query always sees every key; with Lq < Lk the first query sees Lk − Lq + 1 keys.
  AttentionConfig cfg;
  cfg.mask = {MaskKind::causal, 2, 5, {}, {}};
  EXPECT_TRUE(visible(cfg.mask, 0, 0, 3));
  EXPECT_FALSE(visible(cfg.mask, 0, 0, 4));
  EXPECT_TRUE(visible(cfg.mask, 0, 1, 4));
}

// top_left (PyTorch's is_causal, FlashAttention < 2.1): query t sees keys 0..t whatever Lk;
// the two alignments agree exactly when Lq = Lk. A decode query (Lq = 1) sees the whole cache
// bottom-right and only key 0 top-left.
TEST(Attention, causal_alignments_differ_only_when_lq_differs_from_lk) {
  for (const auto& [lq, lk] :
       std::vector<std::pair<std::size_t, std::size_t>>{{1, 5}, {2, 5}, {3, 3}, {4, 2}}) {
    AttentionMask br{MaskKind::causal, lq, lk, {}, {}};
    AttentionMask tl = br;
    tl.alignment = CausalAlignment::top_left;
    bool differ = false;
    for (std::size_t t = 0; t < lq; ++t) {
      for (std::size_t s = 0; s < lk; ++s) {
        EXPECT_EQ(visible(tl, 0, t, s), s <= t) << "Lq=" << lq << " Lk=" << lk;
        differ = differ || visible(tl, 0, t, s) != visible(br, 0, t, s);
      }
    }
    EXPECT_EQ(differ, lq != lk) << "Lq=" << lq << " Lk=" << lk;
  }
  AttentionMask decode{MaskKind::causal, 1, 5, {}, {}};
  for (std::size_t s = 0; s < 5; ++s) EXPECT_TRUE(visible(decode, 0, 0, s));
  decode.alignment = CausalAlignment::top_left;
  EXPECT_TRUE(visible(decode, 0, 0, 0));
  EXPECT_FALSE(visible(decode, 0, 0, 1));
}

TYPED_TEST(AttentionTyped, empty_rows_give_zero_out_minus_inf_lse_and_zero_gradients) {
  using T = TypeParam;
  // Sequence 0 fully padded; sequence 1 has a fully masked row in its explicit mask; causal with
  // Lq > Lk has empty leading rows.
  const std::size_t lq = 3, lk = 4, d = 4;
  AttentionConfig cfg;
  cfg.head_dim = d;
  cfg.mask.kind = MaskKind::explicit_mask;
  cfg.mask.q_len = lq;
  cfg.mask.k_len = lk;
  cfg.mask.key_lengths = {0, 4};
  cfg.mask.allowed =
      Tensor<std::uint8_t>(Shape{2, lq, lk}, std::vector<std::uint8_t>(2 * lq * lk, 1));
  for (std::size_t s = 0; s < lk; ++s) cfg.mask.allowed[(1 * lq + 1) * lk + s] = 0;  // b 1, t 1
  const auto q = random_tensor<T>({2, lq, 1, d}, 1), k = random_tensor<T>({2, lk, 1, d}, 2),
             v = random_tensor<T>({2, lk, 1, d}, 3), dout = random_tensor<T>({2, lq, 1, d}, 4);
  const auto f = attention_forward(cfg, q, k, v);
  const auto g = attention_backward(cfg, q, k, v, f, dout);
  auto empty_row = [](std::size_t b, std::size_t t) { return b == 0 || t == 1; };
  for (std::size_t b = 0; b < 2; ++b) {
    for (std::size_t t = 0; t < lq; ++t) {
      const auto lse = static_cast<float>(f.lse[b * lq + t]);
      for (std::size_t e = 0; e < d; ++e) {
        const auto o = static_cast<double>(f.out[(b * lq + t) * d + e]);
        const auto dq = static_cast<double>(g.dq[(b * lq + t) * d + e]);
        EXPECT_FALSE(std::isnan(o) || std::isnan(dq));
        if (empty_row(b, t)) {
          EXPECT_EQ(o, 0.0);
          EXPECT_EQ(dq, 0.0);
        }
      }
      if (empty_row(b, t)) {
        EXPECT_EQ(lse, -std::numeric_limits<float>::infinity());
      } else {
        EXPECT_TRUE(std::isfinite(lse));
      }
    }
  }
  // Sequence 0's keys are seen by no one: zero dk, dv.
  for (std::size_t x = 0; x < lk * d; ++x) {
    EXPECT_EQ(static_cast<double>(g.dk[x]), 0.0);
    EXPECT_EQ(static_cast<double>(g.dv[x]), 0.0);
  }
  // The block kernel on a block none of a row's keys fall in, and the merge of empty partials.
  const auto part = attention_block_forward(cfg, q, seq_slice(k, 0, 0), seq_slice(v, 0, 0),
                                            iota_positions(lq), iota_positions(0));
  for (const auto x : part.lse.values()) EXPECT_EQ(x, -std::numeric_limits<acc_t<T>>::infinity());
  for (const auto x : part.out.values()) EXPECT_EQ(x, acc_t<T>(0));
  // Causal with Lq > Lk: rows 0 and 1 of 4 see nothing.
  AttentionConfig c2;
  c2.head_dim = d;
  c2.mask = {MaskKind::causal, 4, 2, {}, {}};
  const auto q2 = random_tensor<T>({1, 4, 1, d}, 5);
  const auto k2 = random_tensor<T>({1, 2, 1, d}, 6);
  const auto f2 = attention_forward(c2, q2, k2, k2);
  const auto g2 = attention_backward(c2, q2, k2, k2, f2, q2);
  EXPECT_EQ(f2.lse[0], -std::numeric_limits<acc_t<T>>::infinity());
  EXPECT_EQ(f2.lse[1], -std::numeric_limits<acc_t<T>>::infinity());
  for (std::size_t e = 0; e < 2 * d; ++e) {
    EXPECT_EQ(static_cast<double>(f2.out[e]), 0.0);
    EXPECT_EQ(static_cast<double>(g2.dq[e]), 0.0);
  }
  for (const auto x : g2.dk.values()) EXPECT_FALSE(Eigen::numext::isnan(x));
}

TYPED_TEST(AttentionTyped, key_padding_equals_attention_over_the_valid_keys) {
  using T = TypeParam;
  const std::size_t lq = 4, lk = 6, d = 8;
  AttentionConfig cfg;
  cfg.q_heads = 2;
  cfg.kv_heads = 1;
  cfg.head_dim = d;
  cfg.mask = {MaskKind::none, lq, lk, {3, 6}, {}};
  const auto q = random_tensor<T>({2, lq, 2, d}, 11), k = random_tensor<T>({2, lk, 1, d}, 12),
             v = random_tensor<T>({2, lk, 1, d}, 13), dout = random_tensor<T>({2, lq, 2, d}, 14);
  const auto f = attention_forward(cfg, q, k, v);
  const auto g = attention_backward(cfg, q, k, v, f, dout);
  // Sequence 0 against its 3 valid keys only, unmasked: the same bits (same operations).
  AttentionConfig c0 = cfg;
  c0.mask = {};
  auto seq0 = [&](const Tensor<T>& t, std::size_t len) {
    Tensor<T> o(Shape{1, len, t.dim(2), t.dim(3)});
    std::copy_n(t.data(), o.size(), o.data());
    return o;
  };
  const auto f0 = attention_forward(c0, seq0(q, lq), seq0(k, 3), seq0(v, 3));
  const auto g0 = attention_backward(c0, seq0(q, lq), seq0(k, 3), seq0(v, 3), f0, seq0(dout, lq));
  EXPECT_TRUE(bit_equal(f0.out, seq0(f.out, lq)));
  EXPECT_TRUE(bit_equal(g0.dk, seq0(g.dk, 3)));
  for (std::size_t x = 3 * d; x < lk * d; ++x) {  // padded keys of sequence 0: no gradient
    EXPECT_EQ(static_cast<double>(g.dk[x]), 0.0);
    EXPECT_EQ(static_cast<double>(g.dv[x]), 0.0);
  }
  // And within the bound of the reference.
  const auto rf = reference::attention_forward(cfg, to_hp(q), to_hp(k), to_hp(v));
  const auto bnd =
      reference::attention_bounds(cfg, to_hp(q), to_hp(k), to_hp(v), to_hp(dout), arith<T>());
  EXPECT_WITHIN_BOUND(std::string(dtype_name<T>()) + " dense out", f.out, rf.out, bnd.out);
}

TYPED_TEST(AttentionTyped, an_explicit_causal_pattern_reproduces_the_causal_mask) {
  using T = TypeParam;
  const std::size_t lq = 5, lk = 7, d = 4;
  AttentionConfig causal;
  causal.q_heads = 2;
  causal.head_dim = d;
  causal.kv_heads = 2;
  causal.mask = {MaskKind::causal, lq, lk, {}, {}};
  AttentionConfig expl = causal;
  expl.mask.kind = MaskKind::explicit_mask;
  expl.mask.allowed = Tensor<std::uint8_t>(Shape{1, lq, lk});
  for (std::size_t t = 0; t < lq; ++t)
    for (std::size_t s = 0; s < lk; ++s) expl.mask.allowed[t * lk + s] = s <= t + (lk - lq) ? 1 : 0;
  const auto q = random_tensor<T>({1, lq, 2, d}, 21), k = random_tensor<T>({1, lk, 2, d}, 22),
             v = random_tensor<T>({1, lk, 2, d}, 23), dout = random_tensor<T>({1, lq, 2, d}, 24);
  const auto a = attention_forward(causal, q, k, v), b = attention_forward(expl, q, k, v);
  EXPECT_TRUE(bit_equal(a.out, b.out));
  EXPECT_TRUE(bit_equal(a.lse, b.lse));
  const auto ga = attention_backward(causal, q, k, v, a, dout);
  const auto gb = attention_backward(expl, q, k, v, b, dout);
  EXPECT_TRUE(bit_equal(ga.dq, gb.dq) && bit_equal(ga.dk, gb.dk) && bit_equal(ga.dv, gb.dv));
}

}  // namespace
}  // namespace shardcheck::test::attention_unit
