// Unit tests of lib/ops/softmax_merge/softmax_merge.hpp: hand-checked values, every special-value
// convention (empty partials whatever their out holds, all-empty rows, zero partials, +inf and NaN
// lse, NaN in an out), huge gaps without overflow, the two-way form against the n-way, the
// attention layout against the row layout, and every usage error. The property suite against the
// high-precision reference is properties/suites/softmax_merge/.
#include "ops/softmax_merge/softmax_merge.hpp"

#include "testing/ops_test_util.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace shardcheck::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

template <class A>
constexpr A inf = std::numeric_limits<A>::infinity();

template <class A>
SoftmaxPartial<A> partial(std::size_t rows, std::size_t width, const std::vector<double>& out,
                          const std::vector<double>& lse) {
  return {tensor_of<A>({rows, width}, out), tensor_of<A>({rows}, lse)};
}

template <class A>
bool same_bits(const Tensor<A>& a, const Tensor<A>& b) {
  return a.shape() == b.shape() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size() * sizeof(A)) == 0);
}

// A tolerance for float64 or float32.
template <class A>
constexpr double pick(double for_double, double for_float) {
  return std::is_same_v<A, double> ? for_double : for_float;
}

template <class A>
SoftmaxPartial<A> merge2(const SoftmaxPartial<A>& a, const SoftmaxPartial<A>& b) {
  const std::vector<SoftmaxPartial<A>> parts{a, b};
  return softmax_merge<A>(parts);
}

template <class A>
class SoftmaxMerge : public ::testing::Test {};
using Accumulators = ::testing::Types<double, float>;
TYPED_TEST_SUITE(SoftmaxMerge, Accumulators);

TYPED_TEST(SoftmaxMerge, two_partials_by_hand) {
  using A = TypeParam;
  // Part a: mass e^0 = 1, out [1, 2]; part b: mass 3, out [5, −1]. Together: mass 4,
  // out = (1·[1, 2] + 3·[5, −1])/4 = [4, −0.25], lse = log 4.
  const auto a = partial<A>(1, 2, {1, 2}, {0});
  const auto b = partial<A>(1, 2, {5, -1}, {std::log(3.0)});
  const auto m = merge2(a, b);
  const double tol = std::is_same_v<A, double> ? 1e-15 : 1e-6;
  EXPECT_NEAR(m.lse[0], std::log(4.0), tol);
  EXPECT_NEAR(m.out(0, 0), 4.0, 4 * tol);
  EXPECT_NEAR(m.out(0, 1), -0.25, 4 * tol);
}

TYPED_TEST(SoftmaxMerge, partials_of_a_split_equal_the_full_softmax) {
  using A = TypeParam;
  // Scores s = [0.5, -1, 2, 0.25, 3], values v_k = [k, 1 - k]; parts {0, 1}, {2}, {3, 4}.
  const std::vector<double> s{0.5, -1, 2, 0.25, 3};
  auto softmax = [&](const std::vector<std::size_t>& keys, double* out, double& lse) {
    double l = 0;
    for (auto k : keys) l += std::exp(s[k]);
    lse = std::log(l);
    out[0] = out[1] = 0;
    for (auto k : keys) {
      out[0] += std::exp(s[k] - lse) * static_cast<double>(k);
      out[1] += std::exp(s[k] - lse) * (1.0 - static_cast<double>(k));
    }
  };
  std::vector<SoftmaxPartial<A>> parts;
  for (const auto& keys : std::vector<std::vector<std::size_t>>{{0, 1}, {2}, {3, 4}}) {
    double o[2], l = 0;
    softmax(keys, o, l);
    parts.push_back(partial<A>(1, 2, {o[0], o[1]}, {l}));
  }
  double full[2], lse = 0;
  softmax({0, 1, 2, 3, 4}, full, lse);
  const auto m = softmax_merge<A>(parts);
  const double tol = std::is_same_v<A, double> ? 1e-14 : 1e-5;
  EXPECT_NEAR(m.lse[0], lse, tol);
  EXPECT_NEAR(m.out(0, 0), full[0], tol);
  EXPECT_NEAR(m.out(0, 1), full[1], tol);
}

