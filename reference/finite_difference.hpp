// Central finite differences in the high-precision scalar: the check of the reference's own
// gradients (the oracle is tested too). Generic over the function: linear today, softmax,
// attention and norms later.
//
//   d_i = (f(θ + h_i·e_i) − f(θ − h_i·e_i)) / (2·h_i)
//
// Error of d_i against ∂f/∂θ_i, every term bounded and summed into `tolerance`:
//   truncation   Taylor: d_i − ∂_i f = h²/6·f'''(ξ) for some ξ within h of θ_i, so
//                |·| ≤ h²/6·M3 with M3 ≥ |∂³_i f| on [θ_i − h, θ_i + h] (the caller's bound).
//                Zero when f is affine along every coordinate axis (f restricted to the line
//                θ + t·e_i is a + t·b): then d_i = b exactly for EVERY h. L = Σ dy⊙y of a
//                linear layer is such a function (y is affine in each single x, W or b entry).
//   evaluation   f is evaluated in R with |f̂ − f| ≤ E (the caller returns E with each value):
//                contributes (E⁺ + E⁻)/(2h).
//   arithmetic   θ_i ± h are exact (h is a power of two; checked with TwoSum, Knuth TAOCP
//                vol. 2 §4.2.2, and refused if not), division by 2h is exact (power of two), and
//                f̂⁺ − f̂⁻ rounds once: u_R·|f̂⁺ − f̂⁻|/(2h).
// The step: for affine-along-axes f, truncation is zero and the other terms fall as 1/h, so
// h_i = 2^⌊log2 max(|θ_i|, scale)⌋, the largest power of two that keeps θ_i ± h_i exact for a
// θ_i with ≤ digits(R) − 2 significant bits. For smooth f, h_i is that times 2^round(log2
// u_R^(1/3))
// (~2^-38 for 113 bits): balancing h²·M3 against u_R/h gives h ∝ u_R^(1/3) (Nocedal & Wright,
// Numerical Optimization, 2nd ed., §8.1).
#pragma once

#include "reference/precision.hpp"

#include <cmath>
#include <cstddef>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::reference {

// A value of f computed in R with a bound on its rounding error: |value − f(θ)| ≤ error_bound.
template <class R = hp>
struct Evaluation {
  R value{0};
  R error_bound{0};
};

enum class Smoothness {
  affine_along_axes,  // f(θ + t·e_i) is affine in t for every i: no truncation error
  smooth,             // three times differentiable: third_derivative_bound is required
};

template <class R = hp>
struct FdOptions {
  Smoothness smoothness = Smoothness::affine_along_axes;
  // M3(i, h) ≥ |∂³f/∂θ_i³| on [θ_i − h, θ_i + h] (smooth only).
  std::function<R(std::size_t i, const R& h)> third_derivative_bound;
  R scale{1};  // coordinates smaller than this in magnitude get the step of `scale`
};

template <class R = hp>
struct FdGradient {
  std::vector<R> estimate;   // d_i
  std::vector<R> tolerance;  // |d_i − ∂f/∂θ_i| ≤ tolerance_i
  std::vector<R> step;       // h_i
};

namespace detail {
// 2^⌊log2 v⌋ for v > 0.
template <class R>
R floor_pow2(const R& v) {
  using std::frexp;
  int e = 0;
  (void)frexp(v, &e);  // v in [2^(e-1), 2^e)
  return pow2<R>(e - 1);
}

// True iff a + b is exactly representable in R (TwoSum's error term is zero).
template <class R>
bool sum_is_exact(const R& a, const R& b) {
  const R s = a + b;
  const R bb = s - a;
  const R err = (a - (s - bb)) + (b - bb);
  return err == 0;
}
}  // namespace detail

