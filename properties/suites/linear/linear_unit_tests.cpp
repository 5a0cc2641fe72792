// Unit tests of ops/linear/linear.hpp: hand-checked values, the documented summation orders written
// out plainly, the splits, and the exact (bit-for-bit) relations between the dense op and the
// column- and row-parallel layers, for every element type and P = 1..5 under chunk, balanced
// and explicit splits with empty shards. The property suites against the high-precision
// reference (with derived bounds) live in properties/suites/linear/; these pin the implementation.
//
// Data comes from ops_test_util.hpp's splitmix64 with fixed seeds (printed on failure through
// SCOPED_TRACE), so every run draws the same values.
#include "ops/linear/linear.hpp"
#include "ops/tp_transitions.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace shardcheck::linear_unit_tests {
namespace {

using namespace test;  // the suites' test helpers (testing/ops_test_util.hpp)

template <class T>
using A = acc_t<T>;

// ---------------------------------------------------------------- models (plain loops)

// The bias joins in T after the product is rounded: T(T(dot) + b).
template <class T>
T add_model(T y, T b) {
  return static_cast<T>(static_cast<A<T>>(y) + static_cast<A<T>>(b));
}

// Kernel::deterministic: acc = 0, then + x_tk·w_jk for k = 0, 1, ..., in acc_t; one rounding.
template <class T>
Tensor<T> linear_model(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b) {
  Tensor<T> y(Shape{x.dim(0), w.dim(0)});
  for (std::size_t t = 0; t < x.dim(0); ++t) {
    for (std::size_t j = 0; j < w.dim(0); ++j) {
      A<T> acc = 0;
      for (std::size_t k = 0; k < x.dim(1); ++k) {
        acc += static_cast<A<T>>(x(t, k)) * static_cast<A<T>>(w(j, k));
      }
      y(t, j) = static_cast<T>(acc);
      if (!b.empty()) y(t, j) = add_model(y(t, j), b[j]);
    }
  }
  return y;
}

// Kernel::fast: eight lanes over k < 8·floor(K/8), a fixed tree over the lanes, then the tail.
template <class T>
Tensor<T> linear_fast_model(const Tensor<T>& x, const Tensor<T>& w) {
  const std::size_t kk = x.dim(1), k8 = kk - kk % 8;
  Tensor<T> y(Shape{x.dim(0), w.dim(0)});
  for (std::size_t t = 0; t < x.dim(0); ++t) {
    for (std::size_t j = 0; j < w.dim(0); ++j) {
      A<T> l[8] = {};
      for (std::size_t k = 0; k < k8; ++k) {
        l[k % 8] += static_cast<A<T>>(x(t, k)) * static_cast<A<T>>(w(j, k));
      }
      A<T> s = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
      for (std::size_t k = k8; k < kk; ++k) {
        s += static_cast<A<T>>(x(t, k)) * static_cast<A<T>>(w(j, k));
      }
      y(t, j) = static_cast<T>(s);
    }
  }
  return y;
}

// dx_ti = Σ_j dy_tj w_ji (j ascending), dw_ji = Σ_t dy_tj x_ti, db_j = Σ_t dy_tj (t ascending).
template <class T>
LinearGrads<T> backward_model(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& dy) {
  const std::size_t tokens = x.dim(0), in = x.dim(1), out = w.dim(0);
  LinearGrads<T> g{Tensor<T>(Shape{tokens, in}), Tensor<T>(Shape{out, in}), Tensor<T>(Shape{out})};
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t i = 0; i < in; ++i) {
      A<T> acc = 0;
      for (std::size_t j = 0; j < out; ++j) {
        acc += static_cast<A<T>>(dy(t, j)) * static_cast<A<T>>(w(j, i));
      }
      g.dx(t, i) = static_cast<T>(acc);
    }
  }
  for (std::size_t j = 0; j < out; ++j) {
    A<T> sum = 0;
    for (std::size_t t = 0; t < tokens; ++t) sum += static_cast<A<T>>(dy(t, j));
    g.db[j] = static_cast<T>(sum);
    for (std::size_t i = 0; i < in; ++i) {
      A<T> acc = 0;
      for (std::size_t t = 0; t < tokens; ++t) {
        acc += static_cast<A<T>>(dy(t, j)) * static_cast<A<T>>(x(t, i));
      }
      g.dw(j, i) = static_cast<T>(acc);
    }
  }
  return g;
}