TYPED_TEST(SoftmaxMerge, an_empty_partial_contributes_nothing_whatever_its_out_holds) {
  using A = TypeParam;
  const auto a = partial<A>(1, 3, {1, -2, 0.5}, {1.25});
  for (const double junk : {0.0, std::nan(""), inf<double>, -inf<double>, 1e30}) {
    const auto empty = partial<A>(1, 3, {junk, junk, junk}, {-inf<double>});
    for (const auto& m : {merge2(a, empty), merge2(empty, a)}) {
      // One non-empty part: w = exp(0) = 1, l = 1, c = 1: its values come back exactly.
      EXPECT_TRUE(same_bits(m.out, a.out)) << "junk " << junk;
      EXPECT_TRUE(same_bits(m.lse, a.lse)) << "junk " << junk;
    }
  }
}

TYPED_TEST(SoftmaxMerge, all_empty_rows_and_zero_partials_give_out_zero_lse_minus_inf) {
  using A = TypeParam;
  const auto e1 = partial<A>(2, 2, {std::nan(""), 1, 2, 3}, {-inf<double>, -inf<double>});
  const auto e2 = partial<A>(2, 2, {inf<double>, 0, 0, std::nan("")}, {-inf<double>, -inf<double>});
  const auto id = empty_softmax_partial<A>(2, 2);
  const std::vector<SoftmaxPartial<A>> none;
  for (const auto& m : {merge2(e1, e2), softmax_merge<A>(none, 2, 2), merge2(id, id)}) {
    ASSERT_EQ(m.out.shape(), (Shape{2, 2}));
    ASSERT_EQ(m.lse.shape(), (Shape{2}));
    for (const A v : m.out.values()) {
      EXPECT_EQ(v, A(0));
      EXPECT_FALSE(std::signbit(v));  // +0.0
    }
    for (const A v : m.lse.values()) EXPECT_EQ(v, -inf<A>);
  }
  EXPECT_TRUE(same_bits(softmax_merge<A>(none, 2, 2).out, id.out));
}

TYPED_TEST(SoftmaxMerge, plus_inf_lse_gives_nan_out_and_plus_inf_lse) {
  using A = TypeParam;
  const auto a = partial<A>(2, 2, {1, 2, 3, 4}, {0.5, 0.5});
  const auto b = partial<A>(2, 2, {1, 2, 3, 4}, {inf<double>, -1});
  const auto m = merge2(a, b);
  EXPECT_EQ(m.lse[0], inf<A>);
  EXPECT_TRUE(std::isnan(m.out(0, 0)) && std::isnan(m.out(0, 1)));
  // The other row is untouched by it.
  EXPECT_TRUE(std::isfinite(m.lse[1]));
  EXPECT_TRUE(std::isfinite(m.out(1, 0)) && std::isfinite(m.out(1, 1)));
}

TYPED_TEST(SoftmaxMerge, nan_lse_gives_nan_and_wins_over_plus_inf) {
  using A = TypeParam;
  const auto a = partial<A>(1, 1, {1}, {std::nan("")});
  const auto b = partial<A>(1, 1, {1}, {inf<double>});
  const auto c = partial<A>(1, 1, {1}, {-inf<double>});
  for (const auto& m : {merge2(a, b), merge2(b, a), merge2(a, c)}) {
    EXPECT_TRUE(std::isnan(m.lse[0]));
    EXPECT_TRUE(std::isnan(m.out[0]));
  }
}

TYPED_TEST(SoftmaxMerge, nan_in_a_non_empty_out_propagates_to_that_element_only) {
  using A = TypeParam;
  const auto a = partial<A>(1, 3, {1, std::nan(""), 3}, {0});
  const auto b = partial<A>(1, 3, {1, 2, 3}, {-50});  // weight e^-50: NaN still propagates
  const auto m = merge2(b, a);
  EXPECT_TRUE(std::isnan(m.out(0, 1)));
  EXPECT_FALSE(std::isnan(m.out(0, 0)));
  EXPECT_FALSE(std::isnan(m.out(0, 2)));
  EXPECT_FALSE(std::isnan(m.lse[0]));
}

