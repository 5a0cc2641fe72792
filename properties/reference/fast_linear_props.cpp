// The reference linear layer's two paths (reference/linear/linear.hpp, contraction_path.hpp) on
// the same generated cases: y = x·Wᵀ + b with row-parallel parts of `in`, and the backward's dx
// (column-parallel parts of `out`), dW and db, each computed with ContractionPath::fast and
// ContractionPath::plain from the same storage-typed tensors (float64/float32/bfloat16/float16,
// tokens, out in 0..9, in in 0..300, 1..8 parts with empty ones, product_gen.hpp's value mixes).
//
// Asserted, per term (part r of length k_r, g = gamma_{k_r−1}(2^-113)): both paths are within
// g·Σ|ab| of the exact values (dot.hpp's contract for plain, fast_contraction.hpp's claim, which
// fast_contraction_props.cpp checks against 256-bit sums, for fast), and Σ|ab| ≤ abs_sum_plain
// /(1 − g), so
//   |partial_fast − partial_plain| ≤ 2g·abs_sum_plain/(1 − g), and abs_sum_fast, an upper bound
//   (AbsSums::upper_bound), within [abs_sum_plain·(1 − g), (1 + 4·gamma_{k_r}(2^-53))·
//   abs_sum_plain/(1 − g) + 16·k·m²·2^-1016] (m: the largest finite magnitude of x, w, dy);
// k_r ≤ 1 therefore means bit-identical. Non-finite terms (±inf/NaN operands) come from
// contract_parts on both paths: the same bits. Values: each path sums its p parts and the bias
// with finish_values (p roundings, within gamma_p·(Σ_r |partial_r| + |b|)), so they differ by at
// most the parts' differences plus twice that. db is the same plain sum on both paths:
// bit-identical. Shapes, lengths and part lengths are equal.
// The planted bug (fast_linear.mutant_is_caught): a "fast" side whose a operand loses its last
// slice (FastOptions::mutant_drop_last_slice) makes the property fail.
#include "reference/product_gen.hpp"
#include "testing/reference_gen.hpp"

