// The reference linear layer's index arithmetic against an independent oracle: with small
// integer inputs every sum is exact in any arithmetic, so forward (y), backward (dx, dW, db),
// each part's partial sum and Σ|a||b| must equal an int64 computation exactly, for any partition
// of the contracted axis. A transposed index (dW = x·dyᵀ, dx using Wᵀ) fails here at once.
// Plus: its user-facing errors name the shapes.
#include "testing/reference_gen.hpp"

#include "reference/bounds.hpp"
#include "reference/linear/linear.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <vector>

namespace shardcheck::props::ref::linear_props {
namespace {

using reference::hp;
using reference::to_hp;
using I = std::int64_t;

Tensor<double> small_ints(Shape shape) {
  const auto v = *rc::gen::container<std::vector<int>>(numel(shape), uniform(-9, 9));
  return Tensor<double>(std::move(shape), std::vector<double>(v.begin(), v.end()));
}

rc::Gen<std::vector<std::size_t>> genPartition(std::size_t k) {
  return rc::gen::exec([k] {
    const int p = *uniform(1, 5);
    return draw_parts(k, p);
  });
}

// Which part of a partition index i falls in.
std::size_t part_of(const std::vector<std::size_t>& parts, std::size_t i) {
  std::size_t r = 0, end = parts[0];
  while (i >= end) end += parts[++r];
  return r;
}

I to_int(const hp& v) { return static_cast<I>(v); }

RC_GTEST_PROP(linear_reference, forward_and_backward_equal_exact_integer_arithmetic, ()) {
  const std::size_t tokens = *uniform<std::size_t>(1, 6), in = *uniform<std::size_t>(1, 6),
                    out = *uniform<std::size_t>(1, 6);
  const bool has_bias = *uniform(0, 1) == 1;
  const auto x = small_ints({tokens, in}), w = small_ints({out, in}),
             dy = small_ints({tokens, out});
  const auto b = has_bias ? small_ints({out}) : Tensor<double>();
  const auto in_parts = *genPartition(in), out_parts = *genPartition(out);
  const auto y = reference::linear(x, w, b, in_parts);
  const auto g = reference::linear_backward(x, w, has_bias, dy, out_parts);
  auto X = [&](std::size_t t, std::size_t i) { return static_cast<I>(x(t, i)); };
  auto W = [&](std::size_t o, std::size_t i) { return static_cast<I>(w(o, i)); };
  auto DY = [&](std::size_t t, std::size_t o) { return static_cast<I>(dy(t, o)); };

  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t o = 0; o < out; ++o) {
      std::vector<I> part(in_parts.size(), 0), abs_part(in_parts.size(), 0);
      I sum = has_bias ? static_cast<I>(b[o]) : 0;
      for (std::size_t i = 0; i < in; ++i) {
        part[part_of(in_parts, i)] += X(t, i) * W(o, i);
        abs_part[part_of(in_parts, i)] += std::abs(X(t, i) * W(o, i));
        sum += X(t, i) * W(o, i);
      }
      RC_ASSERT(to_int(y.value(t, o)) == sum);
      for (std::size_t r = 0; r < in_parts.size(); ++r) {
        const auto& pt = y.terms[r * tokens * out + t * out + o];
        RC_ASSERT(to_int(pt.partial) == part[r]);
        RC_ASSERT(to_int(pt.abs_sum) == abs_part[r]);
        RC_ASSERT(pt.length == in_parts[r]);
      }
    }
  }
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t i = 0; i < in; ++i) {
      std::vector<I> part(out_parts.size(), 0);
      I sum = 0;
      for (std::size_t o = 0; o < out; ++o) {
        part[part_of(out_parts, o)] += DY(t, o) * W(o, i);
        sum += DY(t, o) * W(o, i);
      }
      RC_ASSERT(to_int(g.dx.value(t, i)) == sum);
      for (std::size_t r = 0; r < out_parts.size(); ++r) {
        RC_ASSERT(to_int(g.dx.terms[r * tokens * in + t * in + i].partial) == part[r]);
      }
    }
  }
  for (std::size_t o = 0; o < out; ++o) {
    I db = 0;
    for (std::size_t i = 0; i < in; ++i) {
      I dw = 0;
      for (std::size_t t = 0; t < tokens; ++t) dw += DY(t, o) * X(t, i);
      RC_ASSERT(to_int(g.dw.value(o, i)) == dw);
    }
    for (std::size_t t = 0; t < tokens; ++t) db += DY(t, o);
    if (has_bias) {
      RC_ASSERT(to_int(g.db.value[o]) == db);
      RC_ASSERT(g.db.operands == reference::Operands::unit);
    }
  }
  RC_ASSERT(g.db.value.empty() == !has_bias);
}