// d_i and its tolerance for every coordinate of θ. F: Evaluation<R>(const Tensor<R>& θ).
// @throws std::invalid_argument when a smooth f comes without third_derivative_bound, or when
// θ_i ± h_i is not exact in R (θ_i has more than digits(R) − 2 significant bits).
template <class R = hp, class F>
FdGradient<R> central_difference_gradient(F&& f, const Tensor<R>& theta,
                                          const FdOptions<R>& options = {}) {
  using std::abs;
  const bool smooth = options.smoothness == Smoothness::smooth;
  if (smooth && !options.third_derivative_bound) {
    throw std::invalid_argument(
        "central_difference_gradient: Smoothness::smooth needs third_derivative_bound (a bound "
        "on |f'''| along each axis); for functions affine along each axis use affine_along_axes");
  }
  const R u = unit_roundoff_of<R>();
  // u^(1/3) rounded to a power of two: 2^-round(digits/3).
  const R smooth_factor = pow2<R>(-(std::numeric_limits<R>::digits + 1) / 3);
  FdGradient<R> out;
  const std::size_t n = theta.size();
  out.estimate.resize(n);
  out.tolerance.resize(n);
  out.step.resize(n);
  Tensor<R> probe = theta;
  for (std::size_t i = 0; i < n; ++i) {
    const R& ti = theta[i];
    const R mag = abs(ti) < options.scale ? options.scale : R(abs(ti));
    R h = detail::floor_pow2<R>(mag);
    if (smooth) h *= smooth_factor;
    if (!detail::sum_is_exact<R>(ti, h) || !detail::sum_is_exact<R>(ti, R(-h))) {
      throw std::invalid_argument("central_difference_gradient: θ[" + std::to_string(i) +
                                  "] ± h is not exact in R; θ's entries must have at most "
                                  "digits(R) − 2 significant bits (values of a storage type do)");
    }
    probe[i] = ti + h;
    const Evaluation<R> plus = f(std::as_const(probe));
    probe[i] = ti - h;
    const Evaluation<R> minus = f(std::as_const(probe));
    probe[i] = ti;
    const R diff = plus.value - minus.value;
    const R two_h = 2 * h;
    out.estimate[i] = diff / two_h;
    R tol = (plus.error_bound + minus.error_bound + u * abs(diff)) / two_h;
    if (smooth) tol += h * h / 6 * options.third_derivative_bound(i, h);
    // The tolerance's own evaluation (≤ 8 roundings of nonnegative numbers) and the comparison's
    // subtraction: raise by gamma_10(u_R).
    out.tolerance[i] = tol * (1 + gamma<R>(10, u));
    out.step[i] = h;
  }
  return out;
}

template <class R = hp>
struct FdVerdict {
  bool pass = true;
  std::size_t worst = 0;  // coordinate with the largest ratio
  R worst_ratio{0};       // |d_i − g_i| / (tolerance_i + gradient_error_i); pass needs ≤ 1
};

// Compares an analytic gradient g (computed in R with |g_i − ∂_i f| ≤ gradient_error_i) with the
// central differences: |d_i − g_i| ≤ tolerance_i + gradient_error_i for every i.
template <class R = hp>
FdVerdict<R> compare_gradient(const FdGradient<R>& fd, std::span<const R> gradient,
                              std::span<const R> gradient_error) {
  using std::abs;
  if (gradient.size() != fd.estimate.size() || gradient_error.size() != fd.estimate.size()) {
    throw std::invalid_argument("compare_gradient: " + std::to_string(fd.estimate.size()) +
                                " finite differences but " + std::to_string(gradient.size()) +
                                " gradient entries and " + std::to_string(gradient_error.size()) +
                                " error bounds");
  }
  FdVerdict<R> v;
  for (std::size_t i = 0; i < gradient.size(); ++i) {
    const R err = abs(fd.estimate[i] - gradient[i]);
    const R allowed = fd.tolerance[i] + gradient_error[i];
    const R ratio = err == 0       ? R(0)
                    : allowed == 0 ? std::numeric_limits<R>::infinity()
                                   : R(err / allowed);
    if (!(err <= allowed)) v.pass = false;
    if (ratio > v.worst_ratio || i == 0) {
      v.worst = i;
      v.worst_ratio = ratio;
    }
  }
  return v;
}

}  // namespace shardcheck::reference
