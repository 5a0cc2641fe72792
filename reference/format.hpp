// Binary floating-point formats as values: precision and exponent range, and the constants the
// rounding-error analysis is written in (unit roundoff u, underflow unit eta, overflow
// threshold), plus Higham's gamma_n. Runtime values, so a bound can be computed for a dtype
// known only at run time (reports, the command line) as well as for a C++ element type.
//
// Conventions (IEEE 754-2019 §3.3; Higham, Accuracy and Stability of Numerical Algorithms,
// 2nd ed., §2.1): a format with precision p (significand bits, the implicit bit included) and
// exponent range [emin, emax] represents ±m·2^(e−p+1) with integer m < 2^p and
// emin ≤ e ≤ emax, plus the subnormals ±m·2^(emin−p+1), m < 2^(p−1).
//   u       = 2^−p              unit roundoff of round-to-nearest: |RN(x) − x| ≤ u·|x| when
//                                |x| is in the normal range
//   eta     = 2^(emin−p+1)      smallest positive subnormal; the spacing of the subnormal range,
//                                so |RN(x) − x| ≤ eta/2 when |x| < 2^emin
//   lambda  = 2^emin            smallest positive normal
//   max     = (2 − 2^(1−p))·2^emax  largest finite value
//   Omega   = (2 − 2^−p)·2^emax  overflow threshold: RN(x) is finite iff |x| < Omega (the
//                                midpoint between max and 2^(emax+1) rounds to even, i.e. up)
#pragma once

#include "runtime/dtype.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace shardcheck::reference {

struct Format {
  std::string_view name;
  int precision = 0;      // p, significand bits including the implicit one
  int emin = 0;           // exponent of the smallest normal number
  int emax = 0;           // exponent of the largest binade (also the exponent bias)
  int exponent_bits = 0;  // width of the exponent field in the storage encoding

  friend constexpr bool operator==(const Format&, const Format&) = default;
};

inline constexpr Format float64_format{"float64", 53, -1022, 1023, 11};
inline constexpr Format float32_format{"float32", 24, -126, 127, 8};
inline constexpr Format bfloat16_format{"bfloat16", 8, -126, 127, 8};
inline constexpr Format float16_format{"float16", 11, -14, 15, 5};

template <class T>
inline constexpr bool is_storage_float = std::is_same_v<T, double> || std::is_same_v<T, float> ||
                                         std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

// The floating element types of the runtime (float64, float32, bfloat16, float16).
template <class T>
concept StorageFloat = is_storage_float<T>;

// A scalar the reference computes in: anything but the storage types themselves (so that
// linear(Tensor<float>...) converts to hp instead of computing in float).
template <class R>
concept HighPrecision = !is_storage_float<R>;

template <StorageFloat T>
constexpr Format format_of() {
  if constexpr (std::is_same_v<T, double>) return float64_format;
  else if constexpr (std::is_same_v<T, float>) return float32_format;
  else if constexpr (std::is_same_v<T, bfloat16>) return bfloat16_format;
  else return float16_format;
}

// @throws std::invalid_argument for the integer dtypes (no rounding error to bound).
inline Format format_of(DType t) {
  switch (t) {
    case DType::float64: return float64_format;
    case DType::float32: return float32_format;
    case DType::bfloat16: return bfloat16_format;
    case DType::float16: return float16_format;
    case DType::int32:
    case DType::int64: break;
  }
  throw std::invalid_argument("reference::format_of: dtype " + std::string(name(t)) +
                              " is not a floating-point type; integer results are compared "
                              "exactly, without a rounding-error bound");
}

// 2^e in R (exact for every e in R's exponent range).
template <class R = double>
R pow2(int e) {
  using std::ldexp;
  return ldexp(R(1), e);
}

template <class R = double>
R unit_roundoff(const Format& f) {
  return pow2<R>(-f.precision);
}
template <class R = double>
R smallest_subnormal(const Format& f) {
  return pow2<R>(f.emin - f.precision + 1);
}
template <class R = double>
R smallest_normal(const Format& f) {
  return pow2<R>(f.emin);
}
template <class R = double>
R max_finite(const Format& f) {
  return (2 - pow2<R>(1 - f.precision)) * pow2<R>(f.emax);
}

// Omega = (2 − 2^−p)·2^emax needs p + 1 bits: R must be wider than the format.
// @throws std::invalid_argument when R cannot hold it exactly.
template <class R>
R overflow_threshold(const Format& f) {
  if (std::numeric_limits<R>::digits <= f.precision) {
    throw std::invalid_argument("reference::overflow_threshold: " + std::string(f.name) +
                                "'s threshold needs " + std::to_string(f.precision + 1) +
                                " bits; evaluate it in the high-precision type");
  }
  return (2 - pow2<R>(-f.precision)) * pow2<R>(f.emax);
}

// gamma_n = n·u / (1 − n·u) (Higham §3.1, Lemma 3.1): if |δ_i| ≤ u for i = 1..n then
// Π(1 + δ_i)^±1 = 1 + θ_n with |θ_n| ≤ gamma_n, provided n·u < 1.
// Lemma 3.3 (used in bounds.hpp): gamma_j + gamma_k + gamma_j·gamma_k ≤ gamma_{j+k}.
// @throws std::domain_error when n·u ≥ 1: the bound is then vacuous, and a caller asking for it
// has a contraction too long for the accumulator's precision.
template <class R = double>
R gamma(std::size_t n, const R& u) {
  const R nu = R(n) * u;  // exact: u is a power of two and n < 2^64 fits R's significand
  if (!(nu < 1)) {
    throw std::domain_error("reference::gamma: n·u = " + std::to_string(n) + "·u >= 1 (u = 2^" +
                            std::to_string(static_cast<int>(std::ilogb(static_cast<double>(u)))) +
                            "): gamma_n is undefined, so no a-priori bound exists; shorten the "
                            "contraction or accumulate in a wider type");
  }
  return nu / (1 - nu);
}

}  // namespace shardcheck::reference