// ---------------------------------------------------------------- the fused bias (f)

// A fused-bias kernel emulated independently of lib/ops (reference/bounds.hpp, step (f)): y's
// dot over `in` cut into 1 to 5 parts (ranks, empty ones included); part j (drawn) takes the bias
// as one more term of its float32 accumulation, at a drawn position (first: an accumulator
// initialized with the bias; last: cuBLASLt's epilogue), the terms in a drawn order, added
// plainly or as fmas; each part rounded once to T, the parts summed in T in a drawn order.
// Every element must be within bounds(..., BiasPlacement::fused). x and w span 2^-12..2^2 and
// the bias is sometimes scaled by 2^10, so the bias dominates some sums and cancels in others.
// Tags count the cases with an element past half or 0.9 of its bound.
template <class T>
void fused_bias_case() {
  using A = float;
  const std::size_t tokens = *uniform<std::size_t>(1, 3), in = *uniform<std::size_t>(1, 64),
                    out = *uniform<std::size_t>(1, 3);
  auto gen = [](Shape shape, int lo, int hi) {
    return Tensor<T>(shape,
                     *rc::gen::container<std::vector<T>>(numel(shape), genLogUniform<T>(lo, hi)));
  };
  const auto x = gen({tokens, in}, -12, 2), w = gen({out, in}, -12, 2);
  auto b = gen({out}, -3, 2);
  if (*uniform(0, 1) == 1) {
    for (std::size_t o = 0; o < out; ++o) b[o] = static_cast<T>(static_cast<A>(b[o]) * 1024.0F);
  }
  const auto parts = draw_parts(in, *uniform(1, 5));
  const auto y = reference::linear<hp>(x, w, b, parts);
  const auto bnd =
      reference::bounds<hp>(y, reference::arithmetic_of<T>(), reference::BiasPlacement::fused);
  const bool use_fma = *uniform(0, 1) == 1;
  hp worst(0);  // the largest error/bound of the case's elements
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t o = 0; o < out; ++o) {
      const std::size_t j = *uniform<std::size_t>(0, parts.size() - 1);
      std::vector<T> partials;
      std::size_t i0 = 0;
      for (std::size_t r = 0; r < parts.size(); ++r) {
        // Term indices of the part, in+0 standing for the bias, in a drawn order.
        std::vector<std::size_t> order;
        for (std::size_t i = i0; i < i0 + parts[r]; ++i) order.push_back(i);
        if (r == j) order.push_back(in);
        for (std::size_t k = order.size(); k-- > 1;) {
          std::swap(order[k], order[*uniform<std::size_t>(0, k)]);
        }
        i0 += parts[r];
        if (order.empty()) continue;  // an empty part without the bias: an exact zero
        A acc = 0;
        for (const std::size_t i : order) {
          if (i == in) {
            acc = acc + static_cast<A>(b[o]);
          } else if (use_fma) {
            acc = std::fma(static_cast<A>(x(t, i)), static_cast<A>(w(o, i)), acc);
          } else {
            acc = acc + static_cast<A>(x(t, i)) * static_cast<A>(w(o, i));
          }
        }
        partials.push_back(static_cast<T>(acc));
      }
      for (std::size_t k = partials.size(); k-- > 1;) {
        std::swap(partials[k], partials[*uniform<std::size_t>(0, k)]);
      }
      T sum = partials[0];
      for (std::size_t k = 1; k < partials.size(); ++k) sum = static_cast<T>(sum + partials[k]);
      using std::abs;
      const std::size_t e = t * out + o;
      const hp err = abs(to_hp(sum) - y.value[e]);
      RC_ASSERT(err <= bnd.bound[e]);
      worst = std::max(worst, hp(err / bnd.bound[e]));
    }
  }
  if (worst > hp(0.5)) RC_TAG(worst > hp(0.9) ? "past 0.9 of the bound" : "past half the bound");
}

