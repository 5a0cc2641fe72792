// The MLP's activation functions in the high-precision scalar R, their derivatives, and the
// constants the bound (mlp_bound.hpp, docs/mlp.md "The bound") takes from them:
//   gelu(x)      = x·Φ(x) = x/2·(1 + erf(x/√2))                   (Hendrycks & Gimpel 2016)
//   gelu'(x)     = Φ(x) + x·φ(x)             gelu''(x) = φ(x)·(2 − x²)
//   gelu_tanh(x) = x/2·(1 + tanh(c·(x + 0.044715·x³))), c = √(2/π)  (ibid., the approximation)
//   silu(x)      = x·σ(x)                    silu'(x) = σ(x)·(1 + x·σ(−x))  (Shazeer 2020)
// The functions are the exact ones (exact constants 1/√2, √(2/π), 0.044715), evaluated in R;
// the library evaluates the same formulas in acc_t<T> (lib/ops/mlp/mlp.hpp), and the bound
// charges that evaluation's error (eval_error below).
#pragma once

#include "ops/mlp/mlp_config.hpp"
#include "reference/format.hpp"
#include "reference/precision.hpp"

#include <boost/math/special_functions/erf.hpp>

#include <cmath>
#include <type_traits>

namespace shardcheck::reference {

// The activation is the library's own data type, shardcheck::Activation
// (lib/ops/mlp/mlp_config.hpp: declared once for the library, the reference and the suite); the
// functions it names are written here independently of the library's.

namespace detail {
// erf in R: libquadmath's erfq for float128 (this Boost's erf(float128) does not compile),
// Boost.Math's erf otherwise.
template <class R>
R erf_of(const R& x) {
#if SHARDCHECK_REFERENCE_HP_IS_FLOAT128
  if constexpr (std::is_same_v<R, boost::multiprecision::float128>) {
    return R(erfq(x.backend().value()));
  } else
#endif
  {
    return boost::math::erf(x);
  }
}
template <class R>
R pi_of() {
  using std::atan;
  return 4 * atan(R(1));
}
}  // namespace detail

template <class R = hp>
R gelu(const R& x) {
  using std::sqrt;
  return x / 2 * (1 + detail::erf_of<R>(x / sqrt(R(2))));
}
template <class R = hp>
R gelu_grad(const R& x) {
  using std::exp;
  using std::sqrt;
  const R pi = detail::pi_of<R>();
  return (1 + detail::erf_of<R>(x / sqrt(R(2)))) / 2 + x * exp(-x * x / 2) / sqrt(2 * pi);
}
template <class R = hp>
R gelu_tanh(const R& x) {
  using std::sqrt;
  using std::tanh;
  const R pi = detail::pi_of<R>();
  const R k = R(44715) / R(1000000);
  return x / 2 * (1 + tanh(sqrt(2 / pi) * (x + k * x * x * x)));
}
template <class R = hp>
R gelu_tanh_grad(const R& x) {
  using std::sqrt;
  using std::tanh;
  const R pi = detail::pi_of<R>();
  const R k = R(44715) / R(1000000), c = sqrt(2 / pi);
  const R t = tanh(c * (x + k * x * x * x));
  return (1 + t) / 2 + x / 2 * (1 - t * t) * c * (1 + 3 * k * x * x);
}
template <class R = hp>
R silu(const R& x) {
  using std::exp;
  return x / (1 + exp(-x));
}
template <class R = hp>
R silu_grad(const R& x) {
  using std::exp;
  return (1 + x / (1 + exp(x))) / (1 + exp(-x));
}

// f and f' of gelu or gelu_tanh (swiglu's gate is silu).
template <class R = hp>
R activation_value(Activation act, const R& x) {
  return act == Activation::gelu ? gelu(x) : act == Activation::gelu_tanh ? gelu_tanh(x) : silu(x);
}
template <class R = hp>
R activation_grad(Activation act, const R& x) {
  return act == Activation::gelu        ? gelu_grad(x)
         : act == Activation::gelu_tanh ? gelu_tanh_grad(x)
                                        : silu_grad(x);
}

// S2 ≥ sup_x |f''(x)| of the elementwise function (gelu, gelu_tanh, or swiglu's silu):
// gelu'' = φ(x)(2 − x²) peaks at x = 0 with 2φ(0) = 0.7979; gelu_tanh'' at x = 0 with
// c = √(2/π) = 0.7979; silu'' = σ'(x)(2 + x(1 − 2σ(x))) at x = 0 with 1/2. Rounded up; checked on
// a dense grid by properties/suites/mlp/mlp_reference_props.cpp.
template <class R = hp>
R second_derivative_bound(Activation act) {
  return act == Activation::swiglu ? R(1) / 2 : R(81) / 100;
}

// The library's evaluation in A of f and f' (mlp.hpp's formulas, libm's erf, tanh and exp within
// 1, 2 and 1 ulp), against the exact functions; docs/mlp.md counts the roundings:
//   value  |f_A(x) − f(x)| ≤ cv·u_A·|x| + 4·eta_A·(1 + |x|)   cv = 4 (gelu), 6 (gelu_tanh),
//          6 (silu, where |silu(x)| ≤ |x| stands for its relative 6·u_A·|silu(x)|)
//   grad   |f'_A(x) − f'(x)| ≤ u_A·(cg + cx·|x|·(1 + 0.135·x²)) + 4·eta_A·(1 + |x|)
//          cg = 6, cx = 0 (gelu); cg = 9, cx = 7 (gelu_tanh: 1 − t² cancels when t → ±1);
//          cg = 9, cx = 0 (silu)
// m is an upper bound on |x| (the computed input is unknown: |x̂| ≤ |x| + its error).
template <class R = hp>
R value_eval_error(Activation act, const R& m, const Format& acc) {
  const R u = unit_roundoff<R>(acc), eta = smallest_subnormal<R>(acc);
  const R cv = act == Activation::gelu ? R(4) : R(6);
  return cv * u * m + 4 * eta * (1 + m);
}
template <class R = hp>
R grad_eval_error(Activation act, const R& m, const Format& acc) {
  const R u = unit_roundoff<R>(acc), eta = smallest_subnormal<R>(acc);
  const R cg = act == Activation::gelu ? R(6) : R(9);
  const R cx = act == Activation::gelu_tanh ? R(7) : R(0);
  return u * (cg + cx * m * (1 + R(135) / 1000 * m * m)) + 4 * eta * (1 + m);
}

}  // namespace shardcheck::reference
