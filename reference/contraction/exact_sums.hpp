// Exact integer sums of the fast contraction's slice products, and their conversion to R with
// at most one rounding (fast_contraction.hpp, step "Exact sums"; docs/fast-reference.md).
//
// The fast path's GEMMs return integers below 2^53 (exact doubles); per output element it adds
// them exactly as 128-bit integers per diagonal d of slice pairs (P_d), then combines the D
// diagonals by Horner's rule, Σ_d P_d·2^((D−1−d)·beta), EXACTLY in a wide two's-complement
// integer (WideSum: 8 limbs of 64 bits, 512 bits; the sum needs at most 53 + ceil(log2 pairs·
// chunks) + (D−1)·beta + 1 ≤ 55 + 14·26 + 1 + log2 chunks bits, checked by fits_wide_sum), and
// converts that one integer, scaled by 2^e, to R with ONE rounding (to nearest, ties to even),
// done here in integer arithmetic, so the result is the same for every R of the same precision:
//   to_r_scaled<R>(v, e) = v·2^e correctly rounded to R's digits (exact when |v| < 2^digits).
// For boost::multiprecision::float128 (GCC's __float128, IEEE binary128) the value's bits are
// assembled directly (sign, biased exponent, 112 fraction bits), which avoids libquadmath's
// software conversions and scalbnq; every other R gets R(mantissa) (exact: mantissa < 2^digits)
// scaled by ldexp (exact: a power of two inside R's range). Both give the same value.
// Range: the caller keeps v·2^e inside R's normal range (fast_contraction.hpp's
// sliceable_exponent: |e| stays below about 2500 for binary128's ±16382); outside it the
// generic ldexp path is taken, which over- or underflows as R does.
#pragma once

#include "reference/contraction/double_bits.hpp"
#include "reference/precision.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace shardcheck::reference::detail {

// Exact integer sums of exact GEMM results (each an integer below 2^53 in magnitude).
__extension__ using wide_int = __int128;
__extension__ using wide_uint = unsigned __int128;

// Whether v converts to R exactly: |v| < 2^digits (digits = 113 for hp).
template <class R>
bool fits_r(wide_int v) {
  static_assert(std::numeric_limits<R>::digits < 127);
  return (v < 0 ? -v : v) < (wide_int{1} << std::numeric_limits<R>::digits);
}

// v as R: exact when fits_r<R>(v), else one rounding (R(hi)·2^64 is exact, the sum rounds once).
template <class R>
R to_r(wide_int v) {
  const auto hi = static_cast<std::int64_t>(v >> 64);
  const auto lo = static_cast<std::uint64_t>(v);
  using std::ldexp;
  return ldexp(R(hi), 64) + R(lo);
}

// A signed integer of 512 bits, two's complement over 8 little-endian limbs: the exact Horner
// combination of the diagonals (acc = acc·2^shift + P_d).
struct WideSum {
  static constexpr int limbs = 8;
  static constexpr int bits = 64 * limbs;
  std::array<std::uint64_t, limbs> limb{};

  // acc·2^shift + p, exact while the true value stays below 2^(bits − 1) in magnitude;
  // 0 ≤ shift < 64.
  void shift_add(int shift, wide_int p) {
    if (shift > 0) {
      for (int i = limbs - 1; i > 0; --i) {
        limb[i] = (limb[i] << shift) | (limb[i - 1] >> (64 - shift));
      }
      limb[0] <<= shift;
    }
    const auto up = static_cast<wide_uint>(p);
    const std::uint64_t fill = p < 0 ? ~std::uint64_t{0} : 0;  // sign extension
    std::uint64_t carry = 0;
    for (int i = 0; i < limbs; ++i) {
      const std::uint64_t add = i == 0   ? static_cast<std::uint64_t>(up)
                                : i == 1 ? static_cast<std::uint64_t>(up >> 64)
                                         : fill;
      const std::uint64_t s = limb[i] + add;
      const std::uint64_t c1 = s < add ? 1 : 0;
      limb[i] = s + carry;
      carry = c1 + (limb[i] < carry ? 1 : 0);
    }
  }