TYPED_TEST(SoftmaxMerge, huge_gaps_never_overflow) {
  using A = TypeParam;
  const auto big = static_cast<double>(std::numeric_limits<A>::max());
  const auto small = partial<A>(1, 2, {7, 8}, {0});
  for (const double top : {1e30, 1e4, big}) {
    const auto large = partial<A>(1, 2, {-1, 0.5}, {top});
    const auto m = merge2(small, large);
    // exp(0 − top) underflows to 0: the result is the large partial's, exactly.
    EXPECT_EQ(m.lse[0], static_cast<A>(top)) << top;
    EXPECT_EQ(m.out(0, 0), A(-1));
    EXPECT_EQ(m.out(0, 1), A(0.5));
  }
  // −max against +max: the difference overflows to −inf, and exp(−inf) = 0.
  const auto lowest = partial<A>(1, 2, {3, 3}, {-big});
  const auto m = merge2(lowest, partial<A>(1, 2, {1, 2}, {big}));
  EXPECT_EQ(m.lse[0], static_cast<A>(big));
  EXPECT_EQ(m.out(0, 0), A(1));
  EXPECT_EQ(m.out(0, 1), A(2));
  // Two huge lse of similar size: the shift keeps exp in range (exp(1e4) overflows).
  const auto h = merge2(partial<A>(1, 1, {1}, {1e4}), partial<A>(1, 1, {3}, {1e4}));
  EXPECT_TRUE(std::isfinite(h.lse[0]));
  EXPECT_NEAR(static_cast<double>(h.lse[0]), 1e4 + std::log(2.0), pick<A>(1e-11, 2e-3));
  EXPECT_NEAR(static_cast<double>(h.out[0]), 2.0, pick<A>(1e-15, 1e-6));
  // Very negative rows do not underflow to 0/0 either.
  const auto n = merge2(partial<A>(1, 1, {1}, {-1e4}), partial<A>(1, 1, {3}, {-1e4}));
  EXPECT_NEAR(static_cast<double>(n.out[0]), 2.0, pick<A>(1e-15, 1e-6));
}

TYPED_TEST(SoftmaxMerge, merge_into_is_the_two_way_merge_bit_for_bit) {
  using A = TypeParam;
  const auto a = partial<A>(3, 2, {1, 2, 3, 4, 5, 6}, {0.25, -inf<double>, 3});
  const auto b = partial<A>(3, 2, {-1, 0.5, 9, 9, 2, 2}, {1.5, 2, -inf<double>});
  auto acc = a;
  merge_into(acc, b);
  const auto m = merge2(a, b);
  EXPECT_TRUE(same_bits(acc.out, m.out));
  EXPECT_TRUE(same_bits(acc.lse, m.lse));
  // With itself: out unchanged (c = 1/2 each), lse + log 2.
  auto self = b;
  merge_into(self, self);
  EXPECT_TRUE(same_bits(self.out, merge2(b, b).out));
  EXPECT_NEAR(static_cast<double>(self.lse[0]), 1.5 + std::log(2.0), 1e-6);
}

TYPED_TEST(SoftmaxMerge, a_ring_from_the_empty_accumulator_equals_the_nway_merge) {
  using A = TypeParam;
  std::vector<SoftmaxPartial<A>> parts{partial<A>(2, 1, {1, 0}, {0.5, -inf<double>}),
                                       partial<A>(2, 1, {std::nan(""), 4}, {-inf<double>, 1}),
                                       partial<A>(2, 1, {5, 6}, {2, 0})};
  auto acc = empty_softmax_partial<A>(2, 1);
  merge_into(acc, parts[0]);  // empty ⊕ p = p exactly
  EXPECT_TRUE(same_bits(acc.out, parts[0].out));
  EXPECT_TRUE(same_bits(acc.lse, parts[0].lse));
  merge_into(acc, parts[1]);
  merge_into(acc, parts[2]);
  const auto n = softmax_merge<A>(parts);
  const double tol = std::is_same_v<A, double> ? 1e-14 : 1e-5;
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(acc.lse[i], n.lse[i], tol);
    EXPECT_NEAR(acc.out[i], n.out[i], tol * 8);
  }
}

