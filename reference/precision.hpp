// The reference's scalar and the exact crossings between it and the storage types.
//
//   hp                 the high-precision scalar (113 significant bits); everything in reference/
//                      is templated on the scalar R and defaults to hp
//   to_hp<R>(t)        exact conversion of a double / float / bfloat16 / float16 value
//   round_to<T>(r)     r rounded DIRECTLY to T, round-to-nearest-even, with overflow to ±inf,
//                      gradual underflow and signed zero; never through float (double rounding:
//                      bf16(1 + 2^-8 + 2^-30) must be 1.0078125, and float first gives 1.0)
//   ulp_distance(a, b) how many representable T values apart a and b are (for reports)
//
// Why 113 bits: the operands are at most float64 (53 bits), so every product of two operands
// (≤ 106 bits) is exact in hp and no product can underflow (2^-2148 is far inside hp's range);
// a sum of k such products is then within gamma_{k-1}(2^-113)·Σ|x||y| of the exact value, about
// 2^-47 of a float64 ulp of Σ|x||y| for k = 10^4 (bounds.hpp adds that term, so no check assumes
// the reference is exact). Measured on the project's 2-core machine: binary128 (GCC's __float128,
// libquadmath) 10 ms for a 64×64×64 product, cpp_bin_float_quad 15 ms, mpfr_float_50 15 ms.
//
// Which type hp is: boost::multiprecision::float128 under GCC; under clang-14 (tsan and fuzz
// presets) <quadmath.h> is not on clang's include path, so hp is cpp_bin_float_quad, the same
// 113-bit binary format (IEEE binary128's precision and exponent range) in portable C++.
// Define SHARDCHECK_REFERENCE_PORTABLE_HP to choose cpp_bin_float_quad under GCC too (for the
// whole program: hp must be the same type in every translation unit).
// Every function here is a template on R; the properties run both types (portable_hp.hpp).
#pragma once

#include "reference/format.hpp"
#include "tensor/tensor.hpp"

