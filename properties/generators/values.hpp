// Value generators of our own. RapidCheck's arbitrary<double> never yields subnormals, NaN,
// +-Inf, -0.0 or tiny magnitudes, and inRange<double> only integer-spaced values (docs/building.md,
// "Traps on this toolchain"), so every floating-point value here is built from a sign, an exponent
// and mantissa bits drawn with RapidCheck's integer generators: exactly representable in T by
// construction, and the same on every platform for the same seed (no std:: distributions).
//
// Profiles:
//   unit          |v| in [2^-8, 2), random mantissa, random sign: ordinary activations
//   wide          log-uniform exponent over [subnormal min of T, 2^max_exp]: every binade,
//                 subnormals and tiny magnitudes included, sign random
//   cancellation  like unit, but the second half of each row repeats the first half negated,
//                 with a few elements perturbed: sums that cancel to a small remainder
//   special       unit values with NaN, +-Inf, -0.0 and subnormals at chosen rates
// The caller picks max_exp so that no correct computation overflows (see each suite).
#pragma once

#include "runtime/dtype.hpp"
#include "tensor/tensor.hpp"

#include <rapidcheck.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace shardcheck::gen {

enum class Profile { unit, wide, cancellation, special };

inline std::string to_string(Profile p) {
  switch (p) {
    case Profile::unit: return "unit";
    case Profile::wide: return "wide";
    case Profile::cancellation: return "cancellation";
    case Profile::special: return "special";
  }
  return "?";
}

// A finite value of T: (-1)^s * (1 + m/2^(d-1)) * 2^e for a normal e, or m * 2^(emin-(d-1))
// below it. d = digits of T (implicit bit included).
template <Element T>
T make_value(bool negative, int exponent, std::uint64_t mantissa_bits) {
  constexpr int d = std::numeric_limits<T>::digits;
  constexpr int emin = std::numeric_limits<T>::min_exponent - 1;  // min normal = 2^emin
  const std::uint64_t m = mantissa_bits & ((std::uint64_t{1} << (d - 1)) - 1);
  double v = 0;
  if (exponent >= emin) {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -(d - 1)), exponent);
  } else {
    // Subnormal of T: a multiple of its smallest step, clamped into T's subnormal range.
    const int shift = std::min(emin - exponent, d - 1);
    v = std::ldexp(static_cast<double>((m >> shift) | 1), emin - (d - 1));
  }
  return static_cast<T>(negative ? -v : v);  // exact: v is representable in T
}

// A suite's max_exp for each element type: the largest binade it draws values of T up to, so
// that no correct computation of its cases overflows T (each suite says why its figures hold).
struct MaxExp {
  int float16, bfloat16, float32, float64;

  template <Element T>
  constexpr int of() const {
    if constexpr (std::is_same_v<T, shardcheck::float16>) return float16;
    else if constexpr (std::is_same_v<T, shardcheck::bfloat16>) return bfloat16;
    else if constexpr (std::is_same_v<T, float>) return float32;
    else return float64;
  }
};

template <Element T>
rc::Gen<T> genValue(Profile profile, int max_exp) {
  constexpr int d = std::numeric_limits<T>::digits;
  constexpr int emin = std::numeric_limits<T>::min_exponent - 1;
  const int lo_exp = profile == Profile::wide ? emin - (d - 1) : -8;
  const int hi_exp = profile == Profile::wide ? max_exp : 0;
  auto finite =
      rc::gen::apply([](bool neg, int e, std::uint64_t m) { return make_value<T>(neg, e, m); },
                     rc::gen::arbitrary<bool>(), rc::gen::inRange(lo_exp, hi_exp + 1),
                     rc::gen::inRange<std::uint64_t>(0, std::uint64_t{1} << (d - 1)));
  if (profile != Profile::special) return finite;
  const T inf = std::numeric_limits<T>::infinity();
  return rc::gen::weightedOneOf<T>({
      {20, finite},
      {2, rc::gen::just(std::numeric_limits<T>::quiet_NaN())},
      {1, rc::gen::just(inf)},
      {1, rc::gen::just(static_cast<T>(-inf))},
      {2, rc::gen::just(static_cast<T>(-0.0))},
      {2, rc::gen::apply([](bool neg, std::uint64_t m) { return make_value<T>(neg, emin - 1, m); },
                         rc::gen::arbitrary<bool>(),
                         rc::gen::inRange<std::uint64_t>(0, std::uint64_t{1} << (d - 1)))},
  });
}

// A tensor of `shape` (row-major) under `profile`. Cancellation acts along the last axis.
template <Element T>
rc::Gen<Tensor<T>> genTensor(Shape shape, Profile profile, int max_exp) {
  const std::size_t n = numel(shape);
  const Profile base = profile == Profile::cancellation ? Profile::unit : profile;
  auto values = rc::gen::container<std::vector<T>>(n, genValue<T>(base, max_exp));
  if (profile != Profile::cancellation) {
    return rc::gen::map(values,
                        [shape](std::vector<T> v) { return Tensor<T>(shape, std::move(v)); });
  }
  return rc::gen::map(values, [shape](std::vector<T> v) {
    const std::size_t cols = shape.empty() ? 1 : shape.back();
    const std::size_t rows = cols == 0 ? 0 : v.size() / cols;
    const std::size_t half = cols / 2;
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t j = 0; j < half; ++j) {
        // Mirror negated, except every fifth element, which keeps its own value: the row sums
        // to a small remainder of the same order as a few elements.
        if (j % 5 != 4) v[r * cols + half + j] = static_cast<T>(-v[r * cols + j]);
      }
    }
    return Tensor<T>(shape, std::move(v));
  });
}

// A profile, mostly unit, often wide or cancelling.
inline rc::Gen<Profile> genProfile() {
  return rc::gen::weightedElement<Profile>(
      {{4, Profile::unit}, {2, Profile::wide}, {2, Profile::cancellation}});
}

}  // namespace shardcheck::gen
