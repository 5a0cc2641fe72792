// Unit tests of lib/ops/attention/attention.hpp's UsageErrors: every message of the dense op
// and the block kernel names the shapes or values at fault and what to pass. Part of
// ops_attention_unit_tests (attention_unit_support.hpp).
#include "attention_unit_support.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <span>

namespace shardcheck::test::attention_unit {
namespace {

using ::testing::HasSubstr;

TEST(AttentionUsageErrors, name_the_shapes_and_what_to_pass) {
  AttentionConfig cfg;
  cfg.q_heads = 4;
  cfg.kv_heads = 2;
  cfg.head_dim = 3;
  cfg.mask = {MaskKind::causal, 5, 6, {}, {}};
  const auto q = random_tensor<float>({2, 5, 4, 3}, 1);
  const auto k = random_tensor<float>({2, 6, 2, 3}, 2);
  const auto v = random_tensor<float>({2, 6, 2, 3}, 3);
  auto fwd = [&](const AttentionConfig& c, const Tensor<float>& qq, const Tensor<float>& kk,
                 const Tensor<float>& vv) {
    return usage_error_of([&] { (void)attention_forward(c, qq, kk, vv); });
  };
  auto with = [&](auto change) {
    AttentionConfig c = cfg;
    change(c);
    return c;
  };
  EXPECT_THAT(fwd(with([](auto& c) { c.kv_heads = 3; }), q, k, v),
              HasSubstr("cfg.q_heads = 4 and cfg.kv_heads = 3: the number of query heads must be "
                        "a positive multiple"));
  EXPECT_THAT(fwd(with([](auto& c) { c.head_dim = 0; }), q, k, v),
              HasSubstr("cfg.head_dim = 0; pass the head dimension"));
  EXPECT_THAT(fwd(with([](auto& c) { c.head_dim = 4; }), q, k, v),
              HasSubstr("but cfg.head_dim = 4; the last axis of q, k and v must be the head "
                        "dimension 4"));
  EXPECT_THAT(
      fwd(with([](auto& c) { c.scale = std::numeric_limits<double>::quiet_NaN(); }), q, k, v),
      HasSubstr("is not finite; pass a finite scale, or 0 for 1/sqrt(head_dim)"));
  EXPECT_THAT(fwd(cfg, random_tensor<float>({5, 4, 3}, 1), k, v),
              HasSubstr("q is [5, 4, 3] but must be 4-D [batch, Lq, h, d] (BSHD layout)"));
  EXPECT_THAT(fwd(cfg, q, k, random_tensor<float>({2, 7, 2, 3}, 1)),
              HasSubstr("k is [2, 6, 2, 3] but v is [2, 7, 2, 3]; k and v must both be"));
  EXPECT_THAT(
      fwd(cfg, q, random_tensor<float>({1, 6, 2, 3}, 1), random_tensor<float>({1, 6, 2, 3}, 1)),
      HasSubstr("q and k must have the same batch size"));
  EXPECT_THAT(
      fwd(cfg, q, random_tensor<float>({2, 6, 1, 3}, 1), random_tensor<float>({2, 6, 1, 3}, 1)),
      HasSubstr("q has 4 heads and k, v have 1 but cfg has q_heads = 4, kv_heads = 2; q "
                "must have (h/g)·(k's heads) = 2·g_local heads"));
  EXPECT_THAT(fwd(with([](auto& c) { c.mask.key_lengths = {6}; }), q, k, v),
              HasSubstr("cfg.mask.key_lengths has 1 entries but the batch has 2 sequences"));
  EXPECT_THAT(fwd(with([](auto& c) {
                    c.mask.key_lengths = {6, 7};
                  }),
                  q, k, v),
              HasSubstr("cfg.mask.key_lengths[1] = 7 exceeds cfg.mask.k_len = 6"));
  EXPECT_THAT(fwd(with([](auto& c) {
                    c.mask.kind = MaskKind::explicit_mask;
                    c.mask.allowed = Tensor<std::uint8_t>(Shape{2, 6, 5});
                  }),
                  q, k, v),
              HasSubstr("cfg.mask.allowed is [2, 6, 5] but an explicit mask must be [batch, "
                        "q_len, k_len] = [2, 5, 6]"));
  EXPECT_THAT(fwd(with([](auto& c) { c.mask.q_len = 0; }), q, k, v),
              HasSubstr("q_positions[0] = 0 is outside the mask's range [0, 0) (cfg.mask.q_len = "
                        "0); set cfg.mask.q_len to the GLOBAL sequence length"));
  EXPECT_THAT(fwd(with([](auto& c) { c.mask.k_len = 9; }), q, k, v),
              HasSubstr("the dense op is unpartitioned: set cfg.mask.q_len = 5 and "
                        "cfg.mask.k_len = 6"));
  EXPECT_THAT(fwd(with([](auto& c) {
                    c.mask = {MaskKind::none, 0, 0, {6, 6}, {}};
                  }),
                  q, k, v),
              HasSubstr("exceeds cfg.mask.k_len = 0"));
  // The dense op needs every head; the block kernel accepts a matching slice.
  const auto q2 = random_tensor<float>({2, 5, 2, 3}, 4);
  const auto k1 = random_tensor<float>({2, 6, 1, 3}, 5);
  EXPECT_THAT(fwd(cfg, q2, k1, k1), HasSubstr("the dense op takes every head"));
  EXPECT_NO_THROW(
      (void)attention_block_forward(cfg, q2, k1, k1, iota_positions(5), iota_positions(6)));
  const auto q8 = random_tensor<float>({2, 5, 8, 3}, 6);
  const auto k4 = random_tensor<float>({2, 6, 4, 3}, 7);
  EXPECT_THAT(usage_error_of([&] {
                (void)attention_block_forward(cfg, q8, k4, k4, iota_positions(5),
                                              iota_positions(6));
              }),
              HasSubstr("but cfg has only q_heads = 4, kv_heads = 2; cfg must give the global "
                        "head counts"));
  // Positions of the block kernel.
  EXPECT_THAT(usage_error_of([&] {
                (void)attention_block_forward(cfg, q, k, v, iota_positions(4), iota_positions(6));
              }),
              HasSubstr("4 q_positions for 5 query rows (q.dim(1)); pass one global position per "
                        "row"));
  EXPECT_THAT(usage_error_of([&] {
                (void)attention_block_forward(cfg, q, k, v, iota_positions(5),
                                              range_positions(1, 6));
              }),
              HasSubstr("k_positions[5] = 6 is outside the mask's range [0, 6) (cfg.mask.k_len = "
                        "6)"));
  // Backward's extra tensors.
  const auto f = attention_forward(cfg, q, k, v);
  EXPECT_THAT(usage_error_of([&] { (void)attention_backward(cfg, q, k, v, f, k); }),
              HasSubstr("dout is [2, 6, 2, 3] but must be [2, 5, 4, 3] (q's shape)"));
  AttentionOutput<float> bad = f;
  bad.lse = Tensor<float>(Shape{2, 5, 4});
  EXPECT_THAT(usage_error_of([&] { (void)attention_backward(cfg, q, k, v, bad, q); }),
              HasSubstr("fwd.lse is [2, 5, 4] but must be [2, 4, 5] [batch, h, Lq]"));
  bad = f;
  bad.out = q2;
  EXPECT_THAT(usage_error_of([&] { (void)attention_backward(cfg, q, k, v, bad, q); }),
              HasSubstr("fwd.out is [2, 5, 2, 3] but must be [2, 5, 4, 3]"));
  EXPECT_THAT(usage_error_of([&] {
                (void)attention_block_backward(cfg, q, k, v, q2, f.lse, q, iota_positions(5),
                                               iota_positions(6));
              }),
              HasSubstr("attention_block_backward: out is [2, 5, 2, 3] but must be [2, 5, 4, 3]"));
  EXPECT_THAT(usage_error_of([&] {
                (void)attention_block_backward(cfg, q, k, v, q, Tensor<float>(Shape{2, 4, 4}), q,
                                               iota_positions(5), iota_positions(6));
              }),
              HasSubstr("lse is [2, 4, 4] but must be [2, 4, 5] [batch, h_local, Lq_local]"));
  EXPECT_THAT(usage_error_of([&] {
                check_attention_shapes(with([](auto& c) { c.kv_heads = 0; }), q, k, v,
                                       std::span<const std::size_t>(iota_positions(5)),
                                       std::span<const std::size_t>(iota_positions(6)));
              }),
              HasSubstr("attention: cfg.q_heads = 4 and cfg.kv_heads = 0"));
  // kind none without padding needs no lengths.
  EXPECT_NO_THROW((void)attention_forward(with([](auto& c) { c.mask = {}; }), q, k, v));
  EXPECT_EQ(to_string(MaskKind::causal), "causal");
}

}  // namespace
}  // namespace shardcheck::test::attention_unit