struct Dims {
  std::size_t tokens, in, out;
};
// Shapes with empty axes, K = 0, and K on both sides of the kernels' block sizes (4 outputs,
// 8 lanes).
const Dims kernel_dims[] = {{0, 3, 2}, {3, 0, 2}, {1, 1, 1},  {2, 3, 5},  {5, 7, 3},
                            {4, 8, 4}, {3, 9, 6}, {2, 17, 9}, {3, 64, 5}, {2, 5, 0}};

// The operands of a kernel test at one of kernel_dims: x [tokens, in], w [out, in], b [out] (empty
// without bias), dy [tokens, out].
template <class T>
struct KernelOperands {
  Tensor<T> x, w, b, dy;
};

// fn(d, operands) for every shape of kernel_dims, the operands drawn from consecutive seeds from
// `seed` on (x, w, then b with bias, then dy), under a trace naming the shape and its first seed.
template <class T, class Fn>
void for_each_kernel_shape(std::uint64_t seed, bool with_bias, Fn&& fn) {
  for (const Dims& d : kernel_dims) {
    SCOPED_TRACE("tokens " + std::to_string(d.tokens) + " in " + std::to_string(d.in) + " out " +
                 std::to_string(d.out) + " seed " + std::to_string(seed));
    KernelOperands<T> o;
    o.x = random_tensor<T>({d.tokens, d.in}, seed++);
    o.w = random_tensor<T>({d.out, d.in}, seed++);
    if (with_bias) o.b = random_tensor<T>({d.out}, seed++);
    o.dy = random_tensor<T>({d.tokens, d.out}, seed++);
    fn(d, o);
  }
}

template <class T>
class LinearTest : public ::testing::Test {};
TYPED_TEST_SUITE(LinearTest, test::AllTypes);

// ---------------------------------------------------------------- dense, hand-checked

TYPED_TEST(LinearTest, forward_matches_hand_computed_values) {
  using T = TypeParam;
  const auto x = tensor_of<T>({2, 3}, {1, 2, 3, 4, 5, 6});
  const auto w = tensor_of<T>({2, 3}, {1, 0, -1, 2, 1, 0});
  const auto b = tensor_of<T>({2}, {0.5, -1});
  EXPECT_TRUE(bit_equal(linear(x, w, b), tensor_of<T>({2, 2}, {-1.5, 3, -1.5, 12})));
  EXPECT_TRUE(bit_equal(linear(x, w, Tensor<T>()), tensor_of<T>({2, 2}, {-2, 4, -2, 13})));
  EXPECT_TRUE(bit_equal(linear(x, w, b, Kernel::fast), tensor_of<T>({2, 2}, {-1.5, 3, -1.5, 12})));
}

TYPED_TEST(LinearTest, backward_matches_hand_computed_values) {
  using T = TypeParam;
  const auto x = tensor_of<T>({2, 3}, {1, 2, 3, 4, 5, 6});
  const auto w = tensor_of<T>({2, 3}, {1, 0, -1, 2, 1, 0});
  const auto dy = tensor_of<T>({2, 2}, {1, -1, 2, 0.5});
  for (const Kernel kernel : {Kernel::deterministic, Kernel::fast}) {
    const auto g = linear_backward(x, w, true, dy, kernel);
    EXPECT_TRUE(bit_equal(g.dx, tensor_of<T>({2, 3}, {-1, -1, -1, 3, 0.5, -2})));
    EXPECT_TRUE(bit_equal(g.dw, tensor_of<T>({2, 3}, {9, 12, 15, 1, 0.5, 0})));
    EXPECT_TRUE(bit_equal(g.db, tensor_of<T>({2}, {3, -0.5})));
    EXPECT_TRUE(linear_backward(x, w, false, dy, kernel).db.empty());
  }
}

// ---------------------------------------------------------------- dense, the documented orders

TYPED_TEST(LinearTest, deterministic_kernel_sums_each_element_in_index_order) {
  using T = TypeParam;
  for_each_kernel_shape<T>(11, /*with_bias=*/true, [](const Dims&, const KernelOperands<T>& o) {
    EXPECT_TRUE(bit_equal(linear(o.x, o.w, o.b), linear_model(o.x, o.w, o.b)));
    EXPECT_TRUE(bit_equal(linear(o.x, o.w, Tensor<T>()), linear_model(o.x, o.w, Tensor<T>())));
    const auto g = linear_backward(o.x, o.w, true, o.dy);
    const auto m = backward_model(o.x, o.w, o.dy);
    EXPECT_TRUE(bit_equal(g.dx, m.dx));
    EXPECT_TRUE(bit_equal(g.dw, m.dw));
    EXPECT_TRUE(bit_equal(g.db, m.db));
  });
}