#include "reference/contraction/contract.hpp"
#include "reference/linear/linear.hpp"
#include "reference/mlp/mlp.hpp"
#include "reference/mlp/mlp_bound.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace shardcheck::props::ref::fast_linear_props {
namespace {

using reference::Contraction;
using reference::ContractionPath;
using reference::hp;

template <class T>
struct LinearCase {
  std::size_t tokens = 0, in = 0, out = 0;
  Tensor<T> x, w, b, dy;
  std::vector<std::size_t> in_parts, out_parts;
  std::string describe() const {
    auto list = [](const std::vector<std::size_t>& v) {
      std::string s = "[";
      for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
      return s + "]";
    };
    return "tokens " + std::to_string(tokens) + ", in " + std::to_string(in) + ", out " +
           std::to_string(out) + (b.empty() ? ", no bias" : ", bias") + ", in_parts " +
           list(in_parts) + ", out_parts " + list(out_parts);
  }
};

template <class T>
LinearCase<T> draw_case(Mix mix) {
  LinearCase<T> c;
  c.tokens = *uniform<std::size_t>(0, 9);
  c.out = *uniform<std::size_t>(0, 9);
  c.in = *genInnerLength();
  auto draw = [&](std::vector<std::size_t> shape) {
    std::size_t n = 1;
    for (std::size_t d : shape) n *= d;
    return Tensor<T>(std::move(shape), *rc::gen::container<std::vector<T>>(n, genEntry<T>(mix)));
  };
  c.x = draw({c.tokens, c.in});
  c.w = draw({c.out, c.in});
  c.dy = draw({c.tokens, c.out});
  if (*rc::gen::arbitrary<bool>()) c.b = draw({c.out});
  if (mix == Mix::cancellation && c.in >= 2) {
    // x's second half of `in` is the first with the sign flipped and w's repeats its first, so
    // y's exact sums cancel; one entry of x is perturbed so they are not all zero.
    const std::size_t h = c.in / 2;
    for (std::size_t t = 0; t < c.tokens; ++t) {
      for (std::size_t q = 0; q < h; ++q) c.x(t, h + q) = T(-static_cast<double>(c.x(t, q)));
    }
    for (std::size_t o = 0; o < c.out; ++o) {
      for (std::size_t q = 0; q < h; ++q) c.w(o, h + q) = c.w(o, q);
    }
    if (c.tokens > 0) c.x(0, c.in - 1) = *genLogUniform<T>(-30, -10);
  }
  if (mix == Mix::special) {
    const T inf = std::numeric_limits<T>::infinity();
    for (Tensor<T>* t : {&c.x, &c.w, &c.dy}) {
      if (!t->empty() && *uniform(0, 2) == 0) {
        (*t)[*uniform<std::size_t>(0, t->size() - 1)] =
            *rc::gen::element(inf, -inf, std::numeric_limits<T>::quiet_NaN());
      }
    }
  }
  auto parts = [](std::size_t k) {
    return draw_parts(k, *rc::gen::weightedOneOf<int>({{2, rc::gen::just(1)}, {5, uniform(2, 8)}}));
  };
  c.in_parts = parts(c.in);
  c.out_parts = parts(c.out);
  return c;
}

bool same_bits(const hp& x, const hp& y) {
  using boost::multiprecision::isnan;
  using boost::multiprecision::signbit;
  return (isnan(x) && isnan(y)) || (x == y && signbit(x) == signbit(y));
}

bool finite(const hp& v) {
  using boost::multiprecision::isfinite;
  return isfinite(v);
}

// "" when `fast` is within the stated accuracy of `plain` (the header's assertions), else the
// first violation.
// `products_round`: an operand holds R values, so the plain path's products round too and both
// paths are within gamma_{k_r} (not gamma_{k_r−1}) of the exact value.
// The fast side's abs sums are upper bounds (AbsSums::upper_bound, fast_contraction.hpp): at
// least Σ|ab| ≥ abs_sum_plain·(1 − g), at most (1 + 4·gamma_{k_r}(2^-53))·Σ|ab| plus
// k_r·2^(E_i + F_j − 1016), which `abs_floor` bounds for every element (the caller's).
std::string differs(const char* what, const Contraction<hp>& fast, const Contraction<hp>& plain,
                    bool products_round = false, const hp& abs_floor = hp(0)) {
  const std::string name(what);
  if (fast.value.shape() != plain.value.shape() || fast.part_lengths != plain.part_lengths ||
      fast.terms.size() != plain.terms.size() || fast.operands != plain.operands) {
    return name + ": the shapes, parts or operands differ";
  }
  const hp u = reference::pow2<hp>(-113);
  const std::size_t n = plain.value.size(), p = plain.parts();
  for (std::size_t r = 0; r < p; ++r) {
    const std::size_t kr = plain.part_lengths[r];
    const std::size_t c = products_round ? kr : (kr == 0 ? 0 : kr - 1);
    const hp g = c == 0 ? hp(0) : reference::gamma<hp>(c, u);
    for (std::size_t e = 0; e < n; ++e) {
      const auto& f = fast.terms[r * n + e];
      const auto& q = plain.terms[r * n + e];
      const std::string at = name + " element " + std::to_string(e) + " part " + std::to_string(r) +
                             " (length " + std::to_string(kr) + ")";
      if (f.length != q.length) return at + ": lengths differ";
      if (!finite(q.partial) || !finite(q.abs_sum) || !finite(f.partial) || !finite(f.abs_sum)) {
        if (!same_bits(f.partial, q.partial) || !same_bits(f.abs_sum, q.abs_sum)) {
          return at + ": non-finite terms differ: fast " + show_hp(f.partial) + " plain " +
                 show_hp(q.partial);
        }
        continue;
      }
      using std::abs;
      const hp tol = 2 * g * q.abs_sum / (1 - g);
      const hp g53 = kr == 0 ? hp(0) : reference::gamma<hp>(kr, reference::pow2<hp>(-53));
      const hp high = (1 + 4 * g53) * q.abs_sum / (1 - g) + abs_floor;
      if (abs(f.partial - q.partial) > tol || f.abs_sum < q.abs_sum * (1 - g) || f.abs_sum > high) {
        return at + ": partial fast " + show_hp(f.partial) + " plain " + show_hp(q.partial) +
               ", allowed " + show_hp(tol) + "; abs_sum fast " + show_hp(f.abs_sum) + " plain " +
               show_hp(q.abs_sum) + ", allowed [" + show_hp(q.abs_sum * (1 - g)) + ", " +
               show_hp(high) + "]";
      }
    }
  }
  const hp g_sum = p == 0 ? hp(0) : reference::gamma<hp>(p, u);
  for (std::size_t e = 0; e < n; ++e) {
    using std::abs;
    const hp vf = fast.value[e], vp = plain.value[e];
    if (!finite(vf) || !finite(vp)) {
      if (!same_bits(vf, vp)) return name + " value " + std::to_string(e) + ": non-finite differ";
      continue;
    }
    // Each path rounds its own sum of the bias and the p partials: |v − (b + Σ partials)| ≤
    // gamma_p·(|b| + Σ |partials|) for each, so the bias counts once per path (twice here); the
    // exact sums differ by at most `diff`. (Counting |b| once was an error: at seed 141205601, a
    // 10,000-case run, b = 48 and a partial of −0.026 rounded to adjacent 113-bit numbers on the
    // two paths, one ulp = 6.2e-33 apart, over the 4.8e-33 that allowed.)
    const hp* b = plain.bias_of(e);
    hp diff(0), magnitude(b == nullptr ? hp(0) : hp(2 * abs(*b)));
    for (std::size_t r = 0; r < p; ++r) {
      diff += abs(fast.terms[r * n + e].partial - plain.terms[r * n + e].partial);
      magnitude += abs(plain.terms[r * n + e].partial) + abs(fast.terms[r * n + e].partial);
    }
    const hp tol = (diff + g_sum * magnitude) * (1 + g_sum);
    if (abs(vf - vp) > tol) {
      return name + " value " + std::to_string(e) + ": fast " + show_hp(vf) + " plain " +
             show_hp(vp) + ", allowed " + show_hp(tol);
    }
  }
  return "";
}

// The fast side's results: y and the backward.
struct FastResult {
  Contraction<hp> y;
  reference::LinearBackward<hp> g;
};
template <class T>
using FastSide = std::function<FastResult(const LinearCase<T>&)>;

// The plain path against `fast` on one generated case.
template <class T>
void check_paths(const FastSide<T>& fast) {
  const Mix mix = draw_mix();
  const LinearCase<T> c = draw_case<T>(mix);
  RC_TAG(type_name(T{}), mix_name(mix));
  const auto y_plain = reference::linear<hp>(c.x, c.w, c.b, c.in_parts, ContractionPath::plain);
  const auto g_plain = reference::linear_backward<hp>(c.x, c.w, !c.b.empty(), c.dy, c.out_parts,
                                                      ContractionPath::plain);
  const FastResult f = fast(c);
  // 4·k·2^(E_i + F_j − 1016) ≤ 16·k·m²·2^-1016, m the largest finite magnitude of x, w and dy.
  hp m(0);
  for (const Tensor<T>* t : {&c.x, &c.w, &c.dy}) {
    for (const T& v : t->values()) {
      const hp h(static_cast<double>(v));
      if (finite(h)) m = std::max(m, hp(abs(h)));
    }
  }
  const hp floor = 16 * hp(std::max({c.tokens, c.in, c.out})) * m * m * reference::pow2<hp>(-1016);
  std::string v = differs("y", f.y, y_plain, false, floor);
  if (v.empty()) v = differs("dx", f.g.dx, g_plain.dx, false, floor);
  if (v.empty()) v = differs("dw", f.g.dw, g_plain.dw, false, floor);
  if (v.empty() && !c.b.empty()) {
    for (std::size_t e = 0; e < g_plain.db.value.size(); ++e) {
      if (!same_bits(f.g.db.value[e], g_plain.db.value[e])) v = "db differs";
    }
  }
  if (!v.empty()) {
    RC_FAIL(std::string(type_name(T{})) + " " + mix_name(mix) + ", " + c.describe() + ": " + v);
  }
}

// The backward by linear.hpp's fast path.
template <class T>
reference::LinearBackward<hp> fast_backward(const LinearCase<T>& c) {
  return reference::linear_backward<hp>(c.x, c.w, !c.b.empty(), c.dy, c.out_parts,
                                        ContractionPath::fast);
}

template <class T>
void linear_paths_agree() {
  check_paths<T>([](const LinearCase<T>& c) {
    return FastResult{reference::linear<hp>(c.x, c.w, c.b, c.in_parts, ContractionPath::fast),
                      fast_backward(c)};
  });
}

RC_GTEST_PROP(fast_linear, paths_agree_float64, ()) { linear_paths_agree<double>(); }
RC_GTEST_PROP(fast_linear, paths_agree_float32, ()) { linear_paths_agree<float>(); }
RC_GTEST_PROP(fast_linear, paths_agree_bfloat16, ()) { linear_paths_agree<bfloat16>(); }
RC_GTEST_PROP(fast_linear, paths_agree_float16, ()) { linear_paths_agree<float16>(); }

// The R-typed entry points (hp tensors holding storage values: converted to doubles, fast) and
// an hp operand that is not a double (the plain path, bit-identical) agree with the above.
// R-typed entry points: exact doubles are sliced as doubles; an operand holding a value that is
// not a double (1/3 in hp) is sliced as R values, within the same bound of the plain path; a line
// holding a value outside double's exponent range takes contract_parts itself (bit-identical).
TEST(fast_linear, hp_inputs_are_sliced_as_r_values) {
  const Tensor<hp> x({2, 3}, {hp(1), hp(-2), hp(0.5), hp(3), hp(0.25), hp(-1)});
  const Tensor<hp> w({2, 3}, {hp(0.5), hp(1), hp(-4), hp(2), hp(1), hp(0.125)});
  const auto f = reference::linear<hp>(x, w, Tensor<hp>(), {}, ContractionPath::fast);
  const auto p = reference::linear<hp>(x, w, Tensor<hp>(), {}, ContractionPath::plain);
  EXPECT_EQ(differs("y", f, p), "");
  Tensor<hp> x3 = x;
  x3[0] = hp(1) / 3;  // not a double: x is sliced as R values
  const auto f3 = reference::linear<hp>(x3, w, Tensor<hp>(), {}, ContractionPath::fast);
  const auto p3 = reference::linear<hp>(x3, w, Tensor<hp>(), {}, ContractionPath::plain);
  EXPECT_EQ(differs("y with x[0] = 1/3", f3, p3, true), "");
  Tensor<hp> x4 = x3;
  using std::ldexp;
  x4[1] = ldexp(hp(1) / 3, -1150);  // row 0 outside double's range: contract_parts
  const auto f4 = reference::linear<hp>(x4, w, Tensor<hp>(), {}, ContractionPath::fast);
  const auto p4 = reference::linear<hp>(x4, w, Tensor<hp>(), {}, ContractionPath::plain);
  EXPECT_EQ(differs("y with x[1] = 2^-1150/3", f4, p4, true), "");
  for (std::size_t j = 0; j < 2; ++j) {  // y[0, j]: one part, terms[j]
    EXPECT_TRUE(same_bits(f4.terms[j].partial, p4.terms[j].partial)) << j;
    EXPECT_TRUE(same_bits(f4.terms[j].abs_sum, p4.terms[j].abs_sum)) << j;
  }
}

TEST(fast_linear, mutant_is_caught) {
  using reference::fast_contraction_of;
  using reference::to_double_matrix;
  reference::FastOptions mutant;
  mutant.mutant_drop_last_slice = true;
  const FastSide<double> fast = [&](const LinearCase<double>& c) {
    FastResult out{
        fast_contraction_of<hp>(to_double_matrix(c.x), reference::row_major_layout(c.tokens, c.in),
                                to_double_matrix(c.w), reference::transposed_layout(c.in, c.out),
                                c.in_parts, mutant),
        fast_backward(c)};
    if (!c.b.empty()) {
      out.y.bias = reference::to_hp<hp>(c.b);
      reference::finish_values(out.y);
    }
    return out;
  };
  const bool passed = rc::check("linear's fast forward with a's last slice dropped",
                                [&] { check_paths<double>(fast); });
  EXPECT_FALSE(passed) << "the paths' comparison did not notice a dropped slice: it cannot fail";
}

// The MLP's products of storage values (h = x·w_upᵀ + b_up, da = dy·w_down) on both paths:
// each within gamma_{k+1}(2^-113)·(Σ|ab| + |b|) of the exact value (plain adds the bias first,
// fast after the sum), so within twice that of each other; the rest is computed from them. The
// entries span 2^-60..2^61, so the sums round in hp; a wrong layout or a lost bias fails by far.
TEST(fast_linear, mlp_products_agree) {
  SplitMix64 rng{20240611};
  auto tensor = [&](Shape shape) {
    Tensor<hp> t(std::move(shape));
    for (std::size_t e = 0; e < t.size(); ++e) {
      const double m = 1.0 + static_cast<double>(rng.below(1U << 20U)) / (1U << 20U);
      t[e] = hp(std::ldexp(rng.below(2) == 0 ? m : -m, static_cast<int>(rng.below(121)) - 60));
    }
    return t;
  };
  const std::size_t n = 3, hid = 7, f = 4;
  const Tensor<hp> x = tensor({n, hid}), w_up = tensor({2 * f, hid}), b_up = tensor({2 * f}),
                   w_down = tensor({hid, f}), b_down = tensor({hid}), dy = tensor({n, hid});
  const auto act = Activation::swiglu;
  const auto ff = reference::mlp<hp>(x, w_up, b_up, w_down, b_down, act, ContractionPath::fast);
  const auto fp = reference::mlp<hp>(x, w_up, b_up, w_down, b_down, act, ContractionPath::plain);
  const auto gf =
      reference::mlp_backward<hp>(x, w_up, w_down, ff, true, dy, act, ContractionPath::fast);
  const auto gp =
      reference::mlp_backward<hp>(x, w_up, w_down, fp, true, dy, act, ContractionPath::plain);
  const hp u = reference::pow2<hp>(-113);
  using std::abs;
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t j = 0; j < 2 * f; ++j) {
      hp mag = abs(b_up[j]);
      for (std::size_t i = 0; i < hid; ++i) mag += abs(x(t, i) * w_up(j, i));
      EXPECT_LE(abs(ff.h(t, j) - fp.h(t, j)), 2 * reference::gamma<hp>(hid + 1, u) * mag)
          << "h(" << t << ", " << j << ")";
    }
    for (std::size_t j = 0; j < f; ++j) {
      hp mag(0);
      for (std::size_t i = 0; i < hid; ++i) mag += abs(dy(t, i) * w_down(i, j));
      EXPECT_LE(abs(gf.da(t, j) - gp.da(t, j)), 2 * reference::gamma<hp>(hid, u) * mag)
          << "da(" << t << ", " << j << ")";
    }
  }
  // The four products with an operand computed in R, from the same operands (the plain pass's a
  // and dh) on both paths: within gamma_k(2^-113)·Σ|ab| of the exact value each (differs with
  // products_round). And the fast mlp's own results are exactly those products of its own
  // operands (the fast path is what mlp and mlp_backward use).
  using reference::row_major_layout;
  using reference::transposed_layout;
  const std::size_t kf = 2 * f;
  auto both = [&](const char* what, const Tensor<hp>& a, reference::Layout la, const Tensor<hp>& b,
                  reference::Layout lb) {
    const std::vector<std::size_t> one = {la.cols};
    EXPECT_EQ(differs(what, reference::contraction<hp>(a, la, b, lb, one, ContractionPath::fast),
                      reference::contraction<hp>(a, la, b, lb, one, ContractionPath::plain), true),
              "");
  };
  both("y", fp.a, row_major_layout(n, f), w_down, transposed_layout(f, hid));
  both("dx", gp.dh, row_major_layout(n, kf), w_up, row_major_layout(kf, hid));
  both("dw_up", gp.dh, transposed_layout(kf, n), x, row_major_layout(n, hid));
  both("dw_down", dy, transposed_layout(hid, n), fp.a, row_major_layout(n, f));
  const std::size_t all_ffn[] = {kf};
  const auto dx_of_own =
      reference::contraction<hp>(gf.dh, row_major_layout(n, kf), w_up, row_major_layout(kf, hid),
                                 all_ffn, ContractionPath::fast);
  for (std::size_t e = 0; e < gf.dx.size(); ++e) {
    EXPECT_TRUE(same_bits(gf.dx[e], dx_of_own.value[e])) << "dx " << e;
  }
  // mlp_bounds on both paths, from the same values (the plain pass's), two ffn ranks: the fast
  // perturbed dots (mlp_bound.hpp's perturbed_parts) differ from the loops' by at most about
  // 4·gamma_{k+1}(2^-113)·(S + A) per part, while every bound is at least element_bound's
  // gamma(u_T)·S ≥ 2^-53·S: so the fast bound is within 2^-50 relative of the plain one (and,
  // being an upper bound of the same quantity, not below it by more than 2^-100 relative). The
  // bounds of e_h and e_da (through linear's terms) also take abs sums that are upper bounds,
  // up to 4·gamma_k(2^-53) ≤ 2^-47 above Σ|ab| for k ≤ 8 here (fast_contraction.hpp): every
  // bound is nondecreasing in them, so the fast bound may exceed the plain one by that too.
  const std::vector<std::size_t> ffn_parts = {1, 3};
  for (const auto arith :
       {reference::arithmetic_of<double>(), reference::arithmetic_of<bfloat16>()}) {
    const auto bf = reference::mlp_bounds<hp>(x, w_up, b_up, w_down, b_down, dy, act, fp, gp,
                                              ffn_parts, arith, ContractionPath::fast);
    const auto bp = reference::mlp_bounds<hp>(x, w_up, b_up, w_down, b_down, dy, act, fp, gp,
                                              ffn_parts, arith, ContractionPath::plain);
    auto close = [&](const char* what, const Tensor<hp>& f_b, const Tensor<hp>& p_b) {
      ASSERT_EQ(f_b.shape(), p_b.shape()) << what;
      for (std::size_t e = 0; e < p_b.size(); ++e) {
        EXPECT_GE(f_b[e], p_b[e] * (1 - reference::pow2<hp>(-100))) << what << " " << e;
        EXPECT_LE(f_b[e], p_b[e] * (1 + reference::pow2<hp>(-50) + reference::pow2<hp>(-47)))
            << what << " " << e;
      }
    };
    close("y", bf.y, bp.y);
    close("dx", bf.dx, bp.dx);
    close("dw_up", bf.dw_up, bp.dw_up);
    close("db_up", bf.db_up, bp.db_up);
    close("dw_down", bf.dw_down, bp.dw_down);
    close("db_down", bf.db_down, bp.db_down);
  }
}