  bool negative() const { return (limb[limbs - 1] >> 63) != 0; }

  // |value| in the same limbs (the value is above −2^(bits − 1), so its negation fits).
  std::array<std::uint64_t, limbs> magnitude() const {
    std::array<std::uint64_t, limbs> m = limb;
    if (!negative()) return m;
    std::uint64_t carry = 1;
    for (auto& x : m) {
      x = ~x + carry;
      carry = (carry != 0 && x == 0) ? 1 : 0;
    }
    return m;
  }
};

// Whether D diagonals of slice products combine exactly in a WideSum: each |P_d| < 2^bits_d and
// Σ_d |P_d|·2^((D−1−d)·beta) < 2^(bits_d + (D−1)·beta + 1), which must stay below 2^511.
inline bool fits_wide_sum(int bits_d, std::size_t diagonals, int beta) {
  return diagonals == 0 || bits_d + static_cast<int>(diagonals - 1) * beta + 1 <= WideSum::bits - 1;
}

// An unsigned magnitude mag (limbs) rounded to `digits` bits, to nearest with ties to even:
// mag = mantissa·2^shift with mantissa < 2^digits, returned with shift (so mag ≈ mantissa·2^shift;
// equal when mag has at most `digits` significant bits). digits ≤ 126.
struct Rounded {
  wide_uint mantissa = 0;
  int shift = 0;
};

template <std::size_t N>
Rounded round_to_digits(const std::array<std::uint64_t, N>& mag, int digits) {
  constexpr int n = static_cast<int>(N);
  int top = -1;  // the highest set bit's position
  for (int i = n - 1; i >= 0; --i) {
    if (mag[static_cast<std::size_t>(i)] != 0) {
      top = 64 * i + 63 - std::countl_zero(mag[static_cast<std::size_t>(i)]);
      break;
    }
  }
  if (top < 0) return {};
  auto limb_at = [&](int i) { return i < n ? mag[static_cast<std::size_t>(i)] : std::uint64_t{0}; };
  // 64 bits from bit position `from` (≥ 0; bits past the top read as 0).
  auto bits64 = [&](int from) {
    const int i = from / 64, off = from % 64;
    return off == 0 ? limb_at(i) : (limb_at(i) >> off) | (limb_at(i + 1) << (64 - off));
  };
  auto bits128 = [&](int from) {
    return (static_cast<wide_uint>(bits64(from + 64)) << 64) | bits64(from);
  };
  const int shift = top + 1 - digits;
  if (shift <= 0) return {bits128(0), 0};
  const wide_uint mantissa = bits128(shift) & ((wide_uint{1} << digits) - 1);
  const int below = shift - 1;  // the rounding bit's position; the sticky bits lie under it
  const bool half = ((limb_at(below / 64) >> (below % 64)) & 1U) != 0;
  bool sticky = (limb_at(below / 64) & ((std::uint64_t{1} << (below % 64)) - 1)) != 0;
  for (int i = 0; i < below / 64 && !sticky; ++i) sticky = limb_at(i) != 0;
  Rounded r{mantissa, shift};
  if (half && (sticky || (mantissa & 1U) != 0)) {
    ++r.mantissa;
    if (r.mantissa == (wide_uint{1} << digits)) {  // carried into a new top bit
      r.mantissa >>= 1;
      ++r.shift;
    }
  }
  return r;
}

