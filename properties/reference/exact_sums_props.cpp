// The fast contraction's exact integer steps (reference/contraction/exact_sums.hpp) and its
// bit-level forms for doubles (reference/contraction/double_bits.hpp), against independent
// oracles:
//   wide_sum_is_exact              WideSum's Horner steps (acc·2^shift + p) give the exact
//                                  integer (Boost cpp_int), negative values and carries included
//   to_r_scaled_is_correctly_rounded
//                                  v·2^e from a 128-bit or 512-bit integer is v·2^e rounded to
//                                  nearest, ties to even, at R's 113 bits, for both 113-bit
//                                  scalars (hp and portable_hp), checked in a 1024-bit binary
//                                  float (exact for these values): ties and near-ties generated
//                                  on purpose
//   scaled_by_pow2_is_ldexp        bit for bit
//   double_bits_match_the_generic_forms
//                                  exponent_of, lowest_bit and slice_of of a double (subnormals
//                                  included) equal the frexp/ldexp/trunc forms
// The mutant (exact_sums.mutant_is_caught): a conversion that drops the sticky bits (rounds a
// value just above a tie down when the kept mantissa is even) must fail the rounding property.
#include "reference/contraction/fast_contraction.hpp"
#include "reference/portable_hp.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <boost/multiprecision/cpp_int.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

