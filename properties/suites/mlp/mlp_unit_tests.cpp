// Unit tests of the MLP block (ops/mlp/mlp.hpp): the activation functions at hand-checked values
// (computed independently with Python's math.erf/tanh/exp in float64), a hand-checked dense
// forward, and the relations that hold bit for bit between parallel_mlp and the dense mlp in the
// same type with the deterministic kernel:
//   forward   rank r's h = the dense h's columns of r ([g_r | u_r] for swiglu); P = 1: y = dense y
//   backward  dw_up, db_up = the dense rows of r (the fused [dWg_r; dWu_r] for swiglu);
//             dw_down = the dense columns of r; db_down = the dense db_down on every rank;
//             P = 1: dx = dense dx
// Swept: every element type, P = 1..4, the split policies of ops_test_util (empty shards
// included), the three activations, bias on and off, sequence parallelism on and off.
#include "ops/mlp/mlp.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace shardcheck {
namespace {

using namespace test;  // the suites' test helpers (testing/ops_test_util.hpp)

TEST(MlpActivation, hand_checked_values_in_float64) {
  // f(1) and f(-2), against Python's math module (float64).
  struct HandChecked {
    const char* name;
    double (*f)(double);
    double at_1, at_minus_2;
  };
  const HandChecked table[] = {
      {"gelu", gelu<double>, 0.8413447460685429, -0.04550026389635842},
      {"gelu_grad", gelu_grad<double>, 1.0833154705876864, -0.08523180107819692},
      {"gelu_tanh", gelu_tanh<double>, 0.8411919906082768, -0.04540230591222494},
      {"gelu_tanh_grad", gelu_tanh_grad<double>, 1.0829640838457826, -0.08609925662361825},
      {"silu", silu<double>, 0.7310585786300049, -0.2384058440442351},
      {"silu_grad", silu_grad<double>, 0.9276705118714869, -0.09078424878489544},
  };
  for (const auto& h : table) {
    EXPECT_NEAR(h.f(1.0), h.at_1, 1e-15) << h.name << "(1)";
    EXPECT_NEAR(h.f(-2.0), h.at_minus_2, 1e-15) << h.name << "(-2)";
  }
  // silu' for large x: σ(−x) is computed directly, so x·σ(−x) does not cancel to x·0.
  EXPECT_NEAR(silu_grad(40.0f), 1.0f, 1e-6f);
}

TEST(MlpActivation, swiglu_multiplies_the_gate_by_the_up_columns) {
  // h = [g | u] = [1, -2 | 3, 0.5]: a = [silu(1)·3, silu(-2)·0.5].
  const auto h = test::tensor_of<double>({1, 4}, {1, -2, 3, 0.5});
  const auto a = mlp_activation(h, Activation::swiglu);
  ASSERT_EQ(a.shape(), (Shape{1, 2}));
  EXPECT_NEAR(a[0], 0.7310585786300049 * 3, 1e-15);
  EXPECT_NEAR(a[1], -0.2384058440442351 * 0.5, 1e-15);
  // dg = da·u·silu'(g), du = da·silu(g) with da = [2, -1].
  const auto dh =
      mlp_activation_backward(h, Activation::swiglu, test::tensor_of<double>({1, 2}, {2, -1}));
  EXPECT_NEAR(dh[0], 2 * 3 * 0.9276705118714869, 1e-14);
  EXPECT_NEAR(dh[1], -1 * 0.5 * -0.09078424878489544, 1e-15);
  EXPECT_NEAR(dh[2], 2 * 0.7310585786300049, 1e-15);
  EXPECT_NEAR(dh[3], -1 * -0.2384058440442351, 1e-15);
}

TEST(Mlp, hand_checked_dense_forward) {
  // x = [1, -2], w_up = [1, 1] (F = 1): h = -1 + b_up 0.5 = -0.5; a = gelu(-0.5);
  // w_down = [2; -1], b_down = [0, 1]: y = [2a, 1 - a]. gelu(-0.5) = -0.15426876936299347.
  const auto x = test::tensor_of<double>({1, 2}, {1, -2});
  const auto f = mlp(x, test::tensor_of<double>({1, 2}, {1, 1}),
                     test::tensor_of<double>({1}, {0.5}), test::tensor_of<double>({2, 1}, {2, -1}),
                     test::tensor_of<double>({2}, {0, 1}), Activation::gelu);
  const double a = -0.15426876936299347;
  EXPECT_EQ(f.h[0], -0.5);
  EXPECT_NEAR(f.y[0], 2 * a, 1e-15);
  EXPECT_NEAR(f.y[1], 1 - a, 1e-15);
}

TEST(Mlp, split_fused_up_takes_each_ranks_gate_and_up_rows) {
  // [Wg; Wu] with F = 3 rows each, rows numbered 0..5; P = 2 chunk: rank 0 gets F-features {0, 1},
  // rank 1 {2}: rank 0 = rows [0, 1, 3, 4], rank 1 = rows [2, 5].
  const auto w = test::tensor_of<double>({6, 1}, {0, 1, 2, 3, 4, 5});
  const auto r0 = split_fused_up(w, Activation::swiglu, SplitPolicy::chunk(), 2, 0);
  const auto r1 = split_fused_up(w, Activation::swiglu, SplitPolicy::chunk(), 2, 1);
  EXPECT_EQ(r0.values(), (std::vector<double>{0, 1, 3, 4}));
  EXPECT_EQ(r1.values(), (std::vector<double>{2, 5}));
}

template <class T>
class MlpParallel : public ::testing::Test {};
TYPED_TEST_SUITE(MlpParallel, test::AllTypes);

TYPED_TEST(MlpParallel, pieces_equal_the_dense_op_bit_for_bit) {
  using T = TypeParam;
  const std::size_t tokens = 5, hidden = 4, ffn = 7;
  std::uint64_t seed = 1;
  for (Activation act : {Activation::gelu, Activation::gelu_tanh, Activation::swiglu}) {
    const std::size_t k = up_rows_per_feature(act);
    for (bool bias : {true, false}) {
      const auto x = random_tensor<T>({tokens, hidden}, ++seed);
      const auto w_up = random_tensor<T>({k * ffn, hidden}, ++seed);
      const auto b_up = bias ? random_tensor<T>({k * ffn}, ++seed) : Tensor<T>();
      const auto w_down = random_tensor<T>({hidden, ffn}, ++seed);
      const auto b_down = bias ? random_tensor<T>({hidden}, ++seed) : Tensor<T>();
      const auto dy = random_tensor<T>({tokens, hidden}, ++seed);
      const auto dense = mlp(x, w_up, b_up, w_down, b_down, act);
      const auto dg = mlp_backward(x, w_up, w_down, dense, bias, dy, act);
      for (int p = 1; p <= 4; ++p) {
        for (const auto& policy : policies_for(ffn, p)) {
          for (bool sp : {false, true}) {
            SCOPED_TRACE(std::string(name(act)) + " P=" + std::to_string(p) + " " +
                         policy.to_string() + (sp ? " sp" : "") + (bias ? " bias" : ""));
            MlpConfig cfg;
            cfg.activation = act;
            cfg.ffn_features = ffn;
            cfg.ffn_split = policy;
            cfg.tokens = tokens;
            cfg.sequence_parallel = sp;
            struct Out {
              MlpForward<T> f;
              MlpGrads<T> g;
            };
            const auto tok = split(cfg.token_split, tokens, p);
            const auto outs = on_ranks<Out>(p, [&](Communicator& tp) {
              const int r = tp.rank();
              const auto x_r = sp ? rows_of(x, tok[static_cast<std::size_t>(r)]) : x;
              const auto dy_r = sp ? rows_of(dy, tok[static_cast<std::size_t>(r)]) : dy;
              const auto wu = split_fused_up(w_up, act, policy, p, r);
              const auto bu = bias ? split_fused_up(b_up, act, policy, p, r) : Tensor<T>();
              const auto wd = split_weight_by_input_features(w_down, policy, p, r);
              Out o;
              o.f = parallel_mlp(tp, cfg, x_r, wu, bu, wd, b_down);
              o.g = parallel_mlp_backward(tp, cfg, x_r, wu, wd, o.f, bias, dy_r);
              return o;
            });
            const auto ps = split(policy, ffn, p);
            for (int r = 0; r < p; ++r) {
              const auto& o = outs[static_cast<std::size_t>(r)];
              const Piece pc = ps[static_cast<std::size_t>(r)];
              // h's columns of r: the rows of hᵀ that split_fused_up takes, transposed back.
              EXPECT_EQ(o.f.h.values(),
                        transpose(split_fused_up(transpose(dense.h), act, policy, p, r)).values())
                  << "rank " << r;
              EXPECT_EQ(o.g.dw_up.values(), split_fused_up(dg.dw_up, act, policy, p, r).values());
              if (bias) {
                EXPECT_EQ(o.g.db_up.values(), split_fused_up(dg.db_up, act, policy, p, r).values());
                EXPECT_EQ(o.g.db_down.values(), dg.db_down.values());
              }
              EXPECT_EQ(o.g.dw_down.values(), cols_of(dg.dw_down, pc).values());
              if (p == 1) {
                EXPECT_EQ(o.f.y.values(), dense.y.values());
                EXPECT_EQ(o.g.dx.values(), dg.dx.values());
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardcheck
