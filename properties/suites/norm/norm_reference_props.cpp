// The norm reference's gradients (reference/norm/norm.hpp: dx, dgamma, dbeta) against central
// finite differences of L(x, gamma, beta) = Σ dy ⊙ norm(x, gamma, beta) in the high precision, for
// layer_norm (with and without bias) and rms_norm.
//
// L is affine along every gamma and beta axis (no truncation term there) but not along x: the
// smooth path needs M3 ≥ |∂³L/∂x_ti³| on [x_ti − h, x_ti + h]. Along x_ti only token t's row
// moves. With a_k the centred values d_k (layer_norm) or x_k (rms_norm), s = var + eps (or
// ms + eps) and q = s^(-1/2): every a_k is affine in the coordinate with |a_k'| ≤ 1,
// s is quadratic with |s'| ≤ 4·D (D = max_k |a_k|: (2/n)·Σ_k |a_k||a_k'| and Σ_k |a_k'| ≤ 2)
// and 0 ≤ s'' ≤ 4, so
//   q''  = ¾ s^(-5/2) s'² − ½ s^(-3/2) s''                ≤ 12 D² s^(-5/2) + 2 s^(-3/2)
//   q''' = −(15/8) s^(-7/2) s'³ + (9/4) s^(-5/2) s' s''   ≤ 120 D³ s^(-7/2) + 36 D s^(-5/2)
//   (a_j q)''' = a_j q''' + 3 a_j' q''                     ≤ D |q'''| + 3 |q''|
//   M3 = Σ_j |dy_tj gamma_j| · (D |q'''| + 3 |q''|)
// evaluated with D raised to D + 2h (each a_k moves by at most h) and s lowered to
// max(eps, s(θ) − 4·D·h) (s is convex along the line, so s ≥ s(θ) + s'(θ)·τ).
// The evaluation bound E of L and the analytic gradient's own error are the reference's r
// bounds (reference/norm/norm_bound.hpp's Tracked::r), so nothing assumes R is exact.
// And the definition (norm_definition.hpp, plain loops) against the bound's propagation
// (norm_bound.hpp), which carries the values it bounds: the same values in R, bit for bit.
#include "testing/gradient_check.hpp"
#include "testing/reference_gen.hpp"

#include "reference/norm/norm.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <iostream>
#include <tuple>
#include <utility>
#include <vector>