RC_GTEST_PROP(linear_bounds, hold_for_a_fused_bias_emulation_float32, ()) {
  fused_bias_case<float>();
}
RC_GTEST_PROP(linear_bounds, hold_for_a_fused_bias_emulation_bfloat16, ()) {
  fused_bias_case<bfloat16>();
}

// The fused bias is not the after-sum contract: a float32 dot of 128 products 2^-30 into an
// accumulator that starts at the bias 1 loses every product (each is below half an ulp of 1),
// an error of 2^-23 = 2u, while the after-sum bound is about u·|y| (each product's sum is exact
// before the bias, the bias added once); the fused bound, with gamma_129·|b|, holds it.
TEST(linear_bounds, a_fused_bias_is_outside_the_after_sum_bound) {
  constexpr std::size_t in = 128;
  const Tensor<float> x({1, in}, std::vector<float>(in, 0x1p-15F)),
      w({1, in}, std::vector<float>(in, 0x1p-15F)), b({1}, {1.0F});
  float acc = b[0];
  for (std::size_t i = 0; i < in; ++i) acc += x[i] * w[i];
  ASSERT_EQ(acc, 1.0F);  // every product lost
  const auto y = reference::linear<hp>(x, w, b);
  const auto a = reference::arithmetic_of<float>();
  const auto after = reference::bounds<hp>(y, a, reference::BiasPlacement::after_sum);
  const auto fused = reference::bounds<hp>(y, a, reference::BiasPlacement::fused);
  const auto either = reference::bounds<hp>(y, a, reference::BiasPlacement::either);
  using std::abs;
  const hp err = abs(to_hp(acc) - y.value[0]);
  EXPECT_GT(err, after.bound[0]);
  EXPECT_LE(err, fused.bound[0]);
  EXPECT_EQ(either.bound[0], fused.bound[0]);
  std::cout << "fused bias, float32 in = 128: error / after-sum bound "
            << static_cast<double>(err / after.bound[0]) << ", error / fused bound "
            << static_cast<double>(err / fused.bound[0]) << "\n";
}

// Row-parallel with the bias in an empty rank's part: that rank's partial is the bias alone, one
// more part in the cross-rank sum (gamma_q instead of gamma_{q−1}).
TEST(linear_bounds, a_fused_bias_in_an_empty_part_counts_one_more_part) {
  const Tensor<float> x({1, 2}, {1.0F, 0x1p-24F}), w({1, 2}, {1.0F, 1.0F}), b({1}, {0x1p-24F});
  const std::size_t parts[] = {1, 1, 0};
  const auto y = reference::linear<hp>(x, w, b, parts);
  const auto a = reference::arithmetic_of<float>();
  // Parts 1, 2^-24 and the bias 2^-24 summed left to right in float32: (1 + 2^-24) ties to 1,
  // twice, an error of 2^-23; within the fused bound, whose reduction term has gamma_2.
  const float sum = (1.0F + 0x1p-24F) + 0x1p-24F;
  ASSERT_EQ(sum, 1.0F);
  const auto fused = reference::bounds<hp>(y, a, reference::BiasPlacement::fused);
  using std::abs;
  EXPECT_LE(abs(to_hp(sum) - y.value[0]), fused.bound[0]);
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(linear_reference, errors_name_the_shapes_and_the_fix) {
  const Tensor<float> x({2, 3}), w({4, 5}), b({4}), dy({2, 4});
  EXPECT_EQ(error_of([&] { (void)reference::linear(x, w, b); }),
            "reference::linear: x [2, 3], w [4, 5], b [4]: x's in (last axis) must equal w's in "
            "(axis 1)");
  const Tensor<float> w3({4, 3});
  EXPECT_EQ(error_of([&] {
              (void)reference::linear_backward(x, w3, true, Tensor<float>({2, 5}));
            }),
            "reference::linear: x [2, 3], w [4, 3], dy [2, 5]: dy must be [tokens, out]");
  const std::size_t parts[] = {1, 1};
  EXPECT_EQ(
      error_of([&] { (void)reference::linear(x, w3, b, parts); }),
      "reference: the parts of in (linear forward, row-parallel split) sum to 2 but the contracted "
      "axis has length 3; pass the shard sizes of that axis (one per rank, zeros allowed)");
  (void)dy;
}

}  // namespace
}  // namespace shardcheck::props::ref::linear_props