TYPED_TEST(LinearTest, fast_kernel_follows_its_documented_order) {
  using T = TypeParam;
  for_each_kernel_shape<T>(101, /*with_bias=*/false, [](const Dims& d, const KernelOperands<T>& o) {
    EXPECT_TRUE(
        bit_equal(linear(o.x, o.w, Tensor<T>(), Kernel::fast), linear_fast_model(o.x, o.w)));
    // Backward: dx = dy·w and dw = dyᵀ·x are the same kernel on transposed operands.
    Tensor<T> wt(Shape{d.in, d.out}), dyt(Shape{d.out, d.tokens}), xt(Shape{d.in, d.tokens});
    for (std::size_t j = 0; j < d.out; ++j) {
      for (std::size_t i = 0; i < d.in; ++i) wt(i, j) = o.w(j, i);
      for (std::size_t t = 0; t < d.tokens; ++t) dyt(j, t) = o.dy(t, j);
    }
    for (std::size_t t = 0; t < d.tokens; ++t) {
      for (std::size_t i = 0; i < d.in; ++i) xt(i, t) = o.x(t, i);
    }
    const auto g = linear_backward(o.x, o.w, true, o.dy, Kernel::fast);
    EXPECT_TRUE(bit_equal(g.dx, linear_fast_model(o.dy, wt)));
    EXPECT_TRUE(bit_equal(g.dw, linear_fast_model(dyt, xt)));
    EXPECT_TRUE(bit_equal(g.db, backward_model(o.x, o.w, o.dy).db));  // db: token order either way
  });
}

// The fast order is another order: on K = 64 float/double data it changes some bits (so the
// kernel switch is not a no-op that would leave Kernel::fast untested).
TYPED_TEST(LinearTest, fast_kernel_differs_from_deterministic_on_long_sums) {
  using T = TypeParam;
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    const auto x = random_tensor<T>({8, 64}, 7);
    const auto w = random_tensor<T>({8, 64}, 8);
    EXPECT_FALSE(bit_equal(linear(x, w, Tensor<T>()), linear(x, w, Tensor<T>(), Kernel::fast)));
  }
}

// float32 accumulates in float32 (acc_t<float>), in order: 1 + 2^-24 ties to 1, twice.
TEST(LinearArithmetic, float32_accumulates_in_float32_in_index_order) {
  const auto x = tensor_of<float>({1, 3}, {1, std::ldexp(1.0, -24), std::ldexp(1.0, -24)});
  const auto w = tensor_of<float>({1, 3}, {1, 1, 1});
  EXPECT_EQ(linear(x, w, Tensor<float>())[0], 1.0F);
  const auto reversed = tensor_of<float>({1, 3}, {std::ldexp(1.0, -24), std::ldexp(1.0, -24), 1});
  EXPECT_EQ(linear(reversed, w, Tensor<float>())[0], static_cast<float>(1 + std::ldexp(1.0, -23)));
}

// 16-bit storage, float32 accumulation: 1 + u + u is exact in float and rounds once to
// 1 + 2u; accumulating in the 16-bit type would tie 1 + u to 1 twice.
TEST(LinearArithmetic, sixteen_bit_products_accumulate_in_float32) {
  const double ub = std::ldexp(1.0, -8), uh = std::ldexp(1.0, -11);
  const auto xb = tensor_of<bfloat16>({1, 3}, {1, ub, ub});
  const auto xh = tensor_of<float16>({1, 3}, {1, uh, uh});
  EXPECT_EQ(static_cast<double>(
                linear(xb, tensor_of<bfloat16>({1, 3}, {1, 1, 1}), Tensor<bfloat16>())[0]),
            1 + 2 * ub);
  EXPECT_EQ(
      static_cast<double>(linear(xh, tensor_of<float16>({1, 3}, {1, 1, 1}), Tensor<float16>())[0]),
      1 + 2 * uh);
}

// T(T(dot) + b): dot = 1 + u rounds to 1 (tie to even), then 1 + u rounds to 1 again. Adding
// the bias before rounding would give 1 + 2u.
TEST(LinearArithmetic, bias_is_added_after_the_product_is_rounded) {
  const double ub = std::ldexp(1.0, -8);
  const auto x = tensor_of<bfloat16>({1, 2}, {1, ub});
  const auto w = tensor_of<bfloat16>({1, 2}, {1, 1});
  const auto b = tensor_of<bfloat16>({1}, {ub});
  EXPECT_EQ(static_cast<double>(linear(x, w, b)[0]), 1.0);
}

