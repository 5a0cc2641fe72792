// The reference MLP's own checks (reference/mlp/): its gradients against central finite
// differences in high precision (reference/finite_difference.hpp) of L = Σ dy⊙y, for every
// activation, with and without bias; the derivative bounds the error bound takes from the
// activations (S2 ≥ sup|f''|, and the F3 ≥ sup|f'''| the finite differences' truncation uses) on
// a dense grid; its errors naming the shapes; and the bound under a declared 16-bit accumulator
// holding for an MLP emulated under that contract (suites/mlp/mlp_accumulate_emulation.hpp).
#include "testing/reference_gen.hpp"

#include "reference/finite_difference.hpp"
#include "reference/mlp/mlp.hpp"
#include "reference/mlp/mlp_bound.hpp"
#include "suites/mlp/mlp_accumulate_emulation.hpp"
#include "testing/ratio_summary.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <functional>
#include <utility>

namespace shardcheck::props::ref::mlp_props {
namespace {

using reference::hp;

// sup|f'''| (gelu''' = φ(x)(x³ − 4x) peaks near 0.78; the tanh form and silu''' lower), checked
// below.
hp third_derivative_bound(Activation) { return hp(1); }

Tensor<hp> eighths(Shape shape) {
  const auto v = *rc::gen::container<std::vector<int>>(numel(shape), uniform(-16, 16));
  Tensor<hp> t(std::move(shape));
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = hp(v[i]) / 8;
  return t;
}

const Activation all_activations[] = {Activation::gelu, Activation::gelu_tanh, Activation::swiglu};

TEST(mlp_reference, derivative_bounds_hold_on_a_dense_grid) {
  // f'' and f''' by central differences of the exact f' (step 2^-24: truncation ~2^-48).
  const hp h = reference::pow2<hp>(-24);
  for (Activation act : all_activations) {
    hp worst2(0), worst3(0);
    for (int i = -16 * 64; i <= 16 * 64; ++i) {
      const hp x = hp(i) / 64;
      auto fp = [&](const hp& v) { return reference::activation_grad(act, v); };
      const hp f2 = (fp(x + h) - fp(x - h)) / (2 * h);
      const hp f3 = (fp(x + h) - 2 * fp(x) + fp(x - h)) / (h * h);
      using std::abs;
      worst2 = std::max<hp>(worst2, abs(f2));
      worst3 = std::max<hp>(worst3, abs(f3));
    }
    EXPECT_LE(worst2, reference::second_derivative_bound<hp>(act)) << static_cast<int>(act);
    EXPECT_LE(worst3, third_derivative_bound(act)) << static_cast<int>(act);
    EXPECT_GT(worst2, reference::second_derivative_bound<hp>(act) * 3 / 5)  // the bound is tight
        << static_cast<int>(act);
  }
}

RC_GTEST_PROP(mlp_reference, gradients_equal_central_finite_differences, ()) {
  using std::abs;
  const Activation act = *rc::gen::elementOf(
      std::vector<Activation>(std::begin(all_activations), std::end(all_activations)));
  const std::size_t k = reference::mlp_up_rows(act);
  const std::size_t n = *uniform<std::size_t>(1, 3), hid = *uniform<std::size_t>(1, 3),
                    f = *uniform<std::size_t>(1, 3);
  const bool has_bias = *uniform(0, 1) == 1;
  const auto x = eighths({n, hid}), w_up = eighths({k * f, hid}), w_down = eighths({hid, f}),
             dy = eighths({n, hid});
  const auto b_up = has_bias ? eighths({k * f}) : Tensor<hp>(),
             b_down = has_bias ? eighths({hid}) : Tensor<hp>();
  const auto fwd = reference::mlp<hp>(x, w_up, b_up, w_down, b_down, act);
  const auto g = reference::mlp_backward<hp>(x, w_up, w_down, fwd, has_bias, dy, act);

  // L = Σ dy⊙y of the MLP with one tensor replaced, and a bound on its evaluation's error in hp
  // (a few dozen roundings and libquadmath's ≤ 1-ulp erf/tanh/exp per term: 2^-100 of Σ|terms|).
  using Params = std::array<Tensor<hp>, 5>;
  const Params p0{x, w_up, b_up, w_down, b_down};
  auto loss = [&](const Params& p) {
    const auto y = reference::mlp<hp>(p[0], p[1], p[2], p[3], p[4], act);
    hp l(0), mag(1);
    for (std::size_t t = 0; t < n; ++t) {
      for (std::size_t j = 0; j < f; ++j) {
        for (std::size_t i = 0; i < hid; ++i) mag += abs(y.a(t, j) * p[3](i, j) * dy(t, i));
      }
      for (std::size_t i = 0; i < hid; ++i) l += dy(t, i) * y.y(t, i);
    }
    return reference::Evaluation<hp>{l, reference::pow2<hp>(-100) * mag * 64};
  };
  // M3 along any coordinate: h_j moves with slope ≤ S (the largest |x|, |w_up| or 1), so
  // |d³/dt³ f(h_j)| ≤ F3·S³ and, for swiglu, |(silu(g)·u)'''| ≤ F3·S³·U + 3·S2·S³ with U ≥ |u|
  // within the step; summed over every (t, j, o) with |dy|·|w_down|, and for a w_down entry
  // (the loss is affine in w_down and b_down) that is an over-estimate.
  hp s(1), u_max(0), weight(0);
  for (const auto* t : {&x, &w_up}) {
    for (const auto& v : t->values()) s = std::max<hp>(s, abs(v));
  }
  for (const auto& v : fwd.h.values()) u_max = std::max<hp>(u_max, abs(v));
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t i = 0; i < hid; ++i) {
      for (std::size_t j = 0; j < f; ++j) weight += abs(dy(t, i) * w_down(i, j));
    }
  }
  const hp f3 = third_derivative_bound(act), s2 = reference::second_derivative_bound<hp>(act);
  hp m3 =  // not const: the bound lambda below returns its copy (performance-no-automatic-move)
      weight * (act == Activation::swiglu ? f3 * s * s * s * (u_max + s + 1) + 3 * s2 * s * s * s
                                          : f3 * s * s * s);
  reference::FdOptions<hp> opt;
  opt.smoothness = reference::Smoothness::smooth;
  opt.third_derivative_bound = [m3](std::size_t, const hp&) { return m3; };

