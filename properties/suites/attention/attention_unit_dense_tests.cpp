// Unit tests of lib/ops/attention/attention.hpp, the dense op: forward (out, lse) and backward
// (dq, dk, dv) against the high-precision reference within its a-priori bound for float64,
// float32, bfloat16 and float16, also with inputs that carry a rounding error (the bound needs
// those errors for 16-bit inputs), values checked by hand, and the GQA head mapping (query
// head i reads kv head i/(h/g)). Part of ops_attention_unit_tests (attention_unit_support.hpp).
#include "attention_unit_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace shardcheck::test::attention_unit {
namespace {

TYPED_TEST(AttentionTyped, dense_op_is_within_the_reference_bound) {
  using T = TypeParam;
  std::uint64_t seed = 100;
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto cfg = make_config(c, seed);
    const auto in = make_inputs<T>(c, seed += 10);
    const auto fwd = attention_forward(cfg, in.q, in.k, in.v);
    const auto grads = attention_backward(cfg, in.q, in.k, in.v, fwd, in.dout);

    const ReferenceAttention<T> ref(cfg, in);
    const auto bnd = ref.bounds();
    const std::string key = std::string(dtype_name<T>()) + " dense ";
    expect_within_bounds(key, fwd, grads, ref.rf, ref.rg, bnd);
  }
}

// The same with inputs that come from a rounded computation: the implementation sees q̂, k̂, v̂,
// dout̂ (the exact values rounded to T) and the bound is given the input errors.
TYPED_TEST(AttentionTyped, input_errors_are_carried_by_the_bound) {
  using T = TypeParam;
  const Case c{"gqa_causal", 2, 6, 8, 4, 2, 8, MaskKind::causal, false};
  const auto cfg = make_config(c, 7);
  // Exact inputs: float64 values with 40 significant bits; the implementation gets them rounded.
  auto exact = [](Shape s, std::uint64_t seed) {
    Rng rng(seed);
    Tensor<hp> t(std::move(s));
    for (auto& x : t.values()) {
      const double f = static_cast<double>(rng.next() >> 24) / 1099511627776.0;
      x = hp((rng.next() & 1U) != 0 ? -1 - f : 1 + f) * hp(std::ldexp(1.0, int(rng.below(5)) - 3));
    }
    return t;
  };
  const auto q = exact({2, 6, 4, 8}, 1), k = exact({2, 8, 2, 8}, 2), v = exact({2, 8, 2, 8}, 3),
             dout = exact({2, 6, 4, 8}, 4);
  auto err_of = [](const Tensor<hp>& x, const Tensor<T>& xr) {
    Tensor<hp> e(x.shape());
    for (std::size_t i = 0; i < x.size(); ++i) {
      using std::abs;
      // The rounding's bound, as a projection's error bound would be given: u_T·|x| + η_T/2.
      const auto f = reference::format_of<T>();
      e[i] = reference::unit_roundoff<hp>(f) * abs(x[i]) + reference::smallest_subnormal<hp>(f) / 2;
      EXPECT_LE(abs(to_hp(xr[i]) - x[i]), e[i]);
    }
    return e;
  };
  const auto qt = reference::round_to<T>(q), kt = reference::round_to<T>(k),
             vt = reference::round_to<T>(v), dt = reference::round_to<T>(dout);
  reference::AttentionBoundOptions<hp> opt;
  opt.q_error = err_of(q, qt);
  opt.k_error = err_of(k, kt);
  opt.v_error = err_of(v, vt);
  opt.dout_error = err_of(dout, dt);
  const auto fwd = attention_forward(cfg, qt, kt, vt);
  const auto grads = attention_backward(cfg, qt, kt, vt, fwd, dt);
  const auto rf = reference::attention_forward(cfg, q, k, v);
  const auto rg = reference::attention_backward(cfg, q, k, v, rf, dout);
  const auto bnd = reference::attention_bounds(cfg, q, k, v, dout, arith<T>(), opt);
  const std::string key = std::string(dtype_name<T>()) + " inexact-inputs ";
  expect_within_bounds(key, fwd, grads, rf, rg, bnd);
  // Without the input errors the bound is too small for 16-bit inputs (their rounding
  // dominates): the input terms are needed, not decoration. Informational for float32/64.
  const auto bare = reference::attention_bounds(cfg, q, k, v, dout, arith<T>());
  double bare_ratio = 0;
  for (const double r :
       {judge(fwd.out, rf.out, bare.out).max_ratio, judge(fwd.lse, rf.lse, bare.lse).max_ratio,
        judge(grads.dq, rg.dq, bare.dq).max_ratio, judge(grads.dk, rg.dk, bare.dk).max_ratio}) {
    bare_ratio = std::max(bare_ratio, r);
  }
  record(std::string(dtype_name<T>()) + " inexact-inputs, bound without them", bare_ratio);
  if constexpr (sizeof(T) == 2) {
    EXPECT_GT(bare_ratio, 1.0);
  }
}