#if SHARDCHECK_REFERENCE_HP_IS_FLOAT128
// ±mantissa·2^e as binary128 when that is a normal number (mantissa in [2^112, 2^113) after
// normalization); false otherwise (the caller takes the generic path).
inline bool binary128_from(bool negative, wide_uint mantissa, int e, hp& out) {
  if (mantissa == 0) return false;
  const int top = mantissa >> 64 != 0
                      ? 127 - std::countl_zero(static_cast<std::uint64_t>(mantissa >> 64))
                      : 63 - std::countl_zero(static_cast<std::uint64_t>(mantissa));
  if (top > 112) return false;  // more than 113 significant bits: not exact
  const int biased = top + e + 16383;
  if (biased < 1 || biased > 32766) return false;
  const wide_uint fraction = (mantissa << (112 - top)) & ((wide_uint{1} << 112) - 1);
  const wide_uint bits =
      (negative ? wide_uint{1} << 127 : 0) | (static_cast<wide_uint>(biased) << 112) | fraction;
  __float128 f;
  static_assert(sizeof f == sizeof bits);
  std::memcpy(&f, &bits, sizeof f);
  out = hp(f);
  return true;
}
#endif

// ±mantissa·2^e in R, exact (mantissa < 2^digits of R, the result inside R's range).
template <class R>
R exact_scaled(bool negative, wide_uint mantissa, int e) {
#if SHARDCHECK_REFERENCE_HP_IS_FLOAT128
  if constexpr (std::is_same_v<R, hp>) {
    R out;
    if (binary128_from(negative, mantissa, e, out)) return out;
  }
#endif
  using std::ldexp;
  const R v = ldexp(to_r<R>(static_cast<wide_int>(mantissa)), e);
  return negative ? R(-v) : v;
}

// x·y in R, exactly (two doubles: at most 106 significant bits, an exponent of at least
// −2148), from the product of their integer significands; +0 when either is zero.
template <class R>
R exact_product(double x, double y) {
  if (x == 0 || y == 0) return R(0);
  const DoubleFields fx = fields_of(x), fy = fields_of(y);
  const wide_uint m = static_cast<wide_uint>(fx.m) * fy.m;  // below 2^106
  return exact_scaled<R>(fx.negative != fy.negative, m, fx.q + fy.q);
}

// v·2^e rounded once to R (exact when |v| < 2^digits): +0 for v = 0.
template <class R>
R to_r_scaled(wide_int v, int e) {
  constexpr int digits = std::numeric_limits<R>::digits;
  static_assert(digits <= 126);
  if (v == 0) return R(0);
  const bool negative = v < 0;
  const wide_uint mag =
      negative ? wide_uint(0) - static_cast<wide_uint>(v) : static_cast<wide_uint>(v);
  const std::array<std::uint64_t, 2> limbs{static_cast<std::uint64_t>(mag),
                                           static_cast<std::uint64_t>(mag >> 64)};
  const Rounded r = round_to_digits(limbs, digits);
  return exact_scaled<R>(negative, r.mantissa, r.shift + e);
}

// The WideSum's value·2^e rounded once to R: +0 for 0.
template <class R>
R to_r_scaled(const WideSum& v, int e) {
  constexpr int digits = std::numeric_limits<R>::digits;
  static_assert(digits <= 126);
  const Rounded r = round_to_digits(v.magnitude(), digits);
  if (r.mantissa == 0) return R(0);
  return exact_scaled<R>(v.negative(), r.mantissa, r.shift + e);
}

// x·2^e for a finite R value, exact inside R's normal range: for binary128 by adding e to the
// exponent field (a normal x and a normal result), else by ldexp.
template <class R>
R scaled_by_pow2(const R& x, int e) {
#if SHARDCHECK_REFERENCE_HP_IS_FLOAT128
  if constexpr (std::is_same_v<R, hp>) {
    wide_uint bits;
    const __float128 f = x.backend().value();
    std::memcpy(&bits, &f, sizeof bits);
    const int biased = static_cast<int>((bits >> 112) & 0x7fff);
    if (biased >= 1 && biased <= 32766 && biased + e >= 1 && biased + e <= 32766) {
      bits = (bits & ~(wide_uint{0x7fff} << 112)) | (static_cast<wide_uint>(biased + e) << 112);
      __float128 g;
      std::memcpy(&g, &bits, sizeof g);
      return R(g);
    }
  }
#endif
  using std::ldexp;
  return ldexp(x, e);
}

}  // namespace shardcheck::reference::detail