  const Tensor<hp>* analytic[5] = {&g.dx, &g.dw_up, &g.db_up, &g.dw_down, &g.db_down};
  for (std::size_t which = 0; which < 5; ++which) {
    if (p0[which].empty()) continue;
    const auto fd = reference::central_difference_gradient<hp>(
        [&](const Tensor<hp>& theta) {
          Params p = p0;
          p[which] = theta;
          return loss(p);
        },
        p0[which], opt);
    for (std::size_t i = 0; i < p0[which].size(); ++i) {
      const hp err = abs(fd.estimate[i] - (*analytic[which])[i]);
      RC_ASSERT(err <= fd.tolerance[i] + reference::pow2<hp>(-90));
    }
  }
}

// Values k/128, |k| < 256: 8 significant bits, exact in bfloat16 and float16; their products
// are not, so 16-bit accumulation rounds every product and partial sum.
template <class T>
std::pair<Tensor<T>, Tensor<hp>> eight_bit(Shape shape) {
  const auto v = *rc::gen::container<std::vector<int>>(numel(shape), uniform(-255, 255));
  Tensor<T> t(shape);
  Tensor<hp> h(std::move(shape));
  for (std::size_t i = 0; i < t.size(); ++i) {
    t[i] = T(static_cast<float>(v[i]) / 128);
    h[i] = hp(v[i]) / 128;
  }
  return {std::move(t), std::move(h)};
}

