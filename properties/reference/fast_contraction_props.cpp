// The fast contraction (reference/contraction/fast_contraction.hpp) against its contract.
//
// Oracles, per element and part of a generated [m, k]·[k, n] product (m, n in 0..9, k in 0..300,
// 1..8 parts with empty ones, storage type float64/float32/bfloat16/float16, value mixes tame,
// wide (T's whole range, subnormals included), tiny, cancelling, sparse zeros, ±inf/NaN):
//   exact  Σ a·b and Σ|a·b| in 256-bit binary floating point (cpp_bin_float): products of
//          doubles are exact there and k ≤ 300 sums err by < 2^-247·Σ|a·b|, far below what is
//          asserted, so it stands for the exact values;
//   plain  contract_parts (dot.hpp) in hp, the 113-bit path the fast one replaces.
// Asserted (each tolerance is the header's claim, plus the oracle's own error where stated):
//   (1) every finite term: |partial − exact| and |abs_sum − exact Σ|ab|| ≤ gamma_{k_r−1}(2^-113)
//       ·Σ|ab|: dot.hpp's contract, which bounds.hpp's reference term relies on;
//   (2) when no term went to the plain path (FastStats::hp_elements == 0), the sharper
//       gamma_rho(2^-113)·Σ|ab| with rho the largest count of sums in R (max_roundings);
//   (2') when moreover no rest product was added and rho ≤ 1: |partial − exact| ≤ 2^-113·|exact|
//       and likewise abs_sum (one rounding of the exact sum: correctly rounded);
//   (3) non-finite plain terms: the fast term is the same (NaN for NaN, the same infinity);
//   (4) bit-identical terms and values for 1 thread and tile 256 against 3 threads and tile 3.
// The mutant (fast_contraction.mutant_is_caught): with the last slice of a dropped, (1)-(2) fail.
// Shapes this small use chunks of 16..256 and up to 8 slices, the paths large shapes take.
#include "reference/product_gen.hpp"
#include "testing/reference_gen.hpp"

