// The reference linear layer's index arithmetic against an independent oracle: with small
// integer inputs every sum is exact in any arithmetic, so forward (y), backward (dx, dW, db),
// each part's partial sum and Σ|a||b| must equal an int64 computation exactly, for any partition
// of the contracted axis. A transposed index (dW = x·dyᵀ, dx using Wᵀ) fails here at once.
// Plus: its user-facing errors name the shapes.
#include "testing/reference_gen.hpp"

#include "reference/linear/linear.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <cstdlib>

namespace shardcheck::props::ref::linear_props {
namespace {

using reference::hp;
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