// The largest |emulated − reference|/bound over every output of an MLP whose projections
// accumulate in T itself (16-bit accumulation), on 1 to 3 ranks of the ffn axis, judged by
// mlp_bounds with the accumulator T for the projections and float for the activation (as
// mlp_expected.cpp does for a case declaring "accumulate"), and by the default
// contract's bounds (float accumulation): {declared, default}.
template <class T>
std::pair<double, double> sixteen_bit_mlp_ratios() {
  const Activation act = *rc::gen::elementOf(
      std::vector<Activation>(std::begin(all_activations), std::end(all_activations)));
  const std::size_t k = reference::mlp_up_rows(act);
  const std::size_t n = *uniform<std::size_t>(1, 6), hid = *uniform<std::size_t>(1, 8),
                    f = *uniform<std::size_t>(1, 6);
  const auto parts = draw_parts(f, *uniform(1, 3));
  const bool has_bias = *uniform(0, 1) == 1;
  // Each tensor in T and in hp (no structured bindings: the lambdas below capture them).
  const auto xs = eight_bit<T>({n, hid}), w_ups = eight_bit<T>({k * f, hid}),
             w_downs = eight_bit<T>({hid, f}), dys = eight_bit<T>({n, hid});
  const auto b_ups = has_bias ? eight_bit<T>({k * f}) : std::pair<Tensor<T>, Tensor<hp>>();
  const auto b_downs = has_bias ? eight_bit<T>({hid}) : std::pair<Tensor<T>, Tensor<hp>>();
  const Tensor<T>&x = xs.first, &w_up = w_ups.first, &w_down = w_downs.first, &dy = dys.first,
        &b_up = b_ups.first, &b_down = b_downs.first;
  const Tensor<hp>&xh = xs.second, &w_uph = w_ups.second, &w_downh = w_downs.second,
        &dyh = dys.second, &b_uph = b_ups.second, &b_downh = b_downs.second;
  const auto got = mlp_emulation::emulate_mlp<T>(x, w_up, b_up, w_down, b_down, dy, act, parts);
  const auto fwd = reference::mlp<hp>(xh, w_uph, b_uph, w_downh, b_downh, act);
  const auto g = reference::mlp_backward<hp>(xh, w_uph, w_downh, fwd, has_bias, dyh, act);
  const auto elementwise = reference::arithmetic_of<T>();
  const auto worst = [&](const reference::Arithmetic& projections) {
    const auto b =
        reference::mlp_bounds<hp>(xh, w_uph, b_uph, w_downh, b_downh, dyh, act, fwd, g, parts,
                                  projections, reference::default_contraction_path(), elementwise);
    double r = 0;
    const auto judge = [&](const Tensor<T>& computed, const Tensor<hp>& value,
                           const Tensor<hp>& bound) {
      RC_ASSERT(computed.size() == value.size());
      for (std::size_t i = 0; i < value.size(); ++i) {
        using std::abs;
        const hp err = abs(reference::to_hp<hp>(computed[i]) - value[i]);
        r = std::max(r, err == 0 ? 0.0 : static_cast<double>(err / bound[i]));
      }
    };
    judge(got.y, fwd.y, b.y);
    judge(got.dx, g.dx, b.dx);
    judge(got.dw_up, g.dw_up, b.dw_up);
    judge(got.dw_down, g.dw_down, b.dw_down);
    if (has_bias) {
      judge(got.db_up, g.db_up, b.db_up);
      judge(got.db_down, g.db_down, b.db_down);
    }
    return r;
  };
  return {worst({elementwise.storage, elementwise.storage}), worst(elementwise)};
}

// The worst ratios, to the declared bound and to the default's, printed at the program's end.
test::RatioSummary& sixteen_bit_ratios() {
  static test::RatioSummary summary("mlp 16-bit accumulation", "declared", "default");
  return summary;
}

template <class T>
void sixteen_bit_mlp_within_declared_bound(const char* key) {
  const auto [declared, by_default] = sixteen_bit_mlp_ratios<T>();
  sixteen_bit_ratios().add(key, declared, by_default);
  RC_ASSERT(declared <= 1.0);
}

RC_GTEST_PROP(mlp_bounds, sixteen_bit_accumulation_within_the_declared_bound_bfloat16, ()) {
  sixteen_bit_mlp_within_declared_bound<bfloat16>("bfloat16");
}
RC_GTEST_PROP(mlp_bounds, sixteen_bit_accumulation_within_the_declared_bound_float16, ()) {
  sixteen_bit_mlp_within_declared_bound<float16>("float16");
}

TEST(mlp_reference, errors_name_the_shapes) {
  try {
    (void)reference::mlp<hp>(Tensor<hp>({2, 3}), Tensor<hp>({4, 3}), Tensor<hp>(),
                             Tensor<hp>({3, 4}), Tensor<hp>(), Activation::swiglu);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "reference::mlp: x [2, 3], w_up [4, 3], w_down [3, 4]: need x [tokens, H], w_up "
                 "[2·F, H], w_down [H, F]");
  }
}

}  // namespace
}  // namespace shardcheck::props::ref::mlp_props