#include "reference/contraction/fast_contraction.hpp"
#include "reference/linear/linear.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <boost/multiprecision/cpp_bin_float.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace shardcheck::props::ref {
namespace {

using reference::FastOptions;
using reference::FastStats;
using reference::hp;
using reference::PartTerms;
using Exact = boost::multiprecision::number<
    boost::multiprecision::cpp_bin_float<256, boost::multiprecision::digit_base_2>,
    boost::multiprecision::et_off>;

// a [m, k] and b [k, n], row-major, as doubles (exact), with the parts of k.
struct ProductCase {
  std::size_t m = 0, k = 0, n = 0;
  std::vector<double> a, b;
  std::vector<std::size_t> parts;
  std::string describe() const {
    std::string s = "a [" + std::to_string(m) + ", " + std::to_string(k) + "], b [" +
                    std::to_string(k) + ", " + std::to_string(n) + "], parts [";
    for (std::size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + std::to_string(parts[i]);
    return s + "]";
  }
};

template <class T>
rc::Gen<ProductCase> genProductCase(Mix mix) {
  return rc::gen::exec([mix] {
    ProductCase c;
    c.m = *uniform<std::size_t>(0, 9);
    c.n = *uniform<std::size_t>(0, 9);
    c.k = *genInnerLength();
    auto draw = [&](std::size_t count) {
      std::vector<double> out;
      for (T v : *rc::gen::container<std::vector<T>>(count, genEntry<T>(mix)))
        out.push_back(static_cast<double>(v));
      return out;
    };
    c.a = draw(c.m * c.k);
    c.b = draw(c.k * c.n);
    if (mix == Mix::cancellation && c.k >= 2) {
      // The second half of the axis repeats the first with a's sign flipped, and one product
      // of it is perturbed: each element's exact sum is a residue far below Σ|ab|.
      const std::size_t h = c.k / 2;
      for (std::size_t i = 0; i < c.m; ++i) {
        for (std::size_t q = 0; q < h; ++q) c.a[i * c.k + h + q] = -c.a[i * c.k + q];
      }
      for (std::size_t q = 0; q < h; ++q) {
        for (std::size_t j = 0; j < c.n; ++j) c.b[(h + q) * c.n + j] = c.b[q * c.n + j];
      }
      if (c.m > 0) c.a[c.k - 1] = static_cast<double>(*genLogUniform<T>(-30, -10));
    }
    if (mix == Mix::special && !c.a.empty()) {
      const T inf = std::numeric_limits<T>::infinity();
      const std::size_t count = *uniform<std::size_t>(1, 2);
      for (std::size_t s = 0; s < count; ++s) {
        std::vector<double>& v = (c.b.empty() || *uniform(0, 1) == 0) ? c.a : c.b;
        v[*uniform<std::size_t>(0, v.size() - 1)] =
            static_cast<double>(*rc::gen::element(inf, -inf, std::numeric_limits<T>::quiet_NaN()));
      }
    }
    c.parts =
        draw_parts(c.k, *rc::gen::weightedOneOf<int>({{2, rc::gen::just(1)}, {5, uniform(2, 8)}}));
    return c;
  });
}

reference::Contraction<hp> fast_of(const ProductCase& c, const FastOptions& o) {
  return reference::fast_contraction<hp>(reference::row_major_view(c.a.data(), c.m, c.k),
                                         reference::row_major_view(c.b.data(), c.k, c.n), c.parts,
                                         o);
}

// The plain 113-bit terms and the exact ones of element (i, j), part r starting at k0.
struct Oracle {
  PartTerms<hp> plain;
  Exact partial{0}, abs_sum{0};
};
Oracle oracle(const ProductCase& c, std::size_t i, std::size_t j, std::size_t k0, std::size_t kr) {
  Oracle o;
  std::vector<hp> x(kr), y(kr);
  for (std::size_t q = 0; q < kr; ++q) {
    const double av = c.a[i * c.k + k0 + q], bv = c.b[(k0 + q) * c.n + j];
    x[q] = hp(av);
    y[q] = hp(bv);
    const Exact p = Exact(av) * Exact(bv);
    o.partial += p;
    o.abs_sum += abs(p);
  }
  const std::size_t one[] = {kr};
  reference::contract_parts<hp>(x.data(), 1, y.data(), 1, one, &o.plain);
  return o;
}

Exact gamma_113(std::size_t n) {
  return n == 0 ? Exact(0) : reference::gamma<Exact>(n, reference::pow2<Exact>(-113));
}

std::string show_exact(const Exact& v) { return v.str(20, std::ios_base::scientific); }

// (1)-(3) for every element and part; the first violation, or "".
std::string violation(const ProductCase& c, const reference::Contraction<hp>& got,
                      const FastStats& stats) {
  const std::size_t mn = c.m * c.n;
  const bool all_fast = stats.hp_elements == 0;
  const std::size_t rho = stats.max_roundings;
  const bool rounded_once = all_fast && stats.rest_products == 0 && rho <= 1;
  std::size_t k0 = 0;
  for (std::size_t r = 0; r < c.parts.size(); ++r) {
    const std::size_t kr = c.parts[r];
    const Exact claim = gamma_113(kr == 0 ? 0 : kr - 1);
    const Exact sharp = gamma_113(stats.max_roundings);
    for (std::size_t i = 0; i < c.m; ++i) {
      for (std::size_t j = 0; j < c.n; ++j) {
        const PartTerms<hp>& f = got.terms[r * mn + i * c.n + j];
        const Oracle o = oracle(c, i, j, k0, kr);
        const std::string where = c.describe() + ", element (" + std::to_string(i) + ", " +
                                  std::to_string(j) + "), part " + std::to_string(r) + ": ";
        if (f.length != kr) return where + "length " + std::to_string(f.length);
        using boost::multiprecision::isfinite;
        using boost::multiprecision::isnan;
        if (!isfinite(o.plain.partial) || !isfinite(o.plain.abs_sum)) {
          const bool same =
              (isnan(o.plain.partial) ? isnan(f.partial) : f.partial == o.plain.partial) &&
              (isnan(o.plain.abs_sum) ? isnan(f.abs_sum) : f.abs_sum == o.plain.abs_sum);
          if (!same) return where + "non-finite plain terms differ from the fast ones";
          continue;
        }
        if (!isfinite(f.partial) || !isfinite(f.abs_sum)) {
          return where + "non-finite fast terms where the plain ones are finite";
        }
        const Exact ep = abs(Exact(f.partial) - o.partial);
        const Exact ea = abs(Exact(f.abs_sum) - o.abs_sum);
        // The oracle's own error: ≤ k_r·2^-255·Σ|ab| (256-bit sums of exact products).
        const Exact slack = Exact(kr) * reference::pow2<Exact>(-255) * o.abs_sum;
        const Exact allowed = (all_fast ? std::min(claim, sharp) : claim) * o.abs_sum + slack;
        // With no rest product and at most one rounding, the slices' exact sum was rounded once
        // to 113 bits: the terms are correctly rounded, relative to the exact values themselves.

        const auto u = reference::pow2<Exact>(-113);
        if (rounded_once && (ep > u * abs(o.partial) + slack || ea > u * o.abs_sum + slack)) {
          return where + "not correctly rounded: |partial err| " + show_exact(ep) + ", exact " +
                 show_exact(o.partial);
        }
        if (ep > allowed || ea > allowed) {
          return where + "|partial err| " + show_exact(ep) + ", |abs_sum err| " + show_exact(ea) +
                 " > " + show_exact(allowed) + " (Σ|ab| " + show_exact(o.abs_sum) + ", rho " +
                 std::to_string(stats.max_roundings) + (all_fast ? ", all fast)" : ")");
        }
      }
    }
    k0 += kr;
  }
  return {};
}

template <class T>
void fast_meets_its_claim(bool mutant) {
  const Mix mix = draw_mix();
  const ProductCase c = *genProductCase<T>(mix);
  RC_TAG(type_name(T{}), mix_name(mix));
  FastStats stats;
  FastOptions o;
  o.stats = &stats;
  o.mutant_drop_last_slice = mutant;
  const auto got = fast_of(c, o);
  RC_CLASSIFY(stats.rest_products > 0, "with rest products");
  RC_CLASSIFY(stats.hp_elements > 0, "with plain-path terms");
  RC_CLASSIFY(stats.max_pairs > 1, "more than one slice pair");
  const std::string v = violation(c, got, stats);
  if (!v.empty()) RC_FAIL(std::string(type_name(T{})) + " " + mix_name(mix) + ": " + v);
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

bool same_bits(const hp& x, const hp& y) {
  using boost::multiprecision::isnan;
  using boost::multiprecision::signbit;
  return (isnan(x) && isnan(y)) || (x == y && signbit(x) == signbit(y));
}

RC_GTEST_PROP(fast_contraction, independent_of_threads_and_tiles, ()) {
  const Mix mix = draw_mix();
  const ProductCase c = *genProductCase<float>(mix);
  RC_TAG(mix_name(mix));
  FastOptions one;
  one.threads = 1;
  FastOptions many;
  many.threads = 3;
  many.tile = 3;
  const auto x = fast_of(c, one), y = fast_of(c, many);
  for (std::size_t e = 0; e < x.terms.size(); ++e) {
    RC_ASSERT(same_bits(x.terms[e].partial, y.terms[e].partial));
    RC_ASSERT(same_bits(x.terms[e].abs_sum, y.terms[e].abs_sum));
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
  FastStats stats;
  FastOptions o;
  o.stats = &stats;
  const auto got = fast_of(c, o);
  EXPECT_EQ(violation(c, got, stats), "");
  EXPECT_GT(stats.hp_elements + stats.rest_products, 0U)
      << "the 2^-1074..2^1023 row cannot be sliced whole";
  EXPECT_GT(stats.fast_elements, 0U);
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
    EXPECT_LE(abs(f.abs_sum - p.abs_sum), 2 * g * p.abs_sum * (1 + g)) << "term " << e;
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
}  // namespace shardcheck::props::ref