namespace shardcheck::props::ref::exact_sums_props {
namespace {

namespace mp = boost::multiprecision;
using reference::hp;
using reference::portable_hp;
using reference::detail::wide_int;
using reference::detail::wide_uint;
using reference::detail::WideSum;
using Int = mp::cpp_int;
using Big = mp::number<mp::cpp_bin_float<1024, mp::digit_base_2>, mp::et_off>;

// The signed integer a WideSum holds (two's complement over its limbs).
Int value_of(const WideSum& w) {
  Int v = 0;
  for (int i = WideSum::limbs - 1; i >= 0; --i) {
    v <<= 64;
    v += w.limb[static_cast<std::size_t>(i)];
  }
  if (w.negative()) v -= Int(1) << WideSum::bits;
  return v;
}

// A magnitude of up to `bits` bits; in some cases an exact tie at 113 bits (the bit below the
// 113 kept ones set, nothing under it) or a near-tie (one sticky bit far below).
Int magnitude_gen(int bits, bool near_tie_only = false) {
  Int m = 0;
  for (int have = 0; have < bits; have += 32) {
    m <<= 32;
    m += *rc::gen::arbitrary<std::uint32_t>();
  }
  m >>= (bits + 31) / 32 * 32 - bits;
  const int shape = near_tie_only ? 3 : *rc::gen::inRange(0, 4);
  if (shape >= 2 && bits > 115) {
    const int below = bits - 114;  // the rounding bit's position when the top bit is set
    m |= Int(1) << (bits - 1);
    m >>= below;
    m |= 1;  // the rounding bit
    m <<= below;
    if (shape == 3) m |= Int(1) << *rc::gen::inRange(0, below);  // a sticky bit
  }
  return m;
}

// A WideSum holding ±m, built by Horner steps of 32-bit digits (the way the fast path feeds
// its diagonals, with the digits' sign the value's).
WideSum wide_of(const Int& m, bool negative) {
  WideSum w;
  const auto digits = static_cast<int>((mp::msb(m) + 32) / 32);
  for (int d = digits - 1; d >= 0; --d) {
    const auto digit = static_cast<std::uint32_t>((m >> (32 * d)) & 0xffffffffU);
    w.shift_add(32, negative ? -static_cast<wide_int>(digit) : static_cast<wide_int>(digit));
  }
  return w;
}

// Whether r is x rounded to nearest with ties to even at R's precision (x exact, nonzero, r
// finite and normal).
template <class R>
std::string rounding_error(const R& r, const Big& x) {
  constexpr int digits = std::numeric_limits<R>::digits;
  const Big br(r);  // exact: 113 bits
  if (br == 0 || (br < 0) != (x < 0)) return "wrong sign or zero";
  int e = 0;
  (void)frexp(br, &e);
  const Big ulp_above = ldexp(Big(1), e - digits);
  const Big ax = abs(x), ar = abs(br);
  const bool power_of_two = ar == ldexp(Big(1), e - 1);
  const Big ulp_below = power_of_two ? ulp_above / 2 : ulp_above;
  const Big gap = ax >= ar ? ax - ar : ar - ax;
  const Big half = (ax >= ar ? ulp_above : ulp_below) / 2;
  if (gap > half) return "not the nearest";
  if (gap == half) {
    const Int mantissa = static_cast<Int>(ldexp(ar, digits - e));
    if ((mantissa & 1) != 0) return "a tie not rounded to even";
  }
  return "";
}

// near_tie_only: every value just above a tie at 113 bits (the mutant's own cases, so that it is
// found within any case count: half of them have an even kept mantissa).
template <class R, class Convert>
void correctly_rounded_case(const Convert& convert, bool near_tie_only = false) {
  const bool wide = *rc::gen::arbitrary<bool>();
  const int low = near_tie_only ? 116 : 1;
  const int bits = wide ? *rc::gen::inRange(low, 480) : *rc::gen::inRange(low, 127);
  Int m = magnitude_gen(bits, near_tie_only);
  if (m == 0) m = Int(1) << (bits - 1);  // no discards: small sizes draw zeros often
  const bool negative = *rc::gen::arbitrary<bool>();
  const int e = *rc::gen::inRange(-3000, 3000);
  const Int v = negative ? Int(-m) : m;
  const Big x = ldexp(Big(v), e);
  R r;
  if (wide) {
    r = convert(wide_of(m, negative), e);
  } else {
    const auto low = static_cast<std::uint64_t>(m & 0xffffffffffffffffULL);
    const auto high = static_cast<std::uint64_t>(m >> 64);
    const auto mag = static_cast<wide_int>((static_cast<wide_uint>(high) << 64) | low);
    r = convert(negative ? -mag : mag, e);
  }
  const std::string err = rounding_error(r, x);
  if (!err.empty()) {
    RC_FAIL(err + ": " + std::to_string(bits) + "-bit value " + v.str() + "·2^" +
            std::to_string(e));
  }
}

struct Correct {
  template <class R, class V>
  R operator()(const V& v, int e) const {
    return reference::detail::to_r_scaled<R>(v, e);
  }
};

// The mutant: every bit under the rounding bit dropped before converting (the sticky bits
// ignored), so a value just above a tie with an even kept mantissa rounds down.
struct DropsStickyBits {
  template <class R>
  R operator()(const WideSum& v, int e) const {
    Int x = value_of(v);
    const bool negative = x < 0;
    Int m = negative ? Int(-x) : x;
    const auto top = static_cast<int>(mp::msb(m));
    const int keep = std::numeric_limits<R>::digits + 1;  // the kept bits and the rounding bit
    int dropped = 0;
    if (top + 1 > keep) {
      dropped = top + 1 - keep;
      m >>= dropped;
    }
    return reference::detail::to_r_scaled<R>(wide_of(m, negative), e + dropped);
  }
  template <class R>
  R operator()(wide_int v, int e) const {
    const bool negative = v < 0;
    const wide_uint mag = negative ? wide_uint(0) - static_cast<wide_uint>(v) : wide_uint(v);
    const auto low = static_cast<std::uint64_t>(mag);
    const auto high = static_cast<std::uint64_t>(mag >> 64);
    const Int m = (Int(high) << 64) + low;
    return (*this).template operator()<R>(wide_of(m, negative), e);
  }
};

template <class R, class Convert>
auto converter(const Convert& c) {
  return [c](const auto& v, int e) { return c.template operator()<R>(v, e); };
}

RC_GTEST_PROP(exact_sums, wide_sum_is_exact, ()) {
  const auto steps = *rc::gen::inRange(1, 16);
  WideSum w;
  Int expected = 0;
  for (int d = 0; d < steps; ++d) {
    const int shift = *rc::gen::inRange(0, 27);
    const int bits = *rc::gen::inRange(0, 64);
    const auto p =
        static_cast<wide_int>(*rc::gen::arbitrary<std::int64_t>()) >> (63 - std::min(bits, 63));
    w.shift_add(shift, p);
    expected = expected * (Int(1) << shift) + Int(static_cast<long long>(p));
  }
  RC_ASSERT(value_of(w) == expected);
}

RC_GTEST_PROP(exact_sums, to_r_scaled_is_correctly_rounded, ()) {
  correctly_rounded_case<hp>(converter<hp>(Correct{}));
  if constexpr (!std::is_same_v<hp, portable_hp>) {
    correctly_rounded_case<portable_hp>(converter<portable_hp>(Correct{}));
  }
}

TEST(exact_sums, mutant_is_caught) {
  const auto result = rc::check("the sticky-dropping conversion", [] {
    correctly_rounded_case<hp>(converter<hp>(DropsStickyBits{}), true);
  });
  EXPECT_FALSE(result) << "a conversion that ignores the sticky bits passed the rounding property";
}

RC_GTEST_PROP(exact_sums, scaled_by_pow2_is_ldexp, ()) {
  // A finite nonzero double, subnormals included, drawn without discards.
  const auto mantissa = *rc::gen::inRange<std::int64_t>(1, std::int64_t{1} << 53);
  const double v = std::ldexp(static_cast<double>(mantissa), *rc::gen::inRange(-1074, 971));
  const hp x = hp(v) / 3;  // 113 significant bits
  const int e = *rc::gen::inRange(-5000, 5000);
  const hp got = reference::detail::scaled_by_pow2(x, e);
  const hp want = ldexp(x, e);
  RC_ASSERT(got == want);
}

RC_GTEST_PROP(exact_sums, double_bits_match_the_generic_forms, ()) {
  auto bits = *rc::gen::arbitrary<std::uint64_t>();
  // Finite and nonzero without discards: ±0 becomes the smallest subnormal, an all-ones exponent
  // (inf, NaN) loses its top bit.
  if ((bits & ~(std::uint64_t{1} << 63)) == 0) bits |= 1;
  if (((bits >> 52) & 0x7ff) == 0x7ff) bits &= ~(std::uint64_t{1} << 62);
  const auto v = std::bit_cast<double>(bits);
  namespace d = reference::detail;
  RC_ASSERT(d::exponent_of(v) == d::exponent_of<double>(v));
  RC_ASSERT(d::lowest_bit(v) == d::lowest_bit<double>(v));
  const int top = d::exponent_of(v) + *rc::gen::inRange(0, 40);
  const int beta = *rc::gen::inRange(15, 27);
  double previous = 0;
  for (int t = 1; t <= 8; ++t) {
    const double taken = std::trunc(std::ldexp(v, t * beta - top));
    const double generic = taken - std::ldexp(previous, beta);
    previous = taken;
    RC_ASSERT(d::slice_of(v, top, t, beta) == generic);
  }
}

}  // namespace
}  // namespace shardcheck::props::ref::exact_sums_props
