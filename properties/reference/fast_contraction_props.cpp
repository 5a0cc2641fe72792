// The fast contraction (reference/contraction/fast_contraction.hpp) against its contract, with
// the 256-bit oracle: the generator, oracles and asserted claims (1)-(3) are
// fast_contraction_check.hpp's. Here:
//   meets_its_claim_<T>            double operands (storage values of T)
//   meets_its_claim_r_values_<T>   one or both operands computed in R (113-bit values, some
//                                  outside double's range)
//   (4) bit-identical terms and values for 1 thread against 3 threads at tile 256 and at tile 3,
//       and partials and values for tile 256 against tile 3 (abs sums too when exact).
// The mutants (fast_contraction.mutant_is_caught*): with the last slice of a dropped, (1)-(2) fail;
// fast_contraction.karatsuba_mutant_is_caught: with a square left in Karatsuba's cross terms too.
// Shapes this small use chunks of 16..256 and up to 8 slices, the paths large shapes take.
#include "reference/fast_contraction_check.hpp"

#include "reference/linear/linear.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <boost/multiprecision/cpp_bin_float.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace shardcheck::props::ref::fast_contraction_props {
namespace {

using Exact = boost::multiprecision::number<
    boost::multiprecision::cpp_bin_float<256, boost::multiprecision::digit_base_2>,
    boost::multiprecision::et_off>;

template <class T>
void fast_meets_its_claim(bool mutant) {
  fast_meets_its_claim<T, Exact>(mutant, Valued::doubles);
}

RC_GTEST_PROP(fast_contraction, meets_its_claim_float64, ()) {
  fast_meets_its_claim<double>(false);
}
RC_GTEST_PROP(fast_contraction, meets_its_claim_float32, ()) { fast_meets_its_claim<float>(false); }
RC_GTEST_PROP(fast_contraction, meets_its_claim_bfloat16, ()) {
  fast_meets_its_claim<bfloat16>(false);
}
RC_GTEST_PROP(fast_contraction, meets_its_claim_float16, ()) {
  fast_meets_its_claim<float16>(false);
}
RC_GTEST_PROP(fast_contraction, meets_its_claim_r_values_float64, ()) {
  fast_meets_its_claim<double, Exact>(false, draw_r_valued());
}
RC_GTEST_PROP(fast_contraction, meets_its_claim_r_values_bfloat16, ()) {
  fast_meets_its_claim<bfloat16, Exact>(false, draw_r_valued());
}

bool same_bits(const hp& x, const hp& y) {
  using boost::multiprecision::isnan;
  using boost::multiprecision::signbit;
  return (isnan(x) && isnan(y)) || (x == y && signbit(x) == signbit(y));
}

RC_GTEST_PROP(fast_contraction, independent_of_threads_and_tiles, ()) {
  const Mix mix = draw_mix();
  const ProductCase c = *genProductCase<float>(mix);
  const auto abs_sums =
      *rc::gen::element(reference::AbsSums::upper_bound, reference::AbsSums::exact);
  const bool exact_abs = abs_sums == reference::AbsSums::exact;
  RC_TAG(mix_name(mix), exact_abs ? "exact abs sums" : "upper-bound abs sums");
  auto options = [&](int threads, std::size_t tile) {
    FastOptions o;
    o.threads = threads;
    o.tile = tile;
    o.abs_sums = abs_sums;
    return o;
  };
  // Threads: every term bit for bit, at either tile size. Tiles: the partials and values always,
  // the abs sums when exact (the upper bound's GEMM rounds by Eigen's blocking of the tile).
  const auto x = fast_of(c, options(1, 256)), y = fast_of(c, options(3, 3)),
             y1 = fast_of(c, options(1, 3)), x3 = fast_of(c, options(3, 256));
  for (std::size_t e = 0; e < x.terms.size(); ++e) {
    RC_ASSERT(same_bits(x.terms[e].partial, y.terms[e].partial));
    RC_ASSERT(same_bits(x.terms[e].abs_sum, x3.terms[e].abs_sum));
    RC_ASSERT(same_bits(y.terms[e].abs_sum, y1.terms[e].abs_sum));
    if (exact_abs) RC_ASSERT(same_bits(x.terms[e].abs_sum, y.terms[e].abs_sum));
  }
  for (std::size_t e = 0; e < x.value.size(); ++e) RC_ASSERT(same_bits(x.value[e], y.value[e]));
}

// The mutant: a fast path that drops a's last slice. The property must find a case it gets
// wrong (float64 operands need ≥ 2 slices of ≤ 26 bits, so most cases expose it). RapidCheck
// prints the (expected) counterexample.
TEST(fast_contraction, mutant_is_caught) {
  const bool passed = rc::check("fast path with a's last slice dropped",
                                [] { fast_meets_its_claim<double>(true); });
  EXPECT_FALSE(passed) << "the property did not notice a dropped slice: it cannot fail";
}

// Karatsuba's products with a cross term that keeps A_t·B_t (fast_contraction.hpp,
// products_per_chunk): float64 data take Karatsuba's products in about half the cases.
TEST(fast_contraction, karatsuba_mutant_is_caught) {
  const bool passed = rc::check("Karatsuba's cross terms keeping a square", [] {
    fast_meets_its_claim<double, Exact>(false, Valued::doubles, true);
  });
  EXPECT_FALSE(passed) << "the property did not notice a wrong Karatsuba cross term";
}

// The same mutant on R-valued operands (a holds 113-bit values: always more than one slice).
TEST(fast_contraction, mutant_is_caught_r_values) {
  const bool passed = rc::check("fast path with a's last slice dropped, a in R", [] {
    fast_meets_its_claim<bfloat16, Exact>(true, Valued::a_in_r);
  });
  EXPECT_FALSE(passed) << "the property did not notice a dropped slice of an R operand";
}

// Subnormals, zeros of both signs and a row of 2^-1074 beside 2^1023 (beyond 8 slices: rest
// elements, or the plain path in the short parts), checked against the same oracles.
TEST(fast_contraction, extreme_rows) {
  ProductCase c;
  c.m = 3;
  c.k = 4;
  c.n = 2;
  const double tiny = std::ldexp(1.0, -1074), huge = std::ldexp(1.0, 1023);
  c.a = {tiny, -0.0, 3 * tiny, 0.0, huge, tiny, 1.0, -huge, 0.5, -0.25, 1e-300, 7.0};
  c.b = {1.0, -1.0, 2.0, 0.0, 1e-10, 3.0, -tiny, 1e300};
  c.parts = {1, 0, 3};
  for (const auto abs_sums : {reference::AbsSums::exact, reference::AbsSums::upper_bound}) {
    FastStats stats;
    FastOptions o;
    o.stats = &stats;
    o.abs_sums = abs_sums;
    const auto got = fast_of(c, o);
    EXPECT_EQ(violation<Exact>(c, got, stats, abs_sums), "");
    EXPECT_GT(stats.hp_elements + stats.rest_products, 0U)
        << "the 2^-1074..2^1023 row cannot be sliced whole";
    EXPECT_GT(stats.fast_elements, 0U);
  }
}

// The layout reference/linear/linear.hpp's fast path uses: y = x·Wᵀ with a = x and
// b = transposed_view(w), row-parallel parts; the terms match the plain linear reference's within
// both paths' bounds (gamma_{k_r−1}(2^-113)·Σ|ab| each), and the bias is added by finish_values.
TEST(fast_contraction, matches_the_linear_forward_layout) {
  const std::size_t tokens = 3, in = 5, out = 4;
  std::vector<double> x(tokens * in), w(out * in);
  for (std::size_t e = 0; e < x.size(); ++e)
    x[e] = std::ldexp(1.0 + 0.1 * static_cast<double>(e), -static_cast<int>(e % 7));
  for (std::size_t e = 0; e < w.size(); ++e)
    w[e] = (e % 3 == 0 ? -1.0 : 1.0) / static_cast<double>(e + 1);
  const std::vector<double> bias = {0.5, -0.25, 1.0, 3.0};
  const std::vector<std::size_t> parts = {2, 0, 3};
  auto c = reference::fast_contraction<hp>(reference::row_major_view(x.data(), tokens, in),
                                           reference::transposed_view(w.data(), in, out), parts);
  c.bias = reference::to_hp<hp>(Tensor<double>({out}, bias));
  reference::finish_values(c);
  const auto plain =
      reference::linear<hp>(Tensor<double>({tokens, in}, x), Tensor<double>({out, in}, w),
                            Tensor<double>({out}, bias), parts, reference::ContractionPath::plain);
  ASSERT_EQ(c.terms.size(), plain.terms.size());
  for (std::size_t e = 0; e < c.terms.size(); ++e) {
    const auto& f = c.terms[e];
    const auto& p = plain.terms[e];
    const hp g =
        f.length <= 1 ? hp(0) : reference::gamma<hp>(f.length - 1, reference::pow2<hp>(-113));
    EXPECT_EQ(f.length, p.length);
    EXPECT_LE(abs(f.partial - p.partial), 2 * g * p.abs_sum * (1 + g)) << "term " << e;
    // The fast abs sum is an upper bound (AbsSums::upper_bound): at least the plain one less its
    // rounding, at most (1 + 4·gamma_k(2^-53)) above it (no underflow at these magnitudes).
    const hp g53 =
        reference::gamma<hp>(std::max<std::size_t>(f.length, 1), reference::pow2<hp>(-53));
    EXPECT_GE(f.abs_sum, p.abs_sum * (1 - 2 * g)) << "term " << e;
    EXPECT_LE(f.abs_sum, p.abs_sum * (1 + 4 * g53) * (1 + 2 * g)) << "term " << e;
  }
  // Values: both sum the parts and the bias with finish_values (p + 1 roundings each, within
  // gamma_{p+1}·(Σ_r |partial_r| + |b|)), so they differ by at most the parts' differences plus
  // twice that.
  const auto u = reference::pow2<hp>(-113);
  const auto g_sum = reference::gamma<hp>(parts.size() + 1, u);
  for (std::size_t e = 0; e < c.value.size(); ++e) {
    hp parts_diff(0), magnitude(abs(hp(bias[e % out])));
    for (std::size_t r = 0; r < parts.size(); ++r) {
      const auto& f = c.terms[r * c.value.size() + e];
      const auto& p = plain.terms[r * c.value.size() + e];
      parts_diff += abs(f.partial - p.partial);
      magnitude += p.abs_sum * (1 + reference::gamma<hp>(in, u));
    }
    EXPECT_LE(abs(c.value[e] - plain.value[e]), (parts_diff + 2 * g_sum * magnitude) * (1 + g_sum))
        << "value " << e;
  }
}

TEST(fast_contraction, shape_mismatch_names_the_shapes) {
  const std::vector<double> a(6), b(8);
  try {
    (void)reference::fast_contraction<hp>(reference::row_major_view(a.data(), 2, 3),
                                          reference::row_major_view(b.data(), 4, 2));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("a is [2, 3] and b is [4, 2]"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace shardcheck::props::ref::fast_contraction_props
