// The activation's arithmetic contract (lib/ops/mlp/mlp.hpp): the library's gelu, gelu_tanh and
// silu and their derivatives, evaluated in float and double, stay within the evaluation error the
// reference's bound charges for them (reference/mlp/activation.hpp: value_eval_error,
// grad_eval_error; derived in docs/mlp.md), on a sweep of 2^17 arguments over every binade that
// matters (2^-30 to 2^6, both signs) and the points where the functions bend. The worst ratio is
// reported, and must be above 1/64: the constants are not vacuous.
#include "ops/mlp/mlp.hpp"
#include "reference/mlp/activation.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <typeinfo>

namespace shardcheck {
namespace {

using reference::hp;

template <class A>
std::vector<A> arguments() {
  test::Rng rng(2024);
  std::vector<A> xs = {A(0), A(1), A(-1), A(1.4142135), A(-0.75), A(2), A(-2), A(3), A(-3)};
  for (int i = 0; i < (1 << 17); ++i) {
    const double f = static_cast<double>(rng.next() >> 11) / 9007199254740992.0;
    const int e = static_cast<int>(rng.below(37)) - 30;
    xs.push_back(static_cast<A>(((rng.next() & 1U) != 0 ? -1 : 1) * std::ldexp(1 + f, e)));
  }
  return xs;
}

template <class A>
void check_contract(Activation act, A (*value)(A), A (*grad)(A)) {
  const auto acc = reference::format_of<A>();
  double worst_value = 0, worst_grad = 0;
  for (const A x : arguments<A>()) {
    const hp xh = reference::to_hp<hp>(x);
    const hp m = xh < 0 ? hp(-xh) : xh;
    const hp ev = reference::value_eval_error<hp>(act, m, acc);
    const hp eg = reference::grad_eval_error<hp>(act, m, acc);
    using std::abs;
    const hp dv = abs(reference::to_hp<hp>(value(x)) - reference::activation_value(act, xh));
    const hp dg = abs(reference::to_hp<hp>(grad(x)) - reference::activation_grad(act, xh));
    ASSERT_LE(dv, ev) << "value at x = " << x;
    ASSERT_LE(dg, eg) << "derivative at x = " << x;
    worst_value = std::max(worst_value, static_cast<double>(dv / ev));
    worst_grad = std::max(worst_grad, static_cast<double>(dg / eg));
  }
  ::testing::Test::RecordProperty("worst_value_ratio", std::to_string(worst_value));
  ::testing::Test::RecordProperty("worst_grad_ratio", std::to_string(worst_grad));
  EXPECT_GT(worst_value, 1.0 / 64);
  EXPECT_GT(worst_grad, 1.0 / 64);
  std::printf("%s: worst value ratio %.3g, worst derivative ratio %.3g\n", typeid(A).name(),
              worst_value, worst_grad);
}

TEST(MlpActivationContract, float_evaluation_within_the_charged_error) {
  check_contract<float>(Activation::gelu, &gelu<float>, &gelu_grad<float>);
  check_contract<float>(Activation::gelu_tanh, &gelu_tanh<float>, &gelu_tanh_grad<float>);
  check_contract<float>(Activation::swiglu, &silu<float>, &silu_grad<float>);
}

TEST(MlpActivationContract, double_evaluation_within_the_charged_error) {
  check_contract<double>(Activation::gelu, &gelu<double>, &gelu_grad<double>);
  check_contract<double>(Activation::gelu_tanh, &gelu_tanh<double>, &gelu_tanh_grad<double>);
  check_contract<double>(Activation::swiglu, &silu<double>, &silu_grad<double>);
}

}  // namespace
}  // namespace shardcheck
