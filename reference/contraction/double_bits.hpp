// Bit-level forms of the fast contraction's per-element steps for double operands
// (fast_contraction.hpp): the same values as the generic frexp/ldexp/trunc forms there, read
// from the IEEE binary64 fields instead (docs/fast-reference.md, "Where the time goes").
//
// A finite nonzero double is v = ±m·2^q with m an integer below 2^53: for a normal v
// (biased exponent b in [1, 2046]) m = 2^52 + fraction and q = b − 1075; for a subnormal v
// m = fraction and q = −1074.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace shardcheck::reference::detail {

struct DoubleFields {
  std::uint64_t m = 0;  // the integer significand, below 2^53
  int q = 0;            // v = ±m·2^q
  bool negative = false;
};

inline DoubleFields fields_of(double v) {
  const auto bits = std::bit_cast<std::uint64_t>(v);
  const auto biased = static_cast<int>((bits >> 52) & 0x7ff);
  const std::uint64_t fraction = bits & ((std::uint64_t{1} << 52) - 1);
  DoubleFields f;
  f.negative = (bits >> 63) != 0;
  if (biased == 0) {
    f.m = fraction;
    f.q = -1074;
  } else {
    f.m = fraction | (std::uint64_t{1} << 52);
    f.q = biased - 1075;
  }
  return f;
}

// frexp's exponent of a finite nonzero double (v = f·2^e, |f| in [0.5, 1)): the position of
// m's top bit plus q, plus one.
inline int exponent_of(double v) {
  const DoubleFields f = fields_of(v);
  return 64 - std::countl_zero(f.m) + f.q;
}

// The lowest set bit of a finite nonzero double: v is an odd multiple of 2^lowest_bit(v).
inline int lowest_bit(double v) {
  const DoubleFields f = fields_of(v);
  return f.q + std::countr_zero(f.m);
}

// Slice t ≥ 1 of a finite double v at top exponent `top` (|v| < 2^top) and beta bits:
// sign(v)·(floor(|v|·2^(t·beta − top)) mod 2^beta), the integer the generic slicing takes as
// trunc(v·2^(t·beta − top)) − 2^beta·trunc(v·2^((t−1)·beta − top)). beta ≤ 32.
inline double slice_of(double v, int top, int t, int beta) {
  if (v == 0) return 0.0;
  const DoubleFields f = fields_of(v);
  const int shift = f.q - (top - t * beta);  // |v|·2^(t·beta − top) = m·2^shift
  const std::uint64_t low_bits = (std::uint64_t{1} << beta) - 1;
  std::uint64_t w = 0;
  if (shift >= 0) {
    // (m·2^shift) mod 2^beta: the bits of m below beta − shift, moved up
    w = shift >= beta ? 0 : (f.m & ((std::uint64_t{1} << (beta - shift)) - 1)) << shift;
  } else {
    w = -shift >= 64 ? 0 : (f.m >> -shift) & low_bits;
  }
  const auto x = static_cast<double>(w);  // below 2^beta: exact
  return f.negative ? -x : x;
}

// 2^e as a double for e in [−1022, 1023] (a normal power of two).
inline double pow2_normal(int e) {
  return std::bit_cast<double>(static_cast<std::uint64_t>(e + 1023) << 52);
}

}  // namespace shardcheck::reference::detail
