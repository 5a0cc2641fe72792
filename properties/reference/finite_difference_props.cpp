// The oracle's gradients are tested too: reference::linear_backward (dx, dW, db) against central
// finite differences of L(x, W, b) = Σ dy ⊙ linear(x, W, b) in the high precision.
//
// L is affine along every coordinate axis (y is linear in each single x, W or b entry), so the
// central difference is exact for any step and the tolerance is made of hp roundings only:
// the evaluation bound E = gamma_{2n}(u_R)·Σ|dy|(Σ|x||W| + |b|) with n = in + tokens·out + 2
// roundings per term (the product, the in-sum, the bias, the dy product, the sum over tokens and
// outputs; doubling n also covers computing E itself, Higham Lemma 3.3), and the gradient's own
// gamma_{2(k+1)}(u_R)·Σ|a||b| for a contraction of length k. Relative to the data that is
// ~1e-30: a gradient one float64 ulp off fails, which the second property shows.
//
// The smooth path (for later, nonlinear ops) is checked on f(θ) = Σ θ_i³, whose central difference
// is exactly 3θ_i² + h²: the truncation term h²/6·max|f'''| = h² is attained.
#include "testing/gradient_check.hpp"
#include "testing/reference_gen.hpp"

#include "reference/linear/linear.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace shardcheck::props::ref::finite_difference_props {
namespace {

struct LinearCase {
  std::size_t tokens = 1, in = 1, out = 1;
  bool has_bias = false;
  Tensor<hp> x, w, b, dy;
};

template <class T>
rc::Gen<Tensor<hp>> genTensor(Shape shape) {
  return rc::gen::map(rc::gen::container<std::vector<T>>(numel(shape), genLogUniform<T>(-4, 4)),
                      [shape](const std::vector<T>& v) { return to_hp(Tensor<T>(shape, v)); });
}

template <class T>
rc::Gen<LinearCase> genLinearCase() {
  return rc::gen::exec([] {
    LinearCase c;
    c.tokens = *uniform<std::size_t>(1, 4);
    c.in = *uniform<std::size_t>(1, 4);
    c.out = *uniform<std::size_t>(1, 4);
    c.has_bias = *uniform(0, 1) == 1;
    c.x = *genTensor<T>({c.tokens, c.in});
    c.w = *genTensor<T>({c.out, c.in});
    if (c.has_bias) c.b = *genTensor<T>({c.out});
    c.dy = *genTensor<T>({c.tokens, c.out});
    return c;
  });
}

// θ = (x, W, b) flattened, in that order; the analytic gradient is (dx, dW, db) likewise.
Tensor<hp> pack(const LinearCase& c) {
  std::vector<hp> v = c.x.values();
  v.insert(v.end(), c.w.values().begin(), c.w.values().end());
  v.insert(v.end(), c.b.values().begin(), c.b.values().end());
  const std::size_t n = v.size();  // not in the call: argument evaluation order is unspecified
  return Tensor<hp>({n}, std::move(v));
}

Evaluation<hp> loss(const LinearCase& c, const Tensor<hp>& theta) {
  using std::abs;
  const std::size_t nx = c.tokens * c.in, nw = c.out * c.in;
  const auto* t = theta.data();
  const Tensor<hp> x({c.tokens, c.in}, std::vector<hp>(t, t + nx));
  const Tensor<hp> w({c.out, c.in}, std::vector<hp>(t + nx, t + nx + nw));
  const Tensor<hp> b = c.has_bias
                           ? Tensor<hp>({c.out}, std::vector<hp>(t + nx + nw, t + nx + nw + c.out))
                           : Tensor<hp>();
  const auto y = reference::linear<hp>(x, w, b);
  hp value(0), abs_terms(0);
  for (std::size_t e = 0; e < y.value.size(); ++e) {
    value += c.dy[e] * y.value[e];
    hp a = y.terms[e].abs_sum;  // one part
    if (const hp* bias = y.bias_of(e)) a += abs(*bias);
    abs_terms += abs(c.dy[e]) * a;
  }
  const std::size_t n = c.in + c.tokens * c.out + 2;
  return {value, gamma<hp>(2 * n, u_hp) * abs_terms};
}

Gradient analytic_gradient(const LinearCase& c) {
  const auto g = reference::linear_backward<hp>(c.x, c.w, c.has_bias, c.dy);
  Gradient out;
  for (const auto* con : {&g.dx, &g.dw, &g.db}) {
    const hp gam = gamma<hp>(2 * (con->length() + 1), u_hp);
    for (std::size_t e = 0; e < con->value.size(); ++e) {
      out.value.push_back(con->value[e]);
      out.error.push_back(gam * con->terms[e].abs_sum);
    }
  }
  return out;
}

std::string describe(const LinearCase& c) {
  return "x " + format_shape(c.x.shape()) + ", W " + format_shape(c.w.shape()) +
         (c.has_bias ? ", b " + format_shape(c.b.shape()) : ", no bias");
}

template <class T>
void fd_case(bool perturb) {
  const LinearCase c = *genLinearCase<T>();
  RC_TAG(type_name(T{}));
  const auto fd =
      central_difference_gradient<hp>([&](const Tensor<hp>& th) { return loss(c, th); }, pack(c));
  Gradient g = analytic_gradient(c);
  RC_ASSERT(g.value.size() == fd.estimate.size());
  if (!perturb) {
    const auto v = require_gradient_matches(fd, g, describe(c), "(x, W, b)");
    RC_TAG(v.worst_ratio < hp(1e-3)  ? "worst ratio < 1e-3"
           : v.worst_ratio < hp(0.1) ? "worst ratio 1e-3..0.1"
                                     : "worst ratio >= 0.1");
    return;
  }
  // Teeth: one gradient entry off by one float64 ulp of its scale Σ|a||b| must be caught.
  const std::size_t j = *uniform<std::size_t>(0, g.value.size() - 1);
  const hp scale = g.error[j] / gamma<hp>(2, u_hp);  // ≥ Σ|a||b| of that entry
  g.value[j] += reference::pow2<hp>(-52) * scale;
  const auto v = compare_gradient<hp>(fd, g.value, g.error);
  RC_ASSERT(!v.pass);
  RC_ASSERT(v.worst == j);
}

RC_GTEST_PROP(finite_difference, linear_backward_matches_central_differences_float64, ()) {
  fd_case<double>(false);
}
RC_GTEST_PROP(finite_difference, linear_backward_matches_central_differences_bfloat16, ()) {
  fd_case<bfloat16>(false);
}
RC_GTEST_PROP(finite_difference, a_gradient_one_float64_ulp_off_is_caught, ()) {
  fd_case<double>(true);
}

// ---------------------------------------------------------------- the smooth path

RC_GTEST_PROP(finite_difference, smooth_truncation_term_holds_and_is_attained, ()) {
  const auto v = *rc::gen::container<std::vector<double>>(*uniform<std::size_t>(1, 6),
                                                          genLogUniform<double>(-8, 8));
  const Tensor<hp> theta = to_hp(Tensor<double>({v.size()}, v));
  auto cube_sum = [n = v.size()](const Tensor<hp>& th) {
    using std::abs;
    hp s(0), a(0);
    for (const hp& t : th.values()) {
      s += t * t * t;
      a += abs(t * t * t);
    }
    return Evaluation<hp>{s, gamma<hp>(2 * (n + 2), u_hp) * a};
  };
  reference::FdOptions<hp> opt;
  opt.smoothness = reference::Smoothness::smooth;
  opt.third_derivative_bound = [](std::size_t, const hp&) { return hp(6); };
  const auto fd = central_difference_gradient<hp>(cube_sum, theta, opt);
  std::vector<hp> g, err;
  for (const hp& t : theta.values()) {
    g.push_back(3 * t * t);
    err.push_back(gamma<hp>(4, u_hp) * 3 * t * t);
  }
  const auto verdict = compare_gradient<hp>(fd, g, err);
  RC_ASSERT(verdict.pass);
  // d_i − 3θ_i² is h_i² exactly, up to the rounding part of the tolerance: the truncation term
  // h²/6·max|f'''| is attained, not just an upper bound.
  for (std::size_t i = 0; i < g.size(); ++i) {
    using std::abs;
    const hp h2 = fd.step[i] * fd.step[i];
    RC_ASSERT(abs(fd.estimate[i] - g[i] - h2) <= fd.tolerance[i] - h2 + err[i]);
  }
}

TEST(finite_difference, refuses_smooth_without_a_third_derivative_bound) {
  reference::FdOptions<hp> opt;
  opt.smoothness = reference::Smoothness::smooth;
  const Tensor<hp> theta({1}, {hp(1)});
  EXPECT_THROW((void)central_difference_gradient<hp>(
                   [](const Tensor<hp>&) { return Evaluation<hp>{}; }, theta, opt),
               std::invalid_argument);
}

TEST(finite_difference, refuses_a_step_that_is_not_exact) {
  // 1 + 2^-112 has 113 significant bits: 1 + 2^-112 ± 1 needs 114.
  const Tensor<hp> theta({1}, {hp(1) + reference::pow2<hp>(-112)});
  EXPECT_THROW((void)central_difference_gradient<hp>(
                   [](const Tensor<hp>&) { return Evaluation<hp>{}; }, theta),
               std::invalid_argument);
}

}  // namespace
}  // namespace shardcheck::props::ref::finite_difference_props
