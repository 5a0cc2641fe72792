// Properties of the crossings between the storage types and the high-precision scalar
// (reference/precision.hpp): to_hp is exact, round_to is the IEEE round-to-nearest-even of its
// argument (nearest, ties to even, overflow, underflow, signed zero, NaN), rounding directly
// differs from rounding through float exactly where double rounding is known to go wrong,
// ulp_distance counts representable values, and Eigen's 16-bit additions are single roundings
// (Figueroa's theorem, which reference/bounds.hpp relies on).
//
// Every property runs for both 113-bit scalars: hp (float128 under GCC) and portable_hp
// (cpp_bin_float_quad, what clang builds use), and for every storage type.
#include "per_type_props.hpp"
#include "testing/reference_gen.hpp"

#include "reference/portable_hp.hpp"
#include "reference/precision.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <type_traits>

namespace shardcheck::props::ref::rounding_props {
namespace {

using reference::hp;
using reference::next_down;
using reference::next_up;
using reference::ordered;
using reference::portable_hp;
using reference::round_to;
using reference::to_hp;
using reference::ulp_distance;

template <class T>
bool is_nan(T v) {
  return Eigen::numext::isnan(v);
}

template <class T>
bool bits_equal(T a, T b) {
  return to_bits(a) == to_bits(b);
}

template <class T>
bool sign_of(T v) {
  return ((to_bits(v) >> (8 * sizeof(T) - 1)) & 1U) != 0;
}

// The exact value of a finite T, decoded from its encoding with integer arithmetic only:
// ±M·2^E. Independent of every conversion under test.
template <class R, class T>
R decode(T v) {
  constexpr Format f = format_of<T>();
  const std::uint64_t b = to_bits(v);
  const int man_bits = f.precision - 1;
  const std::uint64_t mant = b & ((std::uint64_t{1} << man_bits) - 1);
  const auto field =
      static_cast<int>((b >> man_bits) & ((std::uint64_t{1} << f.exponent_bits) - 1));
  const bool neg = ((b >> (8 * sizeof(T) - 1)) & 1U) != 0;
  const std::uint64_t m = field == 0 ? mant : (mant | (std::uint64_t{1} << man_bits));
  const int e = (field == 0 ? f.emin : field - f.emax) - man_bits;
  using std::ldexp;
  const R mag = ldexp(R(m), e);
  return neg ? R(-mag) : mag;
}

// Runs body.template operator()<R>() for each distinct 113-bit scalar.
template <class F>
void for_each_hp(F&& body) {
  body.template operator()<hp>();
  if constexpr (!std::is_same_v<hp, portable_hp>) body.template operator()<portable_hp>();
}

// ---------------------------------------------------------------- to_hp

template <class T>
void to_hp_is_exact_case() {
  const T v = *genRawBits<T>();
  for_each_hp([&]<class R>() {
    const R r = to_hp<R>(v);
    if (is_nan(v)) {
      RC_ASSERT(boost::multiprecision::isnan(r));
      RC_ASSERT(is_nan(round_to<T>(r)));
      return;
    }
    if (Eigen::numext::isinf(v)) {
      RC_ASSERT(boost::multiprecision::isinf(r));
    } else {
      RC_ASSERT(r == decode<R>(v));
    }
    RC_ASSERT((boost::multiprecision::signbit(r) != 0) == sign_of(v));
    const T back = round_to<T>(r);
    if (!bits_equal(back, v)) RC_FAIL("round trip of " + show(v) + " gave " + show(back));
  });
}

SHARDCHECK_PROP_PER_TYPE(to_hp, is_exact_and_round_to_inverts_it, to_hp_is_exact_case)

// ---------------------------------------------------------------- round_to: single roundings the
// hardware does

// double → float (the CPU's cvtsd2ss), float → bfloat16 and float → float16 (Eigen's
// round-to-nearest-even conversions) are single correct roundings: round_to must agree bit for
// bit on every input they can take.
template <class T, class From>
void matches_single_rounding_case() {
  // Raw encodings, and values whose short significands make exact ties in T common.
  const From x = *rc::gen::weightedOneOf<From>(
      {{1, genRawBits<From>()},
       {1, genLogUniform<From>(lowest_binade<From>(), highest_binade<From>())},
       {1, genLogUniform<From>(lowest_binade<From>(), highest_binade<From>(), true,
                               format_of<T>().precision + 1)}});
  const T expected = static_cast<T>(x);
  for_each_hp([&]<class R>() {
    const T got = round_to<T>(to_hp<R>(x));
    if (is_nan(expected)) {
      RC_ASSERT(is_nan(got));
    } else if (!bits_equal(got, expected)) {
      RC_FAIL("round_to<" + std::string(type_name(T{})) + ">(" + show(x) + ") = " + show(got) +
              ", the single hardware rounding gives " + show(expected));
    }
  });
}

RC_GTEST_PROP(round_to, float32_from_float64_matches_the_cpu, ()) {
  matches_single_rounding_case<float, double>();
}
RC_GTEST_PROP(round_to, bfloat16_from_float32_matches_eigen, ()) {
  matches_single_rounding_case<bfloat16, float>();
}
RC_GTEST_PROP(round_to, float16_from_float32_matches_eigen, ()) {
  matches_single_rounding_case<float16, float>();
}

// ---------------------------------------------------------------- round_to: nearest, ties to even

// x near a T value v: v + (spacing)·j/2^m with m up to 100 bits (exact in 113 bits), exact
// midpoints a third of the time, and now and then far outside T's range.
template <class T, class R>
R genNear(T v) {
  const R rv = to_hp<R>(v);
  const R up = to_hp<R>(next_up(v));
  const R gap =
      Eigen::numext::isinf(next_up(v)) ? R(to_hp<R>(v) - to_hp<R>(next_down(v))) : R(up - rv);
  const int kind = *uniform(0, 5);
  using std::ldexp;
  if (kind == 0) return rv + gap / 2;  // a tie
  if (kind == 1) {                     // beyond the range, either way
    const int e = *uniform(-3000, 3000);
    return ldexp(R(1) + ldexp(R(*uniform(0, 1000)), -10), e) * (*uniform(0, 1) == 1 ? -1 : 1);
  }
  const int m = *uniform(1, 100);
  const R j(*uniform<std::int64_t>(-(std::int64_t{1} << 40), std::int64_t{1} << 40));
  return rv + gap * ldexp(j, -m);
}

template <class T>
bool even_encoding(T v) {
  return (to_bits(v) & 1U) == 0;
}

template <class T>
void nearest_ties_to_even_case() {
  const T v = *genFiniteBits<T>();
  for_each_hp([&]<class R>() {
    using std::abs;
    const R x = genNear<T, R>(v);
    const T r = round_to<T>(x);
    const R omega = reference::overflow_threshold<R>(format_of<T>());
    RC_ASSERT(sign_of(r) == (boost::multiprecision::signbit(x) != 0));
    if (abs(x) >= omega) {
      if (!Eigen::numext::isinf(r))
        RC_FAIL(show_hp(x) + " is beyond Omega but rounded to " + show(r));
      return;
    }
    RC_ASSERT(Eigen::numext::isfinite(r));
    const R dist = abs(x - to_hp<R>(r));
    for (const T n : {next_up(r), next_down(r)}) {
      if (Eigen::numext::isinf(n)) continue;  // |x| < Omega: max is nearer than the infinity
      const R dn = abs(x - to_hp<R>(n));
      if (dn < dist)
        RC_FAIL("round_to(" + show_hp(x) + ") = " + show(r) + " but " + show(n) + " is nearer");
      if (dn == dist && !even_encoding(r))
        RC_FAIL("tie at " + show_hp(x) + " went to the odd " + show(r));
    }
  });
}

SHARDCHECK_PROP_PER_TYPE(round_to, is_nearest_with_ties_to_even, nearest_ties_to_even_case)

// ---------------------------------------------------------------- direct vs double rounding

// m = the midpoint of v and its successor, nudged by δ far below the intermediate format's
// half-ulp: the intermediate rounds m + δ to the tie m, whose tie-break ignores δ. Direct
// rounding sees δ. Wherever the even neighbour lies on the other side of δ, the two differ.
template <class T, class Mid>
void direct_differs_from_double_rounding_case() {
  const T v = *genLogUniform<T>(lowest_binade<T>() + format_of<T>().precision,
                                highest_binade<T>() - 1, false);
  const T w = next_up(v);
  RC_PRE(Eigen::numext::isfinite(w));
  const bool upward = *uniform(0, 1) == 1;
  for_each_hp([&]<class R>() {
    using std::ldexp;
    const R m = (to_hp<R>(v) + to_hp<R>(w)) / 2;
    int e = 0;
    (void)frexp(m, &e);
    const R delta = ldexp(R(1), e - format_of<Mid>().precision - 8);  // < half an ulp of Mid
    const R x = upward ? R(m + delta) : R(m - delta);
    const T direct = round_to<T>(x);
    RC_ASSERT(bits_equal(direct, upward ? w : v));  // no tie: the side of δ wins
    const T twice = static_cast<T>(round_to<Mid>(x));
    const T even = even_encoding(v) ? v : w;
    RC_ASSERT(bits_equal(twice, even));  // the intermediate made it a tie
    RC_CLASSIFY(!bits_equal(direct, twice), "double rounding wrong here");
  });
}

RC_GTEST_PROP(round_to, bfloat16_direct_differs_from_through_float, ()) {
  direct_differs_from_double_rounding_case<bfloat16, float>();
}
RC_GTEST_PROP(round_to, float16_direct_differs_from_through_float, ()) {
  direct_differs_from_double_rounding_case<float16, float>();
}
RC_GTEST_PROP(round_to, float32_direct_differs_from_through_float64, ()) {
  direct_differs_from_double_rounding_case<float, double>();
}

TEST(round_to, numerics_md_example_bfloat16_of_1_plus_2e8_plus_2e30) {
  const hp x = hp(1) + reference::pow2<hp>(-8) + reference::pow2<hp>(-30);
  EXPECT_EQ(static_cast<float>(round_to<bfloat16>(x)), 1.0078125F);
  EXPECT_EQ(static_cast<float>(bfloat16(static_cast<float>(x))), 1.0F);  // through float: wrong
  const hp y = hp(1) + reference::pow2<hp>(-11) + reference::pow2<hp>(-30);
  EXPECT_EQ(static_cast<float>(round_to<float16>(y)), 1.0009765625F);
  EXPECT_EQ(static_cast<float>(float16(static_cast<float>(y))), 1.0F);
}

TEST(round_to, overflow_underflow_and_signed_zero) {
  const hp omega = reference::overflow_threshold<hp>(reference::bfloat16_format);
  EXPECT_TRUE(Eigen::numext::isinf(round_to<bfloat16>(omega)));  // the midpoint rounds to even: up
  EXPECT_EQ(to_bits(round_to<bfloat16>(hp(omega * (1 - reference::pow2<hp>(-100))))),
            to_bits(std::numeric_limits<bfloat16>::max()));
  const hp eta = reference::smallest_subnormal<hp>(reference::float16_format);
  EXPECT_EQ(to_bits(round_to<float16>(hp(eta / 2))), 0U);        // tie with 0: even is 0
  EXPECT_EQ(to_bits(round_to<float16>(hp(-eta / 2))), 0x8000U);  // -0
  EXPECT_EQ(to_bits(round_to<float16>(hp(eta / 2 + reference::pow2<hp>(-60)))), 1U);
  EXPECT_EQ(to_bits(round_to<double>(hp(-0.0))), 0x8000000000000000ULL);
}

// ---------------------------------------------------------------- ulp_distance

template <class T>
void ulp_distance_case() {
  std::vector<T> v = {*genFiniteBits<T>(), *genFiniteBits<T>(), *genFiniteBits<T>()};
  // ordered() is monotone in the value: the encoding order is the numeric order.
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t j = 0; j < 3; ++j) {
      RC_ASSERT((ordered(v[i]) < ordered(v[j])) == (to_hp<hp>(v[i]) < to_hp<hp>(v[j])));
    }
  }
  std::sort(v.begin(), v.end(), [](T a, T b) { return ordered(a) < ordered(b); });
  RC_ASSERT(ulp_distance(v[0], v[2]) == ulp_distance(v[0], v[1]) + ulp_distance(v[1], v[2]));
  RC_ASSERT(ulp_distance(v[0], v[1]) == ulp_distance(v[1], v[0]));
  RC_ASSERT(ulp_distance(v[0], next_up(v[0])) == 1U);
  RC_ASSERT(ulp_distance(v[0], next_down(v[0])) == 1U);
  RC_ASSERT(ulp_distance(v[0], v[0]) == 0U);
}