// SHARDCHECK_REFERENCE: auto (or unset, or empty), fast and plain, anything else an error naming
// the variable, the value and what to set. And automatic's choice: the loops for the suites'
// small products, the fast path for large ones.
TEST(fast_linear, the_environment_switch) {
  EXPECT_EQ(reference::parse_contraction_path(nullptr), ContractionPath::automatic);
  EXPECT_EQ(reference::parse_contraction_path(""), ContractionPath::automatic);
  EXPECT_EQ(reference::parse_contraction_path("auto"), ContractionPath::automatic);
  EXPECT_EQ(reference::parse_contraction_path("fast"), ContractionPath::fast);
  EXPECT_EQ(reference::parse_contraction_path("plain"), ContractionPath::plain);
  using reference::resolve_path;
  const auto a = ContractionPath::automatic;
  EXPECT_EQ(resolve_path(a, 4, 4, 4, true, true), ContractionPath::plain);
  EXPECT_EQ(resolve_path(a, 16, 16, 16, true, true), ContractionPath::fast);
  EXPECT_EQ(resolve_path(a, 8, 8, 8, false, true), ContractionPath::plain);
  EXPECT_EQ(resolve_path(a, 64, 64, 64, false, false), ContractionPath::fast);
  EXPECT_EQ(resolve_path(ContractionPath::fast, 1, 1, 1, true, true), ContractionPath::fast);
  EXPECT_EQ(resolve_path(ContractionPath::plain, 999, 999, 999, true, true),
            ContractionPath::plain);
  try {
    (void)reference::parse_contraction_path("Plain ");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("SHARDCHECK_REFERENCE=\"Plain \""), std::string::npos) << m;
    EXPECT_NE(m.find("\"auto\""), std::string::npos) << m;
    EXPECT_NE(m.find("\"fast\""), std::string::npos) << m;
    EXPECT_NE(m.find("\"plain\""), std::string::npos) << m;
  }
  // The process default is what the environment says (ctest leaves it unset: automatic).
  // NOLINTNEXTLINE(concurrency-mt-unsafe): single-threaded test
  EXPECT_EQ(reference::default_contraction_path(),
            reference::parse_contraction_path(std::getenv("SHARDCHECK_REFERENCE")));
}

}  // namespace
}  // namespace shardcheck::props::ref::fast_linear_props
