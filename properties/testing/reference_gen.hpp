// Generators for the reference's properties: storage values built from their encoding (so every
// exponent, subnormals and ±0 included, is reachable; RapidCheck's arbitrary<double> reaches
// none of the interesting ones: docs/building.md), log-uniform magnitudes over a chosen exponent
// window, significands with a chosen number of bits (short ones make ties and exact sums), and
// a platform-independent PRNG for the summation orders the emulation draws.
// Distributions are fixed with gen::resize, so every case can reach every value whatever
// RapidCheck's size ramp is.
#pragma once

#include "reference/precision.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace shardcheck::props::ref {

using reference::bits_t;
using reference::Format;
using reference::format_of;
using reference::from_bits;
using reference::to_bits;

// Uniform in [lo, hi] whatever RapidCheck's size (shrinks towards lo).
template <class I>
rc::Gen<I> uniform(I lo, I hi) {
  return rc::gen::resize(100, rc::gen::inRange<I>(lo, static_cast<I>(hi + 1)));
}

// p part lengths that sum to k, zeros allowed: p - 1 cut points drawn uniformly in [0, k]. It
// draws, so call it inside a generator.
inline std::vector<std::size_t> draw_parts(std::size_t k, int p) {
  std::vector<std::size_t> cuts{0, k};
  for (int i = 1; i < p; ++i) cuts.push_back(*uniform<std::size_t>(0, k));
  std::sort(cuts.begin(), cuts.end());
  std::vector<std::size_t> parts;
  for (std::size_t i = 1; i < cuts.size(); ++i) parts.push_back(cuts[i] - cuts[i - 1]);
  return parts;
}

// SplitMix64 (Steele, Lea, Flood, OOPSLA 2014): the same stream on every platform, unlike the
// std:: distributions. Seeded from a generated integer, so a shrunk case replays its orders.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31U);
  }
  // In [0, n), n > 0; the modulo bias is below n/2^64, irrelevant for orders of < 10^4 items.
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

// A finite T with sign s, binade e (value in [2^e, 2^(e+1))), and `bits` significant bits
// (1..p) of which the leading one is implicit: the rest are drawn, the trailing ones zero.
// e below T's normal range gives a subnormal (fewer bits are then available).
template <class T>
T make_value(bool negative, int e, std::uint64_t mantissa_draw, int bits) {
  constexpr Format f = format_of<T>();
  using U = bits_t<T>;
  const int man_bits = f.precision - 1;
  const int lowest = f.emin - man_bits;  // exponent of the smallest subnormal
  e = std::clamp(e, lowest, f.emax);
  bits = std::clamp(bits, 1, f.precision);
  U enc = 0;
  if (e >= f.emin) {
    const int free_bits = bits - 1;
    const std::uint64_t m = free_bits == 0 ? 0
                                           : (mantissa_draw & ((std::uint64_t{1} << free_bits) - 1))
                                                 << (man_bits - free_bits);
    enc = static_cast<U>((static_cast<std::uint64_t>(e + f.emax) << man_bits) | m);
  } else {
    const int lead = e - lowest;  // position of the leading bit in the subnormal field
    const int free_bits = std::min(bits - 1, lead);
    const std::uint64_t low = free_bits == 0
                                  ? 0
                                  : (mantissa_draw & ((std::uint64_t{1} << free_bits) - 1))
                                        << (lead - free_bits);
    enc = static_cast<U>((std::uint64_t{1} << lead) | low);
  }
  if (negative) enc = static_cast<U>(enc | (U(1) << (8 * sizeof(T) - 1)));
  return from_bits<T>(enc);
}

// Lowest and highest binade of T (subnormals included).
template <class T>
constexpr int lowest_binade() {
  return format_of<T>().emin - format_of<T>().precision + 1;
}
template <class T>
constexpr int highest_binade() {
  return format_of<T>().emax;
}

// Log-uniform magnitude: binade uniform in [e_lo, e_hi] (clamped to T's range), random sign,
// significand of random length (short half the time: ties and exact sums).
// `bits` == 0: a random length; else exactly that many significant bits (e.g. p_U + 1 makes
// every value a tie when rounded to a narrower U).
template <class T>
rc::Gen<T> genLogUniform(int e_lo, int e_hi, bool signed_values = true, int bits = 0) {
  return rc::gen::exec([=] {
    const bool neg = signed_values && *uniform(0, 1) == 1;
    const int e = *uniform(std::max(e_lo, lowest_binade<T>()), std::min(e_hi, highest_binade<T>()));
    const int p = format_of<T>().precision;
    const int n = bits != 0 ? bits
                            : *rc::gen::weightedOneOf<int>(
                                  {{1, uniform(1, 3)}, {1, rc::gen::just(p)}, {1, uniform(1, p)}});
    // With a fixed length the last bit must be set, or the value is shorter than asked.
    std::uint64_t draw = *rc::gen::resize(100, rc::gen::arbitrary<std::uint64_t>());
    if (bits >= 2) draw |= 1U;
    return make_value<T>(neg, e, draw, n);
  });
}

// Any encoding at all (NaNs with payloads, infinities, subnormals, ±0).
template <class T>
rc::Gen<T> genRawBits() {
  return rc::gen::map(rc::gen::resize(100, rc::gen::arbitrary<bits_t<T>>()),
                      [](bits_t<T> b) { return from_bits<T>(b); });
}

// Finite encodings only.
template <class T>
rc::Gen<T> genFiniteBits() {
  return rc::gen::suchThat(genRawBits<T>(), [](T v) { return Eigen::numext::isfinite(v); });
}

template <class T>
std::string show(T v) {
  std::ostringstream os;
  os.precision(17);
  os << static_cast<double>(v) << " (0x" << std::hex << static_cast<std::uint64_t>(to_bits(v))
     << ")";
  return os.str();
}

template <class R>
std::string show_hp(const R& v) {
  std::ostringstream os;
  os.precision(36);
  os << v;
  return os.str();
}

inline const char* type_name(double) { return "float64"; }
inline const char* type_name(float) { return "float32"; }
inline const char* type_name(bfloat16) { return "bfloat16"; }
inline const char* type_name(float16) { return "float16"; }

}  // namespace shardcheck::props::ref