SHARDCHECK_PROP_PER_TYPE(ulp_distance, counts_representable_values, ulp_distance_case)

TEST(ulp_distance, zeros_infinities_and_nan) {
  EXPECT_EQ(ulp_distance(0.0, -0.0), 0U);
  EXPECT_EQ(ulp_distance(-std::numeric_limits<double>::denorm_min(),
                         std::numeric_limits<double>::denorm_min()),
            2U);
  EXPECT_EQ(ulp_distance(std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity()),
            1U);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(ulp_distance(nan, nan), 0U);
  EXPECT_EQ(ulp_distance(nan, 1.0F), std::numeric_limits<std::uint64_t>::max());
}

// ---------------------------------------------------------------- Eigen's 16-bit additions

// bounds.hpp counts a bfloat16/float16 addition (Eigen: add in float, round to T) as ONE
// rounding: float's 24 bits ≥ 2p + 2 make the double rounding innocuous (Figueroa 1995). Here
// checked against round_to of the sum in R, which is exact when the operands' binades are less
// than ~100 apart (the common case generated here) and innocuous likewise otherwise.
template <class T>
void eigen_addition_is_one_rounding_case() {
  const T a = *genFiniteBits<T>();
  int e = 0;
  (void)std::frexp(static_cast<double>(a), &e);
  const T b =
      *rc::gen::weightedOneOf<T>({{4, genLogUniform<T>(e - 30, e + 30)}, {1, genFiniteBits<T>()}});
  const T sum = static_cast<T>(a + b);
  for_each_hp([&]<class R>() {
    const T expected = round_to<T>(R(to_hp<R>(a) + to_hp<R>(b)));
    if (!bits_equal(sum, expected)) {
      RC_FAIL(show(a) + " + " + show(b) + ": Eigen gives " + show(sum) + ", one rounding gives " +
              show(expected));
    }
  });
}

RC_GTEST_PROP(figueroa, eigen_bfloat16_addition_is_one_rounding, ()) {
  eigen_addition_is_one_rounding_case<bfloat16>();
}
RC_GTEST_PROP(figueroa, eigen_float16_addition_is_one_rounding, ()) {
  eigen_addition_is_one_rounding_case<float16>();
}

}  // namespace
}  // namespace shardcheck::props::ref::rounding_props