TYPED_TEST(SoftmaxMerge, attention_layout_matches_the_row_layout) {
  using A = TypeParam;
  // out [batch=2, L=3, h=2, d=2], lse [2, 2, 3]; rows (b, t, i) in out's order.
  const std::size_t B = 2, L = 3, H = 2, D = 2;
  std::vector<Tensor<A>> outs, lses;
  std::vector<SoftmaxPartial<A>> rows_parts, att_parts;
  for (std::uint64_t seed : {1, 2, 3}) {
    auto out = random_tensor<A>({B, L, H, D}, seed);
    auto lse = random_tensor<A>({B, H, L}, seed + 10);
    lse[seed] = -inf<A>;  // an empty row in each
    SoftmaxPartial<A> r{Tensor<A>(Shape{B * L * H, D}), Tensor<A>(Shape{B * L * H})};
    std::memcpy(r.out.data(), out.data(), out.size() * sizeof(A));
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = 0; t < L; ++t)
        for (std::size_t i = 0; i < H; ++i) r.lse[(b * L + t) * H + i] = lse[(b * H + i) * L + t];
    rows_parts.push_back(r);
    att_parts.push_back({out, lse});
  }
  const auto want = softmax_merge<A>(rows_parts);
  const auto got = softmax_merge_attention<A>(att_parts);
  Tensor<A> acc_out = att_parts[0].out, acc_lse = att_parts[0].lse;
  merge_attention_into(acc_out, acc_lse, att_parts[1].out, att_parts[1].lse);
  merge_attention_into(acc_out, acc_lse, att_parts[2].out, att_parts[2].lse);
  auto chain = rows_parts[0];
  merge_into(chain, rows_parts[1]);
  merge_into(chain, rows_parts[2]);
  EXPECT_EQ(std::memcmp(got.out.data(), want.out.data(), want.out.size() * sizeof(A)), 0);
  EXPECT_EQ(std::memcmp(acc_out.data(), chain.out.data(), chain.out.size() * sizeof(A)), 0);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < L; ++t)
      for (std::size_t i = 0; i < H; ++i) {
        const std::size_t a = (b * H + i) * L + t, r = (b * L + t) * H + i;
        EXPECT_EQ(got.lse[a], want.lse[r]);
        EXPECT_EQ(acc_lse[a], chain.lse[r]);
      }
}

TYPED_TEST(SoftmaxMerge, zero_sized_dimensions_are_allowed) {
  using A = TypeParam;
  const auto a = partial<A>(0, 3, {}, {});
  EXPECT_EQ(merge2(a, a).out.shape(), (Shape{0, 3}));
  const auto w0 = partial<A>(2, 0, {}, {1, -inf<double>});
  const auto m = merge2(w0, w0);
  EXPECT_NEAR(m.lse[0], 1 + std::log(2.0), 1e-6);
  EXPECT_EQ(m.lse[1], -inf<A>);
}

// ---- usage errors: every message names the shapes and what to do ----

TEST(SoftmaxMergeUsageErrors, zero_partials_without_a_shape) {
  const std::vector<SoftmaxPartial<double>> none;
  EXPECT_THAT(test::usage_error_of([&] { (void)softmax_merge<double>(none); }),
              AllOf(HasSubstr("softmax_merge: no partials"),
                    HasSubstr("call softmax_merge(parts, rows, width)")));
  EXPECT_THAT(
      test::usage_error_of([&] { (void)softmax_merge_attention<double>(none); }),
      AllOf(HasSubstr("softmax_merge_attention: no partials"), HasSubstr("pass at least one")));
}

TEST(SoftmaxMergeUsageErrors, partials_of_different_shapes) {
  const std::vector<SoftmaxPartial<double>> parts{
      partial<double>(2, 3, std::vector<double>(6), {0, 0}),
      partial<double>(2, 2, std::vector<double>(4), {0, 0})};
  EXPECT_THAT(test::usage_error_of([&] { (void)softmax_merge<double>(parts); }),
              AllOf(HasSubstr("partial 1 has out [2, 2] and lse [2]"),
                    HasSubstr("out [2, 3] and lse [2]"), HasSubstr("must have the same shape")));
  EXPECT_THAT(test::usage_error_of([&] { (void)softmax_merge<double>(parts, 2, 2); }),
              AllOf(HasSubstr("partial 0 has out [2, 3] and lse [2]"),
                    HasSubstr("the result (rows and width as given) has out [2, 2]")));
}

