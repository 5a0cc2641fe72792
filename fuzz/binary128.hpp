// Binary128 / ScalarOf<F>: a scalar for reference/'s templates (everything there is a template on
// the scalar R), wrapping a built-in floating type F, for the harnesses built with clang.
//
// Why: under clang the reference's hp is boost::multiprecision::cpp_bin_float_quad
// (reference/precision.hpp), whose exp and log cost about 126 µs a pair and a multiply-add
// 1.3 µs under the fuzz preset's sanitizers (measured here: 2,000 pairs, 20,000 multiply-adds);
// with it the softmax merge harness ran 38 executions per second. Binary128 is the same format,
// IEEE binary128 (113 significant bits, exponents −16382..16383), as clang's built-in __float128:
// + − × ÷ and sqrt are the compiler runtime's correctly rounded software binary128, and exp/log
// are libquadmath's expq/logq (documented as within 1 ulp; linked from GCC's libquadmath, whose
// header <quadmath.h> is not on clang's include path, so the two are declared here). Measured the
// same way: 1.7 µs a pair (74× faster), 0.05 µs a multiply-add (26×).
//
// Error bound, stated and tested: every value the softmax merge reference computes in Binary128
// differs from the one computed in cpp_bin_float_quad by no more than the sum of the two
// results' own error bounds (the reference's `err` fields, which already charge R's rounding
// at 2^−100 relative), and every bound agrees to 2^−40 relative (bounds are computed with
// cancellation; the worst gap measured is in fuzz/README.md): softmax_merge_reference_check
// (fuzz/softmax_merge_reference_check.cpp, ctest fuzz.softmax_merge.reference_check) runs both
// on every seed of fuzz/corpus/softmax_merge and on random inputs. The same program run with
// ScalarOf<double> in place of Binary128 must fail (ctest
// fuzz.softmax_merge.reference_check_rejects_double), so the comparison can fail.
#pragma once

#include <cmath>
#include <compare>
#include <concepts>
#include <limits>

extern "C" {
__float128 expq(__float128) noexcept;  // libquadmath
__float128 logq(__float128) noexcept;
__float128 ldexpq(__float128, int) noexcept;
}

namespace shardcheck::fuzz {

template <class F>
struct ScalarOf {
  F v = 0;

  ScalarOf() = default;
  // From any arithmetic value, implicitly (the reference writes R(n), 2 * u, 1 + x, x == 0).
  template <class N>
  requires std::is_arithmetic_v<N>
  // NOLINTNEXTLINE(google-explicit-constructor): a number type converts from numbers
  ScalarOf(N x) : v(static_cast<F>(x)) {}
  template <class N>
  requires std::is_arithmetic_v<N>
  explicit operator N() const { return static_cast<N>(v); }

  friend ScalarOf operator+(ScalarOf a, ScalarOf b) { return raw(a.v + b.v); }
  friend ScalarOf operator-(ScalarOf a, ScalarOf b) { return raw(a.v - b.v); }
  friend ScalarOf operator*(ScalarOf a, ScalarOf b) { return raw(a.v * b.v); }
  friend ScalarOf operator/(ScalarOf a, ScalarOf b) { return raw(a.v / b.v); }
  friend ScalarOf operator-(ScalarOf a) { return raw(-a.v); }
  ScalarOf& operator+=(ScalarOf b) { return v += b.v, *this; }
  ScalarOf& operator-=(ScalarOf b) { return v -= b.v, *this; }
  ScalarOf& operator*=(ScalarOf b) { return v *= b.v, *this; }
  ScalarOf& operator/=(ScalarOf b) { return v /= b.v, *this; }
  friend bool operator==(ScalarOf a, ScalarOf b) { return a.v == b.v; }
  friend bool operator<(ScalarOf a, ScalarOf b) { return a.v < b.v; }
  friend bool operator>(ScalarOf a, ScalarOf b) { return a.v > b.v; }
  friend bool operator<=(ScalarOf a, ScalarOf b) { return a.v <= b.v; }
  friend bool operator>=(ScalarOf a, ScalarOf b) { return a.v >= b.v; }

  // Found by argument-dependent lookup after the reference's `using std::exp;`.
  friend ScalarOf abs(ScalarOf a) { return raw(a.v < 0 ? -a.v : a.v); }
  friend ScalarOf exp(ScalarOf a) {
    if constexpr (std::is_same_v<F, __float128>) return raw(expq(a.v));
    else return raw(std::exp(a.v));
  }
  friend ScalarOf log(ScalarOf a) {
    if constexpr (std::is_same_v<F, __float128>) return raw(logq(a.v));
    else return raw(std::log(a.v));
  }
  friend ScalarOf ldexp(ScalarOf a, int e) {
    if constexpr (std::is_same_v<F, __float128>) return raw(ldexpq(a.v, e));
    else return raw(std::ldexp(a.v, e));
  }
  friend bool isnan(ScalarOf a) { return a.v != a.v; }
  friend bool isinf(ScalarOf a) { return !isnan(a) && isnan(raw(a.v - a.v)); }
  friend bool isfinite(ScalarOf a) { return !isnan(raw(a.v - a.v)); }
  friend bool signbit(ScalarOf a) { return std::signbit(static_cast<double>(a.v)); }

 private:
  static ScalarOf raw(F x) {
    ScalarOf s;
    s.v = x;
    return s;
  }
};

using Binary128 = ScalarOf<__float128>;

}  // namespace shardcheck::fuzz

template <class F>
class std::numeric_limits<shardcheck::fuzz::ScalarOf<F>> {
  using S = shardcheck::fuzz::ScalarOf<F>;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits =
      std::is_same_v<F, __float128> ? 113 : std::numeric_limits<F>::digits;
  static S infinity() { return S(std::numeric_limits<double>::infinity()); }
  static S quiet_NaN() { return S(std::numeric_limits<double>::quiet_NaN()); }
};