// ---------------------------------------------------------------- splits

TEST(LinearSplits, pieces_follow_the_policy) {
  const auto w = tensor_of<double>({5, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14});
  // chunk 5 over 4: 2, 2, 1, 0 rows.
  EXPECT_TRUE(bit_equal(split_weight_by_output_features(w, SplitPolicy::chunk(), 4, 2),
                        tensor_of<double>({1, 3}, {12, 13, 14})));
  EXPECT_EQ(split_weight_by_output_features(w, SplitPolicy::chunk(), 4, 3).shape(), (Shape{0, 3}));
  // balanced 3 over 2: 2, 1 columns.
  EXPECT_TRUE(bit_equal(split_weight_by_input_features(w, SplitPolicy::balanced(), 2, 1),
                        tensor_of<double>({5, 1}, {2, 5, 8, 11, 14})));
  EXPECT_TRUE(bit_equal(split_input_by_features(w, SplitPolicy::explicit_sizes({0, 2, 1}), 3, 1),
                        tensor_of<double>({5, 2}, {0, 1, 3, 4, 6, 7, 9, 10, 12, 13})));
  const auto b = tensor_of<double>({5}, {0, 1, 2, 3, 4});
  EXPECT_TRUE(bit_equal(split_bias(b, SplitPolicy::explicit_sizes({0, 3, 2}), 3, 2),
                        tensor_of<double>({2}, {3, 4})));
  EXPECT_EQ(split_bias(b, SplitPolicy::explicit_sizes({0, 3, 2}), 3, 0).shape(), (Shape{0}));
  EXPECT_TRUE(split_bias(Tensor<double>(), SplitPolicy::chunk(), 3, 1).empty());
  // Tokens keep the trailing axes.
  const auto h = tensor_of<double>({3, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  EXPECT_TRUE(bit_equal(split_by_tokens(h, SplitPolicy::balanced(), 2, 1),
                        tensor_of<double>({1, 2, 2}, {8, 9, 10, 11})));
}

TEST(LinearSplits, pieces_reassemble_the_whole) {
  const auto w = random_tensor<double>({7, 6}, 3);
  for (int p = 1; p <= 5; ++p) {
    for (const auto& policy : policies_for(7, p)) {
      SCOPED_TRACE("P " + std::to_string(p) + " " + policy.to_string());
      std::vector<double> rows;
      for (int r = 0; r < p; ++r) {
        const auto piece = split_weight_by_output_features(w, policy, p, r);
        rows.insert(rows.end(), piece.values().begin(), piece.values().end());
      }
      EXPECT_EQ(rows, w.values());
      const auto wt = random_tensor<double>({6, 7}, 4);
      Tensor<double> cols(Shape{6, 7});
      std::size_t off = 0;
      for (int r = 0; r < p; ++r) {
        const auto piece = split_weight_by_input_features(wt, policy, p, r);
        for (std::size_t i = 0; i < 6; ++i) {
          for (std::size_t j = 0; j < piece.dim(1); ++j) cols(i, off + j) = piece(i, j);
        }
        off += piece.dim(1);
      }
      EXPECT_TRUE(bit_equal(cols, wt));
    }
  }
}

// ---------------------------------------------------------------- the last-axis gather

TYPED_TEST(LinearTest, all_gather_last_axis_puts_each_rank_in_its_columns) {
  using T = TypeParam;
  const std::size_t rows = 3, cols = 7;
  Tensor<T> full(Shape{rows, cols});
  for (std::size_t i = 0; i < full.size(); ++i) full[i] = static_cast<T>(static_cast<float>(i));
  for (int p = 1; p <= 5; ++p) {
    for (const auto& policy : policies_for(cols, p)) {
      SCOPED_TRACE("P " + std::to_string(p) + " " + policy.to_string());
      const auto pieces = split(policy, cols, p);
      const auto counts = split_sizes(policy, cols, p);
      const auto got = on_ranks<Tensor<T>>(p, [&](Communicator& tp) {
        const auto mine = test::cols_of(full, pieces[static_cast<std::size_t>(tp.rank())]);
        return all_gather_last_axis(tp, mine, std::span<const std::size_t>(counts));
      });
      for (const auto& g : got) EXPECT_TRUE(bit_equal(g, full));
    }
  }
}

}  // namespace
}  // namespace shardcheck::linear_unit_tests