namespace shardcheck::props::ref::norm_props {
namespace {

using reference::Propagator;
using reference::TrackedTensor;

struct NormCase {
  NormKind kind = NormKind::layer_norm;
  std::size_t tokens = 1, hidden = 1;
  hp eps{0};
  Tensor<hp> x, gamma_, beta, dy;
  bool has_beta() const { return kind == NormKind::layer_norm; }
};

const char* kind_name(NormKind k) {
  return k == NormKind::layer_norm           ? "layer_norm"
         : k == NormKind::layer_norm_no_bias ? "layer_norm_no_bias"
                                             : "rms_norm";
}

template <class T>
Tensor<hp> genTensor(Shape shape) {
  const auto v = *rc::gen::container<std::vector<T>>(numel(shape), genLogUniform<T>(-3, 2));
  return to_hp(Tensor<T>(shape, v));
}

template <class T>
NormCase genCase(std::size_t max_hidden = 5) {
  NormCase c;
  c.kind = static_cast<NormKind>(*uniform(0, 2));
  c.tokens = *uniform<std::size_t>(1, 3);
  c.hidden = *uniform<std::size_t>(1, max_hidden);
  c.eps = *uniform(0, 1) == 0 ? hp(0.0625) : to_hp(static_cast<float>(1e-5));
  c.x = genTensor<T>({c.tokens, c.hidden});
  c.gamma_ = genTensor<T>({c.hidden});
  if (c.has_beta()) c.beta = genTensor<T>({c.hidden});
  c.dy = genTensor<T>({c.tokens, c.hidden});
  return c;
}

const Propagator<hp>& propagator() {
  static const Propagator<hp> p(reference::arithmetic_of<double>());
  return p;
}

// θ = (x, gamma, beta) flattened (beta empty without it).
Tensor<hp> pack(const NormCase& c) { return ref::pack({&c.x, &c.gamma_, &c.beta}); }

Evaluation<hp> loss(const NormCase& c, const Tensor<hp>& th) {
  using std::abs;
  const auto [x, g, b] = unpack<3>(th, {&c.x, &c.gamma_, &c.beta});
  const auto f = reference::propagate_norm_forward<hp>(c.kind, TrackedTensor<hp>::exact(x), g, b,
                                                       c.eps, propagator());
  hp value(0), err(0), mag(0);
  for (std::size_t e = 0; e < c.dy.size(); ++e) {
    value += c.dy[e] * f.y.data[e].v;
    err += abs(c.dy[e]) * f.y.data[e].r;
    mag += abs(c.dy[e] * f.y.data[e].v);
  }
  // Σ dy·y in R: products and a sum of tokens·hidden terms (Higham (3.4)), doubled for E itself.
  return {value, err + gamma<hp>(2 * (c.dy.size() + 1), u_hp) * mag};
}

// M3 for coordinate i of θ (0 for gamma and beta: L is affine along them).
hp third_derivative_bound(const NormCase& c, const Tensor<hp>& theta, std::size_t i, const hp& h) {
  using std::abs;
  using std::pow;
  if (i >= c.tokens * c.hidden) return hp(0);
  const std::size_t n = c.hidden, t = i / n;
  const hp* row = theta.data() + t * n;
  hp mean(0);
  if (c.kind != NormKind::rms_norm) {
    for (std::size_t k = 0; k < n; ++k) mean += row[k];
    mean /= hp(n);
  }
  hp d0(0), s0(0);
  for (std::size_t k = 0; k < n; ++k) {
    const hp a = row[k] - mean;
    d0 = abs(a) > d0 ? abs(a) : d0;
    s0 += a * a;
  }
  s0 = s0 / hp(n) + c.eps;
  const hp D = d0 + 2 * h;
  hp s = s0 - 4 * D * h;
  if (s < c.eps) s = c.eps;
  // Raised by 2^-60 relative for the evaluation of this formula in R.
  const hp q2 = 12 * D * D * pow(s, hp(-2.5)) + 2 * pow(s, hp(-1.5));
  const hp q3 = 120 * D * D * D * pow(s, hp(-3.5)) + 36 * D * pow(s, hp(-2.5));
  hp sum(0);
  for (std::size_t j = 0; j < n; ++j) sum += abs(c.dy(t, j) * c.gamma_[j]);
  return sum * (D * q3 + 3 * q2) * (1 + reference::pow2<hp>(-60));
}

// The analytic gradient; `drop_c2` removes the xhat·c2 term of dx (a wrong backward, for the
// check's teeth).
Gradient analytic_gradient(const NormCase& c, bool drop_c2) {
  const auto& P = propagator();
  const auto x = TrackedTensor<hp>::exact(c.x);
  const auto b = reference::propagate_norm_backward<hp>(c.kind, x, c.gamma_,
                                                        TrackedTensor<hp>::exact(c.dy), c.eps, P);
  Gradient g;
  for (const auto* t : {&b.dx, &b.dgamma, &b.dbeta}) {
    for (const auto& v : t->data) {
      g.value.push_back(v.v);
      g.error.push_back(v.r);
    }
  }
  if (drop_c2) {
    // dx_i + xhat_i·c2·rstd: recompute the term in R from the forward.
    const auto f = reference::propagate_norm_forward<hp>(
        c.kind, x, c.gamma_, c.has_beta() ? c.beta : Tensor<hp>(), c.eps, P);
    for (std::size_t t = 0; t < c.tokens; ++t) {
      hp c2(0);
      for (std::size_t i = 0; i < c.hidden; ++i) {
        c2 += c.dy(t, i) * c.gamma_[i] * f.xhat(t, i).v;
      }
      c2 /= hp(c.hidden);
      for (std::size_t i = 0; i < c.hidden; ++i) {
        g.value[t * c.hidden + i] += f.xhat(t, i).v * c2 * f.rstd[t].v;
      }
    }
  }
  return g;
}

// wrong: the backward without its xhat·c2 term, which must fail wherever that term is not lost
// in the tolerance (hidden = 1 makes xhat 0 for layer_norm: nothing to drop). The term is dx's
// alone: dgamma and dbeta are the same in both gradients.
template <class T>
void fd_case(bool wrong) {
  const NormCase c = genCase<T>();
  RC_TAG(kind_name(c.kind));
  const Tensor<hp> theta = pack(c);
  const std::string what = std::string(kind_name(c.kind)) + " tokens=" + std::to_string(c.tokens) +
                           " hidden=" + std::to_string(c.hidden);
  check_smooth_gradient(
      theta, [&](const Tensor<hp>& th) { return loss(c, th); },
      [&](std::size_t i, const hp& h) { return third_derivative_bound(c, theta, i, h); },
      [&](bool drop_c2) { return analytic_gradient(c, drop_c2); }, wrong, what, "(x, gamma, beta)");
}

RC_GTEST_PROP(finite_difference, norm_backward_matches_central_differences_float64, ()) {
  fd_case<double>(false);
}
RC_GTEST_PROP(finite_difference, norm_backward_matches_central_differences_bfloat16, ()) {
  fd_case<bfloat16>(false);
}
RC_GTEST_PROP(finite_difference, norm_backward_without_its_c2_term_is_caught, ()) {
  fd_case<double>(true);
}

// ---------------------------------------------------------------- definition and bound agree

// The bound holds for the propagation's values; norm_expected reports the definition's. They are
// the same operations in the same order in R, so they must agree exactly, for every kind and any
// split of the tokens into parts.
template <class T>
void definition_matches_propagation() {
  const NormCase c = genCase<T>();
  RC_TAG(kind_name(c.kind));
  // 1 to 4 parts, empty ones included, the last taking what is left.
  const std::size_t nparts = *uniform<std::size_t>(1, 4);
  std::vector<std::size_t> parts;
  std::size_t left = c.tokens;
  for (std::size_t p = 0; p + 1 < nparts; ++p) {
    parts.push_back(*uniform<std::size_t>(0, left));
    left -= parts.back();
  }
  parts.push_back(left);
  const auto& P = propagator();
  const auto x = TrackedTensor<hp>::exact(c.x);
  const auto f = reference::norm_forward<hp>(c.kind, c.x, c.gamma_, c.beta, c.eps);
  const auto ft = reference::propagate_norm_forward<hp>(c.kind, x, c.gamma_, c.beta, c.eps, P);
  const auto b = reference::norm_backward<hp>(c.kind, c.x, c.gamma_, c.dy, c.eps, parts);
  const auto bt = reference::propagate_norm_backward<hp>(
      c.kind, x, c.gamma_, TrackedTensor<hp>::exact(c.dy), c.eps, P, parts);
  RC_ASSERT(f.y.values() == ft.y.values().values());
  RC_ASSERT(f.xhat.values() == ft.xhat.values().values());
  for (std::size_t t = 0; t < c.tokens; ++t) RC_ASSERT(f.rstd[t] == ft.rstd[t].v);
  RC_ASSERT(b.dx.values() == bt.dx.values().values());
  RC_ASSERT(b.dgamma.values() == bt.dgamma.values().values());
  RC_ASSERT(b.dbeta.empty() == bt.dbeta.empty());
  if (c.has_beta()) RC_ASSERT(b.dbeta.values() == bt.dbeta.values().values());
}

RC_GTEST_PROP(norm_reference, definition_and_bound_propagation_compute_the_same_values, ()) {
  definition_matches_propagation<double>();
}

// ---------------------------------------------------------------- soundness of the bounds

// The contract emulated independently of lib/ops: every step in A = float, the sums over the
// hidden axis in a random order (the bound claims any order), y and dx rounded to T. Each
// element must lie within reference::norm_expected's bound of the reference value under `form`:
// xhat as lib/ops/norm forms it, (x − mean)·rstd, or as PyTorch's CPU LayerNorm does,
// fma(x, rstd, −rstd·mean) (NormXhat::fused); the variance in two passes, or in one
// (NormVariance::one_pass: Σx and Σx² in the same random order, var = Σx²/n − mean·mean clamped
// at 0). With `offset`, every row of x is shifted by a common value drawn up to 2^12 (rounded to
// T), the cancellation the one-pass variance is known for. The RapidCheck tags count the rows
// whose one-pass variance rounded below 0 (clamped).
using reference::NormDx;
using reference::NormForm;
using reference::NormVariance;
using reference::NormXhat;

// A Welford state (count, mean, M2) in A, and the kernels' ways of growing and merging it
// (norm_bound.hpp, "the Welford variance"): PyTorch's RowwiseMoments and WelfordOps use the delta
// forms, Apex's cuChanOnlineSum the weighted mean and δ·δ·w_a·w_b·n.
struct WelfordState {
  float n = 0, mean = 0, m2 = 0;
};

// Welford's update by one element: m += (x − m)/n (or ·fl(1/n)), M2 += (x − m_old)·(x − m).
// `old_mean_bug`: M2 += (x − m_old)², the update written with the old mean twice (M2 grows by
// Σ δ²/k too much), the mutant welford_update_with_the_old_mean_is_caught runs.
WelfordState welford_update(WelfordState s, float x, bool reciprocal, bool old_mean_bug) {
  s.n += 1;
  const float delta = x - s.mean;
  s.mean = s.mean + (reciprocal ? delta * (1.0F / s.n) : delta / s.n);
  s.m2 = s.m2 + delta * (old_mean_bug ? delta : x - s.mean);
  return s;
}

// Chan's merge of two states, in PyTorch's form (m_a + δ·w_b; δ·δ·w_b·n_a) or Apex's
// (w_a·m_a + w_b·m_b; δ·δ·w_a·w_b·n).
WelfordState chan_merge(const WelfordState& a, const WelfordState& b, bool apex) {
  WelfordState o;
  o.n = a.n + b.n;
  const float delta = b.mean - a.mean;
  if (apex) {
    const float wa = a.n / o.n, wb = b.n / o.n;
    o.mean = wa * a.mean + wb * b.mean;
    o.m2 = a.m2 + b.m2 + delta * delta * wa * wb * o.n;
  } else {
    const float wb = b.n / o.n;
    o.mean = a.mean + wb * delta;
    o.m2 = a.m2 + (b.m2 + delta * delta * wb * a.n);
  }
  return o;
}

// A row's Welford mean and var = M2/n over a random tree: the elements dealt to 1 to n lanes
// (strided, as a vectorized kernel does, or in a random order), each lane's Welford updates in
// order, then the lanes' states merged two at a time in a random order and random forms.
std::pair<float, float> welford_row(const std::vector<float>& x, bool old_mean_bug) {
  const std::size_t n = x.size();
  const std::size_t lanes = *uniform<std::size_t>(1, n);
  const bool strided = *uniform(0, 1) == 0, reciprocal = *uniform(0, 1) == 0;
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  if (!strided) {
    for (std::size_t i = n; i-- > 1;) std::swap(order[i], order[*uniform<std::size_t>(0, i)]);
  }
  std::vector<WelfordState> states(lanes);
  for (std::size_t k = 0; k < n; ++k) {
    auto& s = states[k % lanes];
    s = welford_update(s, x[order[k]], reciprocal, old_mean_bug);
  }
  while (states.size() > 1) {
    const std::size_t i = *uniform<std::size_t>(0, states.size() - 1);
    std::size_t j = *uniform<std::size_t>(0, states.size() - 2);
    j += j >= i ? 1 : 0;
    const bool apex = *uniform(0, 1) == 0;
    states[i] = chan_merge(states[i], states[j], apex);
    states.erase(states.begin() + static_cast<std::ptrdiff_t>(j));
  }
  return {states[0].mean, states[0].m2 / static_cast<float>(n)};
}

template <class T>
void emulated_case(NormForm form, bool offset = false, bool old_mean_bug = false) {
  using A = float;
  const bool welford_tree = form.variance == NormVariance::welford;
  NormCase c0 = genCase<T>(welford_tree ? 40 : 5);  // trees of up to 40 leaves
  if (offset) {
    const hp shift = to_hp(static_cast<T>(static_cast<float>(*uniform(1, 4096)) *
                                          (*uniform(0, 1) == 0 ? 1.0F : -1.0F)));
    for (std::size_t i = 0; i < c0.x.size(); ++i) {
      c0.x[i] = to_hp(static_cast<T>(static_cast<float>(static_cast<double>(c0.x[i] + shift))));
    }
  }
  const std::size_t n = c0.hidden, tokens = c0.tokens;
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  for (std::size_t i = n; i-- > 1;) std::swap(order[i], order[*uniform<std::size_t>(0, i)]);
  auto at = [](const Tensor<hp>& t, std::size_t i) {
    return static_cast<A>(static_cast<double>(t[i]));
  };
  const A eps = static_cast<A>(static_cast<double>(c0.eps));
  NormCase c = c0;
  c.eps = to_hp(eps);  // the accumulator's eps, as the contract says
  const bool rms = c.kind == NormKind::rms_norm;
  const bool fused = form.xhat == NormXhat::fused && !rms;
  const bool one_pass = form.variance == NormVariance::one_pass && !rms;
  const bool welford = form.variance == NormVariance::welford && !rms;
  const bool affine = form.dx == NormDx::affine && !rms;
  std::vector<T> y(tokens * n), dx(tokens * n);
  bool clamped = false;
  for (std::size_t t = 0; t < tokens; ++t) {
    auto x = [&](std::size_t i) { return at(c.x, t * n + i); };
    A mean = 0, sx2 = 0;
    if (!rms) {
      for (auto i : order) {
        mean = mean + x(i);
        sx2 = sx2 + x(i) * x(i);
      }
      mean = mean / static_cast<A>(n);
    }
    A welford_var = 0;
    if (welford) {
      std::vector<A> row(n);
      for (std::size_t i = 0; i < n; ++i) row[i] = x(i);
      std::tie(mean, welford_var) = welford_row(row, old_mean_bug);
    }
    std::vector<A> d(n), xh(n), g(n);
    A sq = 0;
    for (auto i : order) {
      d[i] = x(i) - mean;
      sq = sq + d[i] * d[i];
    }
    A var = sq / static_cast<A>(n);
    if (one_pass) {
      var = sx2 / static_cast<A>(n) - mean * mean;
      clamped = clamped || var < 0;
      var = std::max(var, A(0));
    }
    if (welford) var = welford_var;
    const A rstd = A(1) / std::sqrt(var + eps);
    A sg = 0, sgx = 0;
    for (std::size_t i = 0; i < n; ++i) {
      xh[i] = fused ? std::fma(x(i), rstd, -(rstd * mean)) : d[i] * rstd;
      A v = xh[i] * at(c.gamma_, i);
      if (c.has_beta()) v = v + at(c.beta, i);
      y[t * n + i] = static_cast<T>(v);
      g[i] = at(c.dy, t * n + i) * at(c.gamma_, i);
    }
    for (auto i : order) {
      sg = sg + g[i];
      sgx = sgx + g[i] * xh[i];
    }
    const A c1 = sg / static_cast<A>(n), c2 = sgx / static_cast<A>(n);
    for (std::size_t i = 0; i < n; ++i) {
      const A base = rms ? g[i] : A(g[i] - c1);
      dx[t * n + i] = static_cast<T>((base - xh[i] * c2) * rstd);
    }
    if (affine) {  // PyTorch's CPU backward: a·g + b·x + c
      A ds = 0, db = 0;
      for (auto i : order) {  // torch's ds = Σ (dy·x)·gamma, db = Σ dy·gamma
        ds = ds + at(c.dy, t * n + i) * x(i) * at(c.gamma_, i);
        db = db + g[i];
      }
      const A scale = A(1) / static_cast<A>(n);
      const A b = (db * mean - ds) * rstd * rstd * rstd * scale;
      const A cc = -b * mean - db * rstd * scale;
      for (std::size_t i = 0; i < n; ++i)
        dx[t * n + i] = static_cast<T>(rstd * g[i] + b * x(i) + cc);
    }
  }
  const NormForm forms[] = {form};
  const auto e = reference::norm_expected<hp>(c.kind, c.x, c.gamma_, c.beta, c.dy, c.eps,
                                              reference::arithmetic_of<T>(), {}, forms);
  bool past_half = false;
  for (std::size_t i = 0; i < tokens * n; ++i) {
    using std::abs;
    const hp ey = abs(to_hp(y[i]) - e.y[i]), edx = abs(to_hp(dx[i]) - e.dx[i]);
    RC_ASSERT(ey <= e.y_bound[i]);
    RC_ASSERT(edx <= e.dx_bound[i]);
    past_half = past_half || ey > e.y_bound[i] / 2 || edx > e.dx_bound[i] / 2;
  }
  if (clamped) RC_TAG("one-pass variance clamped");
  if (one_pass && past_half) RC_TAG("one-pass error past half the bound");
  if (welford && past_half) RC_TAG("Welford error past half the bound");
}

constexpr NormForm difference_two_pass{NormXhat::difference, NormVariance::two_pass},
    fused_two_pass{NormXhat::fused, NormVariance::two_pass},
    difference_one_pass{NormXhat::difference, NormVariance::one_pass},
    fused_one_pass{NormXhat::fused, NormVariance::one_pass},
    difference_welford{NormXhat::difference, NormVariance::welford},
    fused_welford{NormXhat::fused, NormVariance::welford},
    fused_two_pass_affine{NormXhat::fused, NormVariance::two_pass, NormDx::affine},
    pytorch_cpu{NormXhat::fused, NormVariance::welford, NormDx::affine};

RC_GTEST_PROP(norm_bounds, hold_for_an_emulation_in_any_summation_order_float32, ()) {
  emulated_case<float>(difference_two_pass);
}
RC_GTEST_PROP(norm_bounds, hold_for_an_emulation_in_any_summation_order_bfloat16, ()) {
  emulated_case<bfloat16>(difference_two_pass);
}
// The fused xhat, dx centered or as PyTorch's CPU backward's a·g + b·x + c.
RC_GTEST_PROP(norm_bounds, hold_for_a_fused_xhat_emulation_float32, ()) {
  emulated_case<float>(*uniform(0, 1) == 0 ? fused_two_pass : fused_two_pass_affine);
}
RC_GTEST_PROP(norm_bounds, hold_for_a_fused_xhat_emulation_bfloat16, ()) {
  emulated_case<bfloat16>(*uniform(0, 1) == 0 ? fused_two_pass : fused_two_pass_affine);
}
// One of two forms (xhat's two orders around one variance) on unit rows or on rows shifted by up
// to 2^12.
template <class T>
void either_xhat_case(NormForm difference, NormForm fused) {
  const bool offset = *uniform(0, 1) == 1;
  emulated_case<T>(*uniform(0, 1) == 0 ? difference : fused, offset);
}
// The one-pass variance.
RC_GTEST_PROP(norm_bounds, hold_for_a_one_pass_variance_emulation_float32, ()) {
  either_xhat_case<float>(difference_one_pass, fused_one_pass);
}
RC_GTEST_PROP(norm_bounds, hold_for_a_one_pass_variance_emulation_bfloat16, ()) {
  either_xhat_case<bfloat16>(difference_one_pass, fused_one_pass);
}
// The Welford variance over a random merge tree and random forms.
RC_GTEST_PROP(norm_bounds, hold_for_a_welford_variance_emulation_float32, ()) {
  either_xhat_case<float>(difference_welford, fused_welford);
}
RC_GTEST_PROP(norm_bounds, hold_for_a_welford_variance_emulation_bfloat16, ()) {
  either_xhat_case<bfloat16>(difference_welford, fused_welford);
}
// PyTorch's CPU LayerNorm: Welford moments, the fused xhat and the affine dx together.
RC_GTEST_PROP(norm_bounds, hold_for_a_pytorch_cpu_layer_norm_emulation_float32, ()) {
  emulated_case<float>(pytorch_cpu, *uniform(0, 1) == 1);
}

// Teeth: Welford's update with the old mean in both factors of M2's term, a bug the bound must
// see (found within the 30 cases of the sanitizer builds: rows of 2 to 5 elements in one lane
// double var or more).
TEST(norm_bounds, a_welford_update_with_the_old_mean_is_caught) {
  const auto result = rc::check("Welford's M2 with the old mean twice",
                                [] { emulated_case<float>(difference_welford, false, true); });
  EXPECT_FALSE(result) << "a Welford variance with M2 += δ² passed the welford bound";
}

// norm_expected for a layer_norm row under one evaluation order, float32.
template <class A = float>
reference::NormExpected<hp> layer_norm_expected(NormForm form, const Tensor<hp>& x,
                                                const Tensor<hp>& g, const Tensor<hp>& b,
                                                const Tensor<hp>& dy, A eps) {
  const NormForm forms[] = {form};
  return reference::norm_expected<hp>(NormKind::layer_norm, x, g, b, dy, to_hp(eps),
                                      reference::arithmetic_of<A>(), {}, forms);
}

// The fused order is not the difference order's contract: at hidden = 1 (xhat exactly 0, so y is
// exactly beta) the fused xhat leaves fl(x·rstd − fl(rstd·x)) ≠ 0, outside the difference
// bound (0 there up to beta's rounding) and inside the fused one.
TEST(norm_bounds, a_fused_xhat_at_hidden_1_is_outside_the_difference_bound) {
  const float x = 0.3F, eps = 1e-5F, gamma = 1.25F, beta = -0.5F;
  const float rstd = 1.0F / std::sqrt(0.0F + eps);  // var = 0: mean = x
  const float xh = std::fma(x, rstd, -(rstd * x));
  ASSERT_NE(xh, 0.0F);  // the fma keeps the rounding error of rstd·x
  const float y = xh * gamma + beta;
  const Tensor<hp> xt({1, 1}, {to_hp(x)}), g({1}, {to_hp(gamma)}), b({1}, {to_hp(beta)}),
      dy({1, 1}, {hp(1)});
  const auto ed = layer_norm_expected(difference_two_pass, xt, g, b, dy, eps);
  const auto ef = layer_norm_expected(fused_two_pass, xt, g, b, dy, eps);
  using std::abs;
  EXPECT_GT(abs(to_hp(y) - ed.y[0]), ed.y_bound[0]);
  EXPECT_LE(abs(to_hp(y) - ef.y[0]), ef.y_bound[0]);
}

// PyTorch's CPU backward is not the centered order's contract: at hidden = 1 dx is exactly 0 and
// the centered order gives 0 (g − c1 = 0), while a·g + b·x + c with a = rstd ≈ 316 (eps = 1e-5)
// leaves the difference of (a·dy)·gamma and (dy·gamma)·a (and b = (db·mean − ds)·a³ where
// ds = (dy·x)·gamma and db·mean = (dy·gamma)·x round apart): about u·a·|g|, outside the centered
// bound (0 up to underflow) and inside the affine one.
// The worst ratio of PyTorch's CPU dx at hidden = 1 to the centered and the affine bounds, over
// 32 × 32 inputs in A (float or double), x and dy over several binades, and `inputs`.
template <class A>
std::pair<hp, hp> pytorch_cpu_dx_at_hidden_1(std::vector<std::pair<A, A>> inputs = {}) {
  const A eps = A(1e-5), gamma = A(1.25), beta = A(-0.5);
  const A a = A(1) / std::sqrt(A(0) + eps), scale = A(1);
  const auto torch_dx = [&](A x, A dy) {
    const A mean = x, ds = dy * x * gamma, db = dy * gamma;
    const A b = (db * mean - ds) * a * a * a * scale;
    const A cc = -b * mean - db * a * scale;
    return a * dy * gamma + b * x + cc;
  };
  using std::abs;
  hp worst_centered(0), worst_affine(0);
  for (int i = 0; i < 32; ++i) {
    for (int j = 0; j < 32; ++j) {
      inputs.emplace_back(A(0.3 * std::pow(1.37, j - 16)), A(0.7 * std::pow(1.21, i - 16)));
    }
  }
  for (const auto& [x, dy] : inputs) {
    const A dx = torch_dx(x, dy);
    const Tensor<hp> xt({1, 1}, {to_hp(x)}), g({1}, {to_hp(gamma)}), bt({1}, {to_hp(beta)}),
        dyt({1, 1}, {to_hp(dy)});
    const auto centered = layer_norm_expected<A>(fused_two_pass, xt, g, bt, dyt, eps);
    const auto affine = layer_norm_expected<A>(fused_two_pass_affine, xt, g, bt, dyt, eps);
    worst_centered =
        std::max(worst_centered, hp(abs(to_hp(dx) - centered.dx[0]) / centered.dx_bound[0]));
    worst_affine = std::max(worst_affine, hp(abs(to_hp(dx) - affine.dx[0]) / affine.dx_bound[0]));
  }
  return {worst_centered, worst_affine};
}

TEST(norm_bounds, a_pytorch_cpu_dx_at_hidden_1_is_outside_the_centered_bound) {
  const auto [centered32, affine32] = pytorch_cpu_dx_at_hidden_1<float>();
  // The element torch 1.13's float64 F.layer_norm gave -1.1368683772161603e-13 for
  // (examples/pytorch/norm_cases.py's hidden = 1 case, declared welford): 1.22 of the centered
  // bound; the sweep alone reaches 0.99.
  const auto [centered64, affine64] =
      pytorch_cpu_dx_at_hidden_1<double>({{0x1.0f9dc13abd350p+0, 0x1.0fb6e3e630146p+0}});
  std::cout << "PyTorch's CPU dx at hidden = 1: worst ratio to the centered bound "
            << static_cast<double>(centered32) << " (float32), " << static_cast<double>(centered64)
            << " (float64); to the affine bound " << static_cast<double>(affine32) << ", "
            << static_cast<double>(affine64) << "\n";
  EXPECT_GT(std::max(centered32, centered64), hp(1));
  EXPECT_LE(affine32, hp(1));
  EXPECT_LE(affine64, hp(1));
}

// The one-pass variance is not the two-pass contract: a float32 row 200 + 3k/16 (var ≈ 0.088)
// loses 2% of var to the cancellation of Σx²/n − mean² (each about 4e4, one rounding ~2e-3),
// and y leaves the two-pass bound by far; the one-pass bound (finite here) holds it.
TEST(norm_bounds, a_one_pass_variance_under_cancellation_is_outside_the_two_pass_bound) {
  constexpr std::size_t n = 4;
  const float xs[n] = {200.0F, 200.1875F, 200.5625F, 200.75F};
  const float gs[n] = {1.0F, -0.5F, 0.75F, 1.25F}, bs[n] = {0.25F, 0.0F, -0.125F, 0.5F};
  const float eps = 1e-5F;
  float s = 0, s2 = 0;
  for (const float v : xs) {
    s += v;
    s2 += v * v;
  }
  const float mean = s / static_cast<float>(n);
  const float var = std::max(s2 / static_cast<float>(n) - mean * mean, 0.0F);
  const float rstd = 1.0F / std::sqrt(var + eps);
  std::vector<hp> x, g, b, y;
  for (std::size_t i = 0; i < n; ++i) {
    x.push_back(to_hp(xs[i]));
    g.push_back(to_hp(gs[i]));
    b.push_back(to_hp(bs[i]));
    y.push_back(to_hp((xs[i] - mean) * rstd * gs[i] + bs[i]));
  }
  const Tensor<hp> xt({1, n}, x), gt({n}, g), bt({n}, b), dy({1, n}, {hp(1), hp(1), hp(1), hp(1)});
  const auto et = layer_norm_expected(difference_two_pass, xt, gt, bt, dy, eps);
  const auto eo = layer_norm_expected(difference_one_pass, xt, gt, bt, dy, eps);
  using std::abs;
  hp worst_two(0), worst_one(0);
  for (std::size_t i = 0; i < n; ++i) {
    const hp err = abs(y[i] - et.y[i]);
    worst_two = std::max(worst_two, hp(err / et.y_bound[i]));
    worst_one = std::max(worst_one, hp(err / eo.y_bound[i]));
  }
  std::cout << "one-pass float32 row at 200: y's ratio to the two-pass bound "
            << static_cast<double>(worst_two) << ", to the one-pass bound "
            << static_cast<double>(worst_one) << "\n";
  EXPECT_GT(worst_two, hp(1));
  EXPECT_LE(worst_one, hp(1));
  EXPECT_GT(worst_one, hp(0));  // a finite one-pass bound, not an infinite one
}

}  // namespace
}  // namespace shardcheck::props::ref::norm_props
