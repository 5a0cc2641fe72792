// What the finite-difference checks of the references' gradients share (properties/reference/
// and the families' reference checks): the central difference and its comparison with the
// analytic gradient (reference/finite_difference.hpp), the high-precision scalar, θ, the point
// the differences perturb, made of the inputs and back, and the two verdicts a check draws: a
// correct backward passes, a wrong one is caught wherever its error is visible.
#pragma once

#include "reference/finite_difference.hpp"
#include "reference/format.hpp"
#include "reference/precision.hpp"
#include "tensor/tensor.hpp"
#include "testing/reference_gen.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::props::ref {

using reference::central_difference_gradient;
using reference::compare_gradient;
using reference::Evaluation;
using reference::gamma;
using reference::hp;
using reference::to_hp;

// The unit roundoff of hp (113 bits).
inline const hp u_hp = reference::unit_roundoff_of<hp>();

// θ: the elements of `parts`, one part after another, as one flat tensor (the analytic gradient
// is the parts' gradients in the same order).
inline Tensor<hp> pack(std::initializer_list<const Tensor<hp>*> parts) {
  std::vector<hp> v;
  for (const auto* p : parts) v.insert(v.end(), p->values().begin(), p->values().end());
  const std::size_t n = v.size();  // not in the call: argument evaluation order is unspecified
  return Tensor<hp>({n}, std::move(v));
}

// The parts back from θ, in pack's order: copies of `like` (their shapes, an empty part empty)
// holding θ's elements.
template <std::size_t N>
std::array<Tensor<hp>, N> unpack(const Tensor<hp>& theta,
                                 const std::array<const Tensor<hp>*, N>& like) {
  std::array<Tensor<hp>, N> parts;
  std::size_t at = 0;
  for (std::size_t k = 0; k < N; ++k) {
    parts[k] = *like[k];
    std::copy_n(theta.data() + at, parts[k].size(), parts[k].data());
    at += parts[k].size();
  }
  return parts;
}

// An analytic gradient in θ's order, with each entry's own error bound (the gradient_error of
// compare_gradient).
struct Gradient {
  std::vector<hp> value, error;
};

// A correct backward's check: g within the central differences' tolerance at every coordinate
// (compare_gradient), else RC_FAIL naming the case (`what`), θ's parts (`parts`, as "(x, W, b)"),
// the worst coordinate, both values there and the ratio. Returns the verdict (for the caller's
// tags).
inline reference::FdVerdict<hp> require_gradient_matches(const reference::FdGradient<hp>& fd,
                                                         const Gradient& g, const std::string& what,
                                                         const std::string& parts) {
  auto v = compare_gradient<hp>(fd, g.value, g.error);
  if (!v.pass) {
    RC_FAIL(what + ": coordinate " + std::to_string(v.worst) + " of " + parts +
            ": central difference " + show_hp(fd.estimate[v.worst]) + ", backward " +
            show_hp(g.value[v.worst]) + ", ratio " + show_hp(v.worst_ratio));
  }
  return v;
}

// A check's teeth are tested only where they can bite: whether a wrong backward's gradient
// differs from the right one somewhere by more than 4 times what the check allows there (fd's
// tolerance plus the right gradient's error).
inline bool visibly_wrong(const reference::FdGradient<hp>& fd, const Gradient& wrong,
                          const Gradient& right) {
  using std::abs;
  for (std::size_t i = 0; i < wrong.value.size(); ++i) {
    if (abs(wrong.value[i] - right.value[i]) > 4 * (fd.tolerance[i] + right.error[i])) return true;
  }
  return false;
}

// The check of a backward on a smooth loss (the families' reference checks): central
// differences of `loss` at θ on the smooth path, M3 from `third_derivative_bound(i, h)`, against
// the analytic gradient `analytic(wrong)`. wrong = false: the backward passes
// (require_gradient_matches, `what` and `parts` naming the case and θ's parts) and the worst ratio
// is tagged. wrong = true: a backward with a term dropped fails wherever the term is visible
// (visibly_wrong against analytic(false)): the check's teeth.
template <class Loss, class ThirdDerivativeBound, class Analytic>
void check_smooth_gradient(const Tensor<hp>& theta, Loss&& loss,
                           ThirdDerivativeBound&& third_derivative_bound, Analytic&& analytic,
                           bool wrong, const std::string& what, const std::string& parts) {
  reference::FdOptions<hp> opt;
  opt.smoothness = reference::Smoothness::smooth;
  opt.third_derivative_bound = third_derivative_bound;
  const auto fd = central_difference_gradient<hp>(loss, theta, opt);
  const Gradient g = analytic(wrong);
  RC_ASSERT(g.value.size() == fd.estimate.size());
  if (!wrong) {
    const auto v = require_gradient_matches(fd, g, what, parts);
    RC_TAG(v.worst_ratio < hp(1e-3) ? "worst ratio < 1e-3" : "worst ratio >= 1e-3");
    return;
  }
  RC_PRE(visibly_wrong(fd, g, analytic(false)));
  RC_ASSERT(!compare_gradient<hp>(fd, g.value, g.error).pass);
}

}  // namespace shardcheck::props::ref