// Only the chosen backend is included: <cpp_bin_float.hpp> alone costs ~5 s of g++ time per
// translation unit, float128's header ~3.5 s. reference/portable_hp.hpp adds the other one.
#if defined(__GNUC__) && !defined(__clang__) && !defined(SHARDCHECK_REFERENCE_PORTABLE_HP)
#define SHARDCHECK_REFERENCE_HP_IS_FLOAT128 1
#include <boost/multiprecision/float128.hpp>
#else
#define SHARDCHECK_REFERENCE_HP_IS_FLOAT128 0
#include <boost/multiprecision/cpp_bin_float.hpp>
#endif

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace shardcheck::reference {

#if SHARDCHECK_REFERENCE_HP_IS_FLOAT128
using hp = boost::multiprecision::float128;
#else
// 113 significant bits, exponent range [-16382, 16383]: binary128 in portable C++.
using hp = boost::multiprecision::cpp_bin_float_quad;
#endif

static_assert(std::numeric_limits<hp>::digits >= 100, "the reference needs >= 100 bits");

// The scalar's own unit roundoff: 2^-digits (round-to-nearest in every Boost backend used).
template <class R = hp>
R unit_roundoff_of() {
  return pow2<R>(-std::numeric_limits<R>::digits);
}

// ---------------------------------------------------------------- storage bits

template <class T>
using bits_t = std::conditional_t<sizeof(T) == 8, std::uint64_t,
                                  std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint16_t>>;

template <StorageFloat T>
bits_t<T> to_bits(T v) {
  bits_t<T> b{};
  static_assert(sizeof(b) == sizeof(v));
  std::memcpy(&b, &v, sizeof(v));
  return b;
}

template <StorageFloat T>
T from_bits(bits_t<T> b) {
  T v{};
  std::memcpy(static_cast<void*>(&v), &b,
              sizeof(v));  // Eigen's 16-bit types are trivially copyable
  return v;
}

// ---------------------------------------------------------------- T -> R, exact

// Exact: every double, float, bfloat16 and float16 value (subnormals, ±0, ±inf included) is a
// double, and every double is an R value (R has ≥ 53 bits and a wider exponent range). NaN maps
// to NaN (payloads are not carried).
template <class R = hp, StorageFloat T>
R to_hp(T v) {
  return R(static_cast<double>(v));
}

template <class R = hp, StorageFloat T>
Tensor<R> to_hp(const Tensor<T>& t) {
  if (t.ndim() == 0 && t.empty()) return {};  // a default-constructed (absent) tensor
  std::vector<R> out;
  out.reserve(t.size());
  for (const T& v : t.values()) out.push_back(to_hp<R>(v));
  return Tensor<R>(t.shape(), std::move(out));
}

// ---------------------------------------------------------------- R -> T, one rounding

// round_to<T>(x): the T value nearest to x, ties to the even significand (IEEE 754
// roundTiesToEven), computed from x itself with integer arithmetic on T's encoding: no intermediate
// format.
//   |x| ≥ Omega_T (format.hpp)  → ±inf            NaN → quiet NaN (sign and payload not kept)
//   underflow                    → a subnormal or ±0 with x's sign (gradual underflow)
// @post for finite results no T value is nearer to x; on a tie the result's last bit is 0.
template <StorageFloat T, class R>
T round_to(const R& x) {
  using std::abs;
  using std::floor;
  using std::frexp;
  using std::isinf;
  using std::isnan;
  using std::ldexp;
  using std::signbit;
  using U = bits_t<T>;
  constexpr Format f = format_of<T>();
  constexpr int p = f.precision;
  constexpr int mant_bits = p - 1;
  constexpr U sign_bit = U(U(1) << (f.exponent_bits + mant_bits));
  constexpr U inf_bits = U(U((U(1) << f.exponent_bits) - 1) << mant_bits);

  if (isnan(x)) return std::numeric_limits<T>::quiet_NaN();
  const U sign = signbit(x) ? sign_bit : U(0);
  if (isinf(x)) return from_bits<T>(U(sign | inf_bits));
  if (x == 0) return from_bits<T>(sign);

  const R a = abs(x);
  int e2 = 0;
  (void)frexp(a, &e2);   // a in [2^(e2-1), 2^e2)
  const int e = e2 - 1;  // a's binade
  if (e > f.emax) return from_bits<T>(U(sign | inf_bits));

  // Quantum (spacing of T around a): 2^(e-p+1) in the normal range, eta below it.
  const int q = (e < f.emin ? f.emin : e) - mant_bits;
  const R scaled = ldexp(a, -q);  // exact (power of two); < 2^p
  const R whole = floor(scaled);
  const R frac = scaled - whole;  // exact: the bits of `scaled` below the binary point
  auto n = static_cast<std::uint64_t>(whole);
  if (frac > R(0.5) || (frac == R(0.5) && (n & 1U) != 0)) ++n;

  int qe = q;                          // result = n·2^qe
  if (n == (std::uint64_t{1} << p)) {  // carried into the next binade
    n >>= 1;
    ++qe;
  }
  if (n >= (std::uint64_t{1} << mant_bits)) {  // normal
    const int exponent = qe + mant_bits;
    if (exponent > f.emax) return from_bits<T>(U(sign | inf_bits));
    const int biased_exponent = exponent + f.emax;  // in [1, 2·emax]
    const auto biased = static_cast<U>(biased_exponent);
    const auto mantissa = static_cast<U>(n - (std::uint64_t{1} << mant_bits));
    return from_bits<T>(U(sign | U(biased << mant_bits) | mantissa));
  }
  return from_bits<T>(U(sign | static_cast<U>(n)));  // subnormal or zero: exponent field 0
}

template <StorageFloat T, class R>
Tensor<T> round_to(const Tensor<R>& t) {
  if (t.ndim() == 0 && t.empty()) return {};
  std::vector<T> out;
  out.reserve(t.size());
  for (const R& v : t.values()) out.push_back(round_to<T>(v));
  return Tensor<T>(t.shape(), std::move(out));
}

// ---------------------------------------------------------------- ULP distance

// The encoding as an ordered integer: -0 and +0 both map to 0, and consecutive T values (across
// zero, up to ±inf) map to consecutive integers.
template <StorageFloat T>
std::int64_t ordered(T v) {
  using U = bits_t<T>;
  const U b = to_bits(v);
  constexpr U sign_bit = U(U(1) << (8 * sizeof(T) - 1));
  const auto magnitude = static_cast<std::int64_t>(static_cast<std::uint64_t>(b & U(~sign_bit)));
  return (b & sign_bit) != 0 ? -magnitude : magnitude;
}

// Number of representable T values between a and b (0 when bit-equal or ±0; 1 for neighbours;
// max finite to inf is 1). Two NaNs are 0 apart; a NaN and a number are as far apart as can be.
template <StorageFloat T>
std::uint64_t ulp_distance(T a, T b) {
  const bool na = Eigen::numext::isnan(a);
  const bool nb = Eigen::numext::isnan(b);
  if (na || nb) return na && nb ? 0 : std::numeric_limits<std::uint64_t>::max();
  const std::int64_t oa = ordered(a);
  const std::int64_t ob = ordered(b);
  // |oa - ob| < 2^64 always; compute it without signed overflow.
  return oa > ob ? static_cast<std::uint64_t>(oa) - static_cast<std::uint64_t>(ob)
                 : static_cast<std::uint64_t>(ob) - static_cast<std::uint64_t>(oa);
}

// The next representable T above / below v (towards +inf / -inf); inf and NaN are returned as
// they are. next_up(-0) = next_up(+0) = the smallest positive subnormal.
template <StorageFloat T>
T next_up(T v) {
  using U = bits_t<T>;
  if (Eigen::numext::isnan(v) || (Eigen::numext::isinf(v) && v > T(0))) return v;
  constexpr U sign_bit = U(U(1) << (8 * sizeof(T) - 1));
  const U b = to_bits(v);
  if ((b & U(~sign_bit)) == 0) return from_bits<T>(U(1));
  return from_bits<T>((b & sign_bit) != 0 ? U(b - 1) : U(b + 1));
}

template <StorageFloat T>
T next_down(T v) {
  return -next_up<T>(-v);
}

}  // namespace shardcheck::reference