TEST(SoftmaxMergeUsageErrors, wrong_ranks_or_lse_length_in_the_row_layout) {
  const std::vector<SoftmaxPartial<float>> bad_lse{
      {Tensor<float>(Shape{2, 3}), Tensor<float>(Shape{3})}};
  EXPECT_THAT(test::usage_error_of([&] { (void)softmax_merge<float>(bad_lse); }),
              AllOf(HasSubstr("partial 0 has out [2, 3] and lse [3]"),
                    HasSubstr("needs out [rows, width] and lse [rows]"),
                    HasSubstr("use the _attention functions")));
  const std::vector<SoftmaxPartial<float>> four_d{
      {Tensor<float>(Shape{1, 2, 1, 3}), Tensor<float>(Shape{1, 1, 2})}};
  EXPECT_THAT(test::usage_error_of([&] { (void)softmax_merge<float>(four_d); }),
              HasSubstr("has out [1, 2, 1, 3] and lse [1, 1, 2]"));
}

TEST(SoftmaxMergeUsageErrors, merge_into_with_different_shapes) {
  auto acc = partial<double>(2, 2, std::vector<double>(4), {0, 0});
  const auto part = partial<double>(3, 2, std::vector<double>(6), {0, 0, 0});
  EXPECT_THAT(test::usage_error_of([&] { merge_into(acc, part); }),
              AllOf(HasSubstr("merge_into: the partial has out [3, 2] and lse [3]"),
                    HasSubstr("the accumulator has out [2, 2] and lse [2]")));
  SoftmaxPartial<double> bad{Tensor<double>(Shape{2}), Tensor<double>(Shape{2})};
  EXPECT_THAT(test::usage_error_of([&] { merge_into(bad, part); }),
              HasSubstr("merge_into: the accumulator has out [2] and lse [2]"));
}

TEST(SoftmaxMergeUsageErrors, attention_layout_shapes) {
  Tensor<double> acc_out(Shape{1, 4, 2, 8}), acc_lse(Shape{1, 2, 4});
  const Tensor<double> out(Shape{1, 4, 2, 8});
  const Tensor<double> lse_swapped(Shape{1, 4, 2});  // [batch, L, h]: the wrong order
  EXPECT_THAT(
      test::usage_error_of([&] { merge_attention_into(acc_out, acc_lse, out, lse_swapped); }),
      AllOf(HasSubstr("merge_attention_into: the partial has out [1, 4, 2, 8] and lse "
                      "[1, 4, 2]"),
            HasSubstr("lse [batch, h, L] = [1, 2, 4]")));
  const Tensor<double> other(Shape{1, 3, 2, 8}), other_lse(Shape{1, 2, 3});
  EXPECT_THAT(
      test::usage_error_of([&] { merge_attention_into(acc_out, acc_lse, other, other_lse); }),
      AllOf(HasSubstr("the partial has out [1, 3, 2, 8] and lse [1, 2, 3]"),
            HasSubstr("the accumulator has out [1, 4, 2, 8] and lse [1, 2, 4]"),
            HasSubstr("both must have the same shape")));
  Tensor<double> flat(Shape{8, 8}), flat_lse(Shape{8});
  EXPECT_THAT(test::usage_error_of([&] { merge_attention_into(flat, flat_lse, out, lse_swapped); }),
              AllOf(HasSubstr("the accumulator has out [8, 8] and lse [8]"),
                    HasSubstr("needs out [batch, L, h, d]")));
  const std::vector<SoftmaxPartial<double>> parts{{out, acc_lse}, {other, other_lse}};
  EXPECT_THAT(test::usage_error_of([&] { (void)softmax_merge_attention<double>(parts); }),
              AllOf(HasSubstr("partial 1 has out [1, 3, 2, 8]"),
                    HasSubstr("partial 0 has out [1, 4, 2, 8]")));
}

}  // namespace
}  // namespace shardcheck::test