// ---------------------------------------------------------------- hand-checked values

TEST(Attention, two_keys_by_hand) {
  // d = 1, scale 1: q = 1, k = (0, 1), v = (1, 3): s = (0, 1), P = (1, e)/(1 + e).
  AttentionConfig cfg;
  cfg.scale = 1;
  const auto q = tensor_of<double>({1, 1, 1, 1}, {1});
  const auto k = tensor_of<double>({1, 2, 1, 1}, {0, 1});
  const auto v = tensor_of<double>({1, 2, 1, 1}, {1, 3});
  const auto f = attention_forward(cfg, q, k, v);
  const double e = std::exp(1.0), p0 = 1 / (1 + e), p1 = e / (1 + e);
  const double out = p0 + 3 * p1;
  EXPECT_NEAR(f.out[0], out, 1e-15);
  EXPECT_NEAR(f.lse[0], std::log(1 + e), 1e-15);
  // dout = 1: D = out, dP = v, dS = P·(v − out); dq = Σ dS·k; dk = dS·q; dv = P.
  const auto g = attention_backward(cfg, q, k, v, f, tensor_of<double>({1, 1, 1, 1}, {1}));
  EXPECT_NEAR(g.dq[0], p1 * (3 - out), 1e-15);
  EXPECT_NEAR(g.dk[0], p0 * (1 - out), 1e-15);
  EXPECT_NEAR(g.dk[1], p1 * (3 - out), 1e-15);
  EXPECT_NEAR(g.dv[0], p0, 1e-15);
  EXPECT_NEAR(g.dv[1], p1, 1e-15);
  // Default scale 1/sqrt(d): d = 4, q·k = 4 → s = 2.
  AttentionConfig c4;
  c4.head_dim = 4;
  EXPECT_EQ(effective_scale(c4), 0.5);
  const auto q4 = tensor_of<double>({1, 1, 1, 4}, {1, 1, 1, 1});
  const auto k4 = tensor_of<double>({1, 2, 1, 4}, {1, 1, 1, 1, 0, 0, 0, 0});
  const auto v4 = tensor_of<double>({1, 2, 1, 4}, {1, 1, 1, 1, 0, 0, 0, 0});
  const auto f4 = attention_forward(c4, q4, k4, v4);
  EXPECT_NEAR(f4.lse[0], std::log(std::exp(2.0) + 1), 1e-15);
  EXPECT_NEAR(f4.out[0], std::exp(2.0) / (std::exp(2.0) + 1), 1e-15);
}

TEST(Attention, query_head_i_reads_kv_head_i_over_group_size) {
  // h = 6, g = 3 (groups of 2): head i must read kv head i/2, not i mod 3. v of kv head j is
  // constant 10·j + s + 1 over key s; q = 0, so out of head i is the mean over s.
  const std::size_t h = 6, g = 3, lk = 3;
  AttentionConfig cfg;
  cfg.q_heads = h;
  cfg.kv_heads = g;
  const Tensor<double> q(Shape{1, 1, h, 1});
  const auto k = seq_values<double>(1, lk, g, 1, 10);
  const auto v = seq_values<double>(1, lk, g, 1, 10);
  const auto f = attention_forward(cfg, q, k, v);
  for (std::size_t i = 0; i < h; ++i) {
    const std::size_t kv_head = i / (h / g);  // an integer division: the head's group
    EXPECT_NEAR(f.out[i], 2.0 + 10.0 * static_cast<double>(kv_head), 1e-14)
        << "query head " << i << " must read kv head " << kv_head << " (i mod g would read "
        << i % g << ")";
  }
  // dk, dv of a kv head sum over its query heads: dv_s = Σ_i P·dout = 2·(1/3)·dout.
  const Tensor<double> dout(Shape{1, 1, h, 1}, std::vector<double>(h, 1.5));
  const auto gr = attention_backward(cfg, q, k, v, f, dout);
  for (std::size_t x = 0; x < gr.dv.size(); ++x) EXPECT_NEAR(gr.dv[x], 2 * 1.5 / 3, 1e-15);
}

}  // namespace
}  // namespace shardcheck::test::attention_unit
