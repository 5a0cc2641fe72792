// The attention reference's gradients (reference/attention/attention.hpp: dq, dk, dv) against
// central finite differences of L(q, k, v) = Σ dout ⊙ attention(q, k, v).out in the high precision,
// for small shapes, every mask kind, key padding (fully padded sequences included: empty rows),
// MHA, GQA and MQA. The reference's forward on empty rows: out 0, lse −inf, zero gradients.
// And its two evaluation paths against each other (paths_case), the bound's two evaluations
// against each other (bound_paths_case), and an exp2 kernel against the exp2 contract's bound
// (exp2_case, at the end).
//
// L is affine along every v axis (no truncation term there) but not along q or k. Along one
// coordinate τ the affected rows' scores move as s_s(τ) = s_s + τ·a_s, and a row's part of L is
// f(τ) = Σ_s softmax(s + τa)_s·c_s with c_s = dout_row·v_s. Its derivatives are the joint
// cumulants of (c, a, a, ...) under the softmax distribution: f' = Cov(c, a),
// f'' = E[c̃ã²], f''' = E[c̃ã³] − 3·E[c̃ã]·E[ã²] (c̃ = c − E c, ã = a − E a), so for EVERY τ
//   |f'''| ≤ 4·range(c)·range(a)³
// (|c̃| ≤ range(c), |ã| ≤ range(a)). Along q_(b,t,i,e) one row moves with a_s = σ·k_(s,j,e);
// along k_(b,s,j,e) every row (b, i in group j, t seeing s) moves with a = σ·q_(t,i,e) at key s
// and 0 elsewhere, so range(a) = σ|q_(t,i,e)| (0 when the row sees s alone). M3 is the sum over
// the affected rows, raised by 2^-60 relative for its evaluation in R.
// The evaluation bound E of L and the analytic gradient's own error come from
// reference::attention_reference_error (the bound's analysis with u = u_R), so nothing assumes R
// is exact (E is evaluated once at θ and doubled for the probes: see loss()).
#include "testing/gradient_check.hpp"
#include "testing/reference_gen.hpp"

#include "reference/attention/attention.hpp"
#include "suites/attention/attention_accumulate_emulation.hpp"
#include "suites/attention/attention_exp2_emulation.hpp"
#include "suites/attention/attention_online_emulation.hpp"
#include "testing/ratio_summary.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::props::ref::attention_props {
namespace {

struct AttnCase {
  AttentionConfig cfg;
  std::size_t batch = 1, lq = 1, lk = 1, h = 1, g = 1, d = 1;
  Tensor<hp> q, k, v, dout;
};

const char* kind_name(MaskKind k) {
  return k == MaskKind::none ? "none" : k == MaskKind::causal ? "causal" : "explicit";
}

template <class T>
Tensor<hp> genTensor(Shape shape) {
  const auto v = *rc::gen::container<std::vector<T>>(numel(shape), genLogUniform<T>(-3, 1));
  return to_hp(Tensor<T>(shape, v));
}

// The largest Lq, Lk and d a case draws.
struct AttnSizes {
  std::size_t lq = 3, lk = 4, d = 3;
};

template <class T>
AttnCase genCase(AttnSizes most = {}) {
  AttnCase c;
  c.batch = *uniform<std::size_t>(1, 2);
  c.lq = *uniform<std::size_t>(1, most.lq);
  c.lk = *uniform<std::size_t>(1, most.lk);
  c.g = *uniform<std::size_t>(1, 2);
  c.h = c.g * *uniform<std::size_t>(1, 2);  // MHA, GQA; g = 1 with h = 2 is MQA
  c.d = *uniform<std::size_t>(1, most.d);
  auto& cfg = c.cfg;
  cfg.q_heads = c.h;
  cfg.kv_heads = c.g;
  cfg.head_dim = c.d;
  if (*uniform(0, 2) == 0) cfg.scale = 0.75;
  cfg.mask.kind = static_cast<MaskKind>(*uniform(0, 2));
  cfg.mask.q_len = c.lq;
  cfg.mask.k_len = c.lk;
  if (*uniform(0, 2) == 0) {
    for (std::size_t b = 0; b < c.batch; ++b) {
      cfg.mask.key_lengths.push_back(*uniform<std::size_t>(0, c.lk));
    }
  }
  if (cfg.mask.kind == MaskKind::explicit_mask) {
    cfg.mask.allowed = Tensor<std::uint8_t>(Shape{c.batch, c.lq, c.lk});
    for (auto& a : cfg.mask.allowed.values()) a = static_cast<std::uint8_t>(*uniform(0, 1));
  }
  c.q = genTensor<T>({c.batch, c.lq, c.h, c.d});
  c.k = genTensor<T>({c.batch, c.lk, c.g, c.d});
  c.v = genTensor<T>({c.batch, c.lk, c.g, c.d});
  c.dout = genTensor<T>({c.batch, c.lq, c.h, c.d});
  return c;
}

std::string describe(const AttnCase& c) {
  std::string s = std::string(kind_name(c.cfg.mask.kind)) + " batch " + std::to_string(c.batch) +
                  " Lq " + std::to_string(c.lq) + " Lk " + std::to_string(c.lk) + " h " +
                  std::to_string(c.h) + " g " + std::to_string(c.g) + " d " + std::to_string(c.d);
  if (!c.cfg.mask.key_lengths.empty()) {
    s += " key_lengths";
    for (auto l : c.cfg.mask.key_lengths) s += " " + std::to_string(l);
  }
  return s;
}

// θ = (q, k, v) flattened.
Tensor<hp> pack(const AttnCase& c) { return ref::pack({&c.q, &c.k, &c.v}); }

// `out_error`: reference::attention_reference_error's bound on R's error in out, evaluated at
// θ and doubled: a probe moves one coordinate by 2^-38 of its magnitude, which changes the
// bound (a continuous function of θ made of magnitudes, exp and γ terms) by far less than a
// factor 2. (Evaluating it at every probe is exact but triples the property's time.)
Evaluation<hp> loss(const AttnCase& c, const Tensor<hp>& th, const Tensor<hp>& out_error) {
  using std::abs;
  const auto [q, k, v] = unpack<3>(th, {&c.q, &c.k, &c.v});
  const auto f = reference::attention_forward(c.cfg, q, k, v);
  hp value(0), err(0), mag(0);
  for (std::size_t x = 0; x < c.dout.size(); ++x) {
    value += c.dout[x] * f.out[x];
    err += 2 * abs(c.dout[x]) * out_error[x];
    mag += abs(c.dout[x] * f.out[x]);
  }
  // Σ dout·out in R: products and a sum (Higham (3.4)), doubled for E itself.
  return {value, err + gamma<hp>(2 * (c.dout.size() + 1), u_hp) * (mag + err)};
}

// M3 for coordinate i of θ (0 along v).
hp third_derivative_bound(const AttnCase& c, std::size_t coord) {
  using std::abs;
  const std::size_t nq = c.q.size(), nk = c.k.size();
  if (coord >= nq + nk) return hp(0);
  const hp sigma = hp(reference::score_scale(c.cfg));
  const std::size_t group = c.h / c.g;
  auto qi = [&](std::size_t b, std::size_t t, std::size_t i, std::size_t e) {
    return ((b * c.lq + t) * c.h + i) * c.d + e;
  };
  auto ki = [&](std::size_t b, std::size_t s, std::size_t j, std::size_t e) {
    return ((b * c.lk + s) * c.g + j) * c.d + e;
  };
  // range over the visible keys of row (b, i, t) of c_s = dout_row·v_s, and of a_s = σ·k_se.
  auto row_ranges = [&](std::size_t b, std::size_t i, std::size_t t, std::size_t e, hp& rc,
                        hp& ra) {
    const std::size_t j = i / group;
    bool first = true;
    hp cmin(0), cmax(0), amin(0), amax(0);
    for (std::size_t s = 0; s < c.lk; ++s) {
      if (!reference::mask_visible(c.cfg.mask, b, t, s)) continue;
      hp cs(0);
      for (std::size_t x = 0; x < c.d; ++x) cs += c.dout[qi(b, t, i, x)] * c.v[ki(b, s, j, x)];
      const hp as = sigma * c.k[ki(b, s, j, e)];
      if (first) {
        cmin = cmax = cs;
        amin = amax = as;
        first = false;
      }
      cmin = cs < cmin ? cs : cmin;
      cmax = cs > cmax ? cs : cmax;
      amin = as < amin ? as : amin;
      amax = as > amax ? as : amax;
    }
    rc = cmax - cmin;
    ra = amax - amin;
    return !first;
  };
  hp m3(0);
  if (coord < nq) {
    const std::size_t e = coord % c.d, i = (coord / c.d) % c.h, t = (coord / (c.d * c.h)) % c.lq,
                      b = coord / (c.d * c.h * c.lq);
    hp rc, ra;
    if (row_ranges(b, i, t, e, rc, ra)) m3 = 4 * rc * ra * ra * ra;
  } else {
    const std::size_t x = coord - nq;
    const std::size_t e = x % c.d, j = (x / c.d) % c.g, s = (x / (c.d * c.g)) % c.lk,
                      b = x / (c.d * c.g * c.lk);
    for (std::size_t i = j * group; i < (j + 1) * group; ++i) {
      for (std::size_t t = 0; t < c.lq; ++t) {
        if (!reference::mask_visible(c.cfg.mask, b, t, s)) continue;
        hp rc, ra;
        row_ranges(b, i, t, e, rc, ra);
        const hp a = sigma * abs(c.q[qi(b, t, i, e)]);
        m3 += 4 * rc * a * a * a;
      }
    }
  }
  return m3 * (1 + reference::pow2<hp>(-60));
}

// The analytic gradient; `drop_d` evaluates it with D = 0 (dS = P·dP, the backward without
// the softmax Jacobian's rank-one term: a wrong backward, for the check's teeth).
Gradient analytic_gradient(const AttnCase& c, bool drop_d) {
  auto fwd = reference::attention_forward(c.cfg, c.q, c.k, c.v);
  const auto e = reference::attention_reference_error(c.cfg, c.q, c.k, c.v, c.dout);
  if (drop_d) fwd.out = Tensor<hp>(fwd.out.shape());
  const auto g = reference::attention_backward(c.cfg, c.q, c.k, c.v, fwd, c.dout);
  Gradient out;
  for (const auto* t : {&g.dq, &g.dk, &g.dv})
    out.value.insert(out.value.end(), t->values().begin(), t->values().end());
  for (const auto* t : {&e.dq, &e.dk, &e.dv})
    out.error.insert(out.error.end(), t->values().begin(), t->values().end());
  return out;
}

// wrong: the backward with D = 0, which must fail wherever the dropped term is visible.
template <class T>
void fd_case(bool wrong) {
  const AttnCase c = genCase<T>();
  RC_TAG(kind_name(c.cfg.mask.kind));
  const auto out_error =
      reference::attention_reference_error(c.cfg, c.q, c.k, c.v, Tensor<hp>()).out;
  check_smooth_gradient(
      pack(c), [&](const Tensor<hp>& th) { return loss(c, th, out_error); },
      [&](std::size_t i, const hp&) { return third_derivative_bound(c, i); },
      [&](bool drop_d) { return analytic_gradient(c, drop_d); }, wrong, describe(c), "(q, k, v)");
}

RC_GTEST_PROP(attention_reference, backward_matches_central_differences_float64, ()) {
  fd_case<double>(false);
}
RC_GTEST_PROP(attention_reference, backward_matches_central_differences_bfloat16, ()) {
  fd_case<bfloat16>(false);
}
RC_GTEST_PROP(attention_reference, backward_without_the_D_term_is_caught, ()) {
  fd_case<double>(true);
}

// Empty rows (every key padded or masked): out 0, lse −inf, and zero gradients from them.
RC_GTEST_PROP(attention_reference, empty_rows_have_zero_out_minus_inf_lse_and_zero_gradients, ()) {
  AttnCase c = genCase<double>();
  c.cfg.mask.key_lengths.assign(c.batch, 0);
  c.cfg.mask.key_lengths.back() = c.lk;  // the last sequence keeps its keys
  const auto f = reference::attention_forward(c.cfg, c.q, c.k, c.v);
  const auto g = reference::attention_backward(c.cfg, c.q, c.k, c.v, f, c.dout);
  const std::size_t last = c.batch - 1;
  for (std::size_t b = 0; b < c.batch; ++b) {
    for (std::size_t i = 0; i < c.h; ++i) {
      for (std::size_t t = 0; t < c.lq; ++t) {
        bool any = false;
        for (std::size_t s = 0; s < c.lk; ++s)
          any = any || reference::mask_visible(c.cfg.mask, b, t, s);
        const hp lse = f.lse[(b * c.h + i) * c.lq + t];
        if (any) {
          RC_ASSERT(b == last);
          RC_ASSERT(boost::multiprecision::isfinite(lse));
          continue;
        }
        RC_ASSERT(lse == -std::numeric_limits<hp>::infinity());
        for (std::size_t e = 0; e < c.d; ++e) {
          const std::size_t x = ((b * c.lq + t) * c.h + i) * c.d + e;
          RC_ASSERT(f.out[x] == 0);
          RC_ASSERT(g.dq[x] == 0);
        }
      }
    }
  }
  for (std::size_t x = 0; x < last * c.lk * c.g * c.d; ++x) {  // the padded sequences' keys
    RC_ASSERT(g.dk[x] == 0);
    RC_ASSERT(g.dv[x] == 0);
  }
  // And their bounds are 0 (an implementation must be exact there).
  const auto bnd = reference::attention_bounds(c.cfg, c.q, c.k, c.v, c.dout,
                                               reference::arithmetic_of<bfloat16>());
  for (std::size_t x = 0; x < last * c.lk * c.g * c.d; ++x) RC_ASSERT(bnd.dk[x] == 0);
}

// The two evaluation paths (reference/attention/attention_products.hpp against the
// definition's loops): each is within attention_reference_error (for its path) of the exact
// values, so they differ by at most the sum of the two. Shapes up to Lq 9, Lk 17, d 8, so that
// the products have several slices and masked, padded and empty rows. `perturb`: the loops run
// on v·(1 + 2^-80) (far below every storage type's precision, far above the bound): the check
// must see it wherever an output is nonzero.
template <class T>
void paths_case(bool perturb) {
  using reference::ContractionPath;
  const AttnCase c = genCase<T>({9, 17, 8});
  RC_TAG(kind_name(c.cfg.mask.kind));
  Tensor<hp> v = c.v;
  if (perturb) {
    for (auto& x : v.values()) x *= 1 + reference::pow2<hp>(-80);
  }
  const auto ff = reference::attention_forward(c.cfg, c.q, c.k, c.v, ContractionPath::fast);
  const auto fp = reference::attention_forward(c.cfg, c.q, c.k, v, ContractionPath::plain);
  const auto gf =
      reference::attention_backward(c.cfg, c.q, c.k, c.v, ff, c.dout, ContractionPath::fast);
  const auto gp =
      reference::attention_backward(c.cfg, c.q, c.k, v, fp, c.dout, ContractionPath::plain);
  const auto ef =
      reference::attention_reference_error(c.cfg, c.q, c.k, c.v, c.dout, ContractionPath::fast);
  const auto ep =
      reference::attention_reference_error(c.cfg, c.q, c.k, c.v, c.dout, ContractionPath::plain);
  std::string failure;
  bool nonzero = false;
  auto agree = [&](const char* name, const Tensor<hp>& a, const Tensor<hp>& b, const Tensor<hp>& e1,
                   const Tensor<hp>& e2) {
    using std::abs;
    for (std::size_t x = 0; x < a.size(); ++x) {
      nonzero = nonzero || (a[x] != 0 && std::string(name) == "out");
      if (a[x] == b[x] || !failure.empty()) continue;  // equal (−inf lse of an empty row too)
      if (!(abs(a[x] - b[x]) <= e1[x] + e2[x])) {
        failure = std::string(name) + "[" + std::to_string(x) + "]: fast " + show_hp(a[x]) +
                  ", plain " + show_hp(b[x]) + ", bound " + show_hp(e1[x] + e2[x]);
      }
    }
  };
  agree("out", ff.out, fp.out, ef.out, ep.out);
  agree("lse", ff.lse, fp.lse, ef.lse, ep.lse);
  agree("dq", gf.dq, gp.dq, ef.dq, ep.dq);
  agree("dk", gf.dk, gp.dk, ef.dk, ep.dk);
  agree("dv", gf.dv, gp.dv, ef.dv, ep.dv);
  if (!perturb) {
    if (!failure.empty()) RC_FAIL(describe(c) + ": " + failure);
    return;
  }
  RC_PRE(nonzero);
  RC_ASSERT(!failure.empty());
}

RC_GTEST_PROP(attention_reference, fast_and_plain_paths_agree_float64, ()) {
  paths_case<double>(false);
}
RC_GTEST_PROP(attention_reference, fast_and_plain_paths_agree_bfloat16, ()) {
  paths_case<bfloat16>(false);
}
RC_GTEST_PROP(attention_reference, a_2_pow_minus_80_change_between_the_paths_is_caught, ()) {
  paths_case<double>(true);
}

// ---------------------------------------------------------------- the bound's two evaluations

// reference::attention_bounds evaluated on the fast path (attention_bound_products.hpp: its sums
// of magnitudes as contractions, each raised to an upper bound) against the plain path (the
// loops in R) on the same case: every mask kind and causal alignment, key padding and empty rows,
// MHA, GQA and MQA, Lq ≠ Lk, parts 1–3, both softmax contracts, exact inputs or inputs with
// error bounds (as the layer's projections hand the core), inputs of T or values computed in R
// (not doubles: the R-sliced products). Step (7) of attention_bound.hpp: the fast path's sums
// are each ≥ the exact sum of the formula and at most (1 + 2^-52)²(1 + 3·gamma_K(u_R)) above
// it (their operands rounded up to doubles), while the two paths' magnitudes (the scores, P,
// out, dP − D: R values of the reference's two paths) differ by about 2^-100 relative. So every
// element of the fast bound must lie within [plain·(1 − 2^-40), plain·(1 + 2^-30)]: not below
// the plain one by more than the evaluation's slack (the bound's own 1 + 2^-40 raise), and no
// looser than 2^-30 (the slack the fast path is allowed to add). Equal elements (0, +inf) pass.
template <class T>
void bound_paths_case() {
  using reference::ContractionPath;
  AttnCase c = genCase<T>({9, 17, 8});
  RC_TAG(kind_name(c.cfg.mask.kind));
  if (c.cfg.mask.kind == MaskKind::causal && *uniform(0, 1) == 0)
    c.cfg.mask.alignment = CausalAlignment::top_left;
  if (*uniform(0, 2) == 0) {  // values computed in R, as the layer's projections are
    for (auto* t : {&c.q, &c.k, &c.v, &c.dout}) {
      for (auto& x : t->values()) x *= 1 + reference::pow2<hp>(-70);
    }
  }
  reference::AttentionBoundOptions<hp> opt;
  opt.parts = *uniform<std::size_t>(1, 3);
  opt.exp = *uniform(0, 1) == 0 ? reference::SoftmaxExp::natural : reference::SoftmaxExp::base2;
  const bool errors = *uniform(0, 1) == 0;
  RC_TAG(errors ? "input errors" : "exact inputs");
  if (errors) {  // |x|·2^-r, r in [6, 30], or 0 (a few exact elements)
    const auto error_of = [](const Tensor<hp>& x) {
      Tensor<hp> e(x.shape());
      for (std::size_t i = 0; i < x.size(); ++i) {
        using std::abs;
        const int r = *uniform(5, 30);
        e[i] = r == 5 ? hp(0) : abs(x[i]) * reference::pow2<hp>(-r);
      }
      return e;
    };
    opt.q_error = error_of(c.q);
    opt.k_error = error_of(c.k);
    opt.v_error = error_of(c.v);
    opt.dout_error = error_of(c.dout);
  }
  const auto arith = reference::arithmetic_of<T>();
  const auto fast =
      reference::attention_bounds(c.cfg, c.q, c.k, c.v, c.dout, arith, opt, ContractionPath::fast);
  const auto plain =
      reference::attention_bounds(c.cfg, c.q, c.k, c.v, c.dout, arith, opt, ContractionPath::plain);
  const hp lo = 1 - reference::pow2<hp>(-40), hi = 1 + reference::pow2<hp>(-30);
  const auto within = [&](const char* name, const Tensor<hp>& f, const Tensor<hp>& p) {
    for (std::size_t x = 0; x < f.size(); ++x) {
      if (f[x] == p[x]) continue;
      if (!(f[x] >= p[x] * lo && f[x] <= p[x] * hi)) {
        RC_FAIL(describe(c) + ", parts " + std::to_string(opt.parts) +
                (opt.exp == reference::SoftmaxExp::base2 ? ", exp2" : ", natural exp") +
                (errors ? ", input errors" : "") + ": " + name + "[" + std::to_string(x) +
                "]: fast " + show_hp(f[x]) + ", plain " + show_hp(p[x]));
      }
    }
  };
  using B = reference::AttentionBounds<hp>;
  const std::pair<const char*, Tensor<hp> B::*> results[] = {
      {"out", &B::out},       {"lse", &B::lse},       {"dq", &B::dq},
      {"dk", &B::dk},         {"dv", &B::dv},         {"out_acc", &B::out_acc},
      {"dq_acc", &B::dq_acc}, {"dk_acc", &B::dk_acc}, {"dv_acc", &B::dv_acc}};
  for (const auto& [name, m] : results) within(name, fast.*m, plain.*m);
}

RC_GTEST_PROP(attention_bounds, fast_evaluation_is_within_the_plain_one_float32, ()) {
  bound_paths_case<float>();
}
RC_GTEST_PROP(attention_bounds, fast_evaluation_is_within_the_plain_one_bfloat16, ()) {
  bound_paths_case<bfloat16>();
}
RC_GTEST_PROP(attention_bounds, fast_evaluation_is_within_the_plain_one_float64, ()) {
  bound_paths_case<double>();
}

// ---------------------------------------------------------------- the exp2 contract

// The worst |kernel − reference|/bound over out, lse, dq, dk, dv under each softmax contract:
// {exp2, natural exp}.
template <class Run>
std::pair<double, double> exp2_kernel_ratios(const AttnCase& c, const Run& r, std::size_t parts,
                                             const reference::Arithmetic& arith) {
  const auto fwd = reference::attention_forward(c.cfg, c.q, c.k, c.v);
  const auto g = reference::attention_backward(c.cfg, c.q, c.k, c.v, fwd, c.dout);
  const auto rb = reference::attention_reference_error(c.cfg, c.q, c.k, c.v, c.dout);
  const auto worst = [&](reference::SoftmaxExp exp) {
    reference::AttentionBoundOptions<hp> opt;
    opt.parts = parts;
    opt.exp = exp;
    const auto b = reference::attention_bounds(c.cfg, c.q, c.k, c.v, c.dout, arith, opt);
    double w = 0;
    const auto judge = [&](const std::vector<float>& got, const Tensor<hp>& want,
                           const Tensor<hp>& bound, const Tensor<hp>& own) {
      for (std::size_t x = 0; x < got.size(); ++x) {
        using std::abs;
        if (std::isinf(got[x]) && want[x] == hp(got[x])) continue;  // an empty row's −inf lse
        const hp err = abs(hp(got[x]) - want[x]);
        if (err == 0) continue;
        w = std::max(w, static_cast<double>(err / (bound[x] + own[x])));
      }
    };
    judge(r.out, fwd.out, b.out, rb.out);
    judge(r.lse, fwd.lse, b.lse, rb.lse);
    judge(r.dq, g.dq, b.dq, rb.dq);
    judge(r.dk, g.dk, b.dk, rb.dk);
    judge(r.dv, g.dv, b.dv, rb.dv);
    return w;
  };
  return {worst(reference::SoftmaxExp::base2), worst(reference::SoftmaxExp::natural)};
}

// The worst ratios, to the exp2 bound and to the natural-exp one, printed at the program's end.
test::RatioSummary& exp2_ratios() {
  static test::RatioSummary summary("attention exp2 kernel", "exp2", "natural exp");
  return summary;
}

template <class T>
void exp2_case(const char* key) {
  AttnCase c = genCase<T>({4, 8, 4});
  if (*uniform(0, 2) == 0) c.cfg.scale = 0.3;  // a scale whose log2 multiple rounds
  const std::size_t parts = *uniform<std::size_t>(1, 3);
  std::vector<std::size_t> cuts{0, c.lk};
  for (std::size_t x = 1; x < parts; ++x) cuts.push_back(*uniform<std::size_t>(0, c.lk));
  std::sort(cuts.begin(), cuts.end());
  attention_emulation::KernelForm form;  // FlashAttention-2's CUDA departures, drawn
  form.unfused = *uniform(0, 1) == 1;
  form.natural_lse = *uniform(0, 1) == 1;
  const auto run = attention_exp2::exp2_kernel<T>(c.cfg, c.q, c.k, c.v, c.dout, cuts, form);
  const auto arith = reference::arithmetic_of<T>();
  const auto [r2, rn] = exp2_kernel_ratios(c, run, parts, arith);
  exp2_ratios().add(key, r2, rn);
  if (!(r2 <= 1)) RC_FAIL(describe(c) + ": ratio " + std::to_string(r2));
}

RC_GTEST_PROP(attention_bounds, an_exp2_kernel_stays_within_the_exp2_bound_float32, ()) {
  exp2_case<float>("float32");
}
RC_GTEST_PROP(attention_bounds, an_exp2_kernel_stays_within_the_exp2_bound_bfloat16, ()) {
  exp2_case<bfloat16>("bfloat16");
}

// Where the exp2 contract's own terms decide: one query row over 1 to 3 keys with large scores
// (|s| up to 2^11, head_dim 1, so the dot's γ_1 charges only u·|s|), where the lse's error is the
// rounded scale_log2 times |s| plus the conversion from base 2. The exp2 kernel's worst lse ratio
// over the sweep must be ≤ 1 and above 1/4: the bound is not vacuous where those terms dominate.
// 24 random bits in [0, 1).
double fraction24(SplitMix64& rng) { return static_cast<double>(rng.next() >> 40U) / 16777216.0; }

// One query row of one head (head_dim 1) over lo + [0, spread) keys, q, k, v of zeros, with a
// scale in [1/8, 1) of 24 random bits: its roundings to float and of scale·log2 e take every sign
// and size.
AttnCase one_query_row(SplitMix64& rng, std::size_t lo, std::size_t spread) {
  AttnCase c;
  c.cfg.scale = std::ldexp(1 + fraction24(rng), -1 - static_cast<int>(rng.below(3)));
  c.lk = lo + rng.below(spread);
  c.cfg.q_heads = c.cfg.kv_heads = c.cfg.head_dim = 1;
  c.cfg.mask.q_len = 1;
  c.cfg.mask.k_len = c.lk;
  c.q = Tensor<hp>({1, 1, 1, 1});
  c.k = Tensor<hp>({1, c.lk, 1, 1});
  c.v = Tensor<hp>({1, c.lk, 1, 1});
  return c;
}

TEST(attention_bounds, an_exp2_kernel_at_large_scores_comes_close_to_the_exp2_bound) {
  SplitMix64 rng{141207};
  double worst = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    {
      AttnCase c = one_query_row(rng, 1, 3);
      const double scale = c.cfg.scale;
      const auto draw = [&](int lo, int hi) {  // ±(1 + f)·2^e, e in [lo, hi], 24 bits
        const double f = fraction24(rng);
        const int e = lo + static_cast<int>(rng.below(static_cast<std::size_t>(hi - lo) + 1));
        return hp(static_cast<float>(std::ldexp(1 + f, e)));
      };
      c.q[0] = draw(5, 10);
      for (std::size_t s = 0; s < c.lk; ++s) {
        c.k[s] = draw(0, 0);
        c.v[s] = draw(-1, 1);
      }
      c.dout = Tensor<hp>({1, 1, 1, 1});
      c.dout[0] = draw(-1, 1);
      const std::vector<std::size_t> cuts{0, c.lk};
      attention_emulation::KernelForm form;  // each of the four forms in turn
      form.unfused = (trial & 1) != 0;
      form.natural_lse = (trial & 2) != 0;
      const auto run = attention_exp2::exp2_kernel<float>(c.cfg, c.q, c.k, c.v, c.dout, cuts, form);
      const auto fwd = reference::attention_forward(c.cfg, c.q, c.k, c.v);
      reference::AttentionBoundOptions<hp> opt;
      opt.exp = reference::SoftmaxExp::base2;
      opt.exp2_lse = form.natural_lse ? reference::Exp2Lse::natural : reference::Exp2Lse::base2;
      const auto b = reference::attention_bounds(c.cfg, c.q, c.k, c.v, c.dout,
                                                 reference::arithmetic_of<float>(), opt);
      using std::abs;
      const hp err = abs(hp(run.lse[0]) - fwd.lse[0]);
      ASSERT_LE(err, b.lse[0]) << "scale " << scale << " q " << static_cast<double>(c.q[0]);
      worst = std::max(worst, static_cast<double>(err / b.lse[0]));
    }
  }
  std::printf("attention exp2 kernel at large scores: worst lse |err|/bound %.3f\n", worst);
  EXPECT_GT(worst, 0.25);
}

// ---------------------------------------------------------------- a declared 16-bit accumulator

// The worst ratios of a bfloat16 kernel accumulating in bfloat16, to the declared accumulator's
// bound and to the default's (float32), printed at the program's end.
test::RatioSummary& accumulate_ratios() {
  static test::RatioSummary summary("attention bfloat16 accumulation", "accumulate bfloat16",
                                    "the default float32 accumulator");
  return summary;
}

// A bfloat16 case, its keys cut into 1 to 3 blocks, run by accumulate_kernel (every step rounded
// to bfloat16); returns {ratio to the declared bound, ratio to the default's}, natural exp.
std::pair<double, double> bfloat16_accumulating_ratios(bool drop_merge_normalization) {
  AttnCase c = genCase<bfloat16>({4, 8, 4});
  const std::size_t parts = drop_merge_normalization ? 2 : *uniform<std::size_t>(1, 3);
  std::vector<std::size_t> cuts{0, c.lk};
  for (std::size_t x = 1; x < parts; ++x) {
    // The mutant's cut splits the keys in two non-empty blocks when there are two keys.
    cuts.push_back(drop_merge_normalization ? (c.lk + 1) / 2 : *uniform<std::size_t>(0, c.lk));
  }
  std::sort(cuts.begin(), cuts.end());
  const auto run = attention_accumulate::accumulate_kernel<bfloat16, bfloat16>(
      c.cfg, c.q, c.k, c.v, c.dout, cuts, drop_merge_normalization);
  const reference::Arithmetic declared{reference::format_of<bfloat16>(),
                                       reference::format_of<bfloat16>()};
  const double own = exp2_kernel_ratios(c, run, parts, declared).second;
  const double other =
      exp2_kernel_ratios(c, run, parts, reference::arithmetic_of<bfloat16>()).second;
  if (!drop_merge_normalization) {
    accumulate_ratios().add("bfloat16", own, other);
    if (other > 1) RC_TAG("outside the default float32 accumulator's bound");
    if (!(own <= 1)) RC_FAIL(describe(c) + ": ratio " + std::to_string(own));
  }
  return {own, other};
}

RC_GTEST_PROP(attention_bounds, a_bfloat16_accumulating_kernel_stays_within_the_declared_bound,
              ()) {
  bfloat16_accumulating_ratios(false);
}

// Teeth, both ways: the declared accumulator is needed (the same kernel leaves the default's
// float32-accumulator bound), and its wider bound still sees a bug (the merge's weights never
// divided by their sum).
TEST(attention_bounds, a_bfloat16_accumulating_kernel_is_outside_the_default_bound) {
  const auto result = rc::check("the bfloat16-accumulating kernel under the float32 bound",
                                [] { RC_ASSERT(bfloat16_accumulating_ratios(false).second <= 1); });
  EXPECT_FALSE(result) << "every case stayed within the default accumulator's bound";
}
TEST(attention_bounds, an_unnormalized_merge_is_caught_under_the_declared_accumulator) {
  const auto result = rc::check("the unnormalized merge under the bfloat16 bound",
                                [] { RC_ASSERT(bfloat16_accumulating_ratios(true).first <= 1); });
  EXPECT_FALSE(result) << "a merge without its division by Σw passed the declared bound";
}

// ---------------------------------------------------------------- the online softmax

// The worst |kernel − reference|/bound over out and lse of an online-softmax kernel (key blocks
// of 1 to Lk keys, natural exp or exp2), under the online bound with a declared smallest key
// block of 1 to the kernel's (AttentionBoundOptions::key_block); with `forget_l_rescale` the
// kernel's l is never rescaled (a mutant).
template <class T>
double online_case(bool forget_l_rescale) {
  AttnCase c = genCase<T>({4, 16, 4});
  if (*uniform(0, 2) == 0) c.cfg.scale = 0.3;
  const bool exp2 = *uniform(0, 1) == 1;
  const std::size_t block = *uniform<std::size_t>(1, c.lk);
  attention_emulation::KernelForm form;  // FlashAttention-2's CUDA departures, drawn
  form.unfused = *uniform(0, 1) == 1;
  form.natural_lse = *uniform(0, 1) == 1;
  form.reciprocal = *uniform(0, 1) == 1;
  const auto run =
      attention_online::online_kernel<T>(c.cfg, c.q, c.k, c.v, block, exp2, forget_l_rescale, form);
  reference::AttentionBoundOptions<hp> opt;
  opt.online = true;
  opt.key_block = *uniform<std::size_t>(1, block);
  opt.exp = exp2 ? reference::SoftmaxExp::base2 : reference::SoftmaxExp::natural;
  const auto b = reference::attention_bounds(c.cfg, c.q, c.k, c.v, Tensor<hp>(),
                                             reference::arithmetic_of<T>(), opt);
  const auto fwd = reference::attention_forward(c.cfg, c.q, c.k, c.v);
  const auto rb = reference::attention_reference_error(c.cfg, c.q, c.k, c.v, Tensor<hp>());
  double w = 0;
  const auto judge = [&](const std::vector<float>& got, const Tensor<hp>& want,
                         const Tensor<hp>& bound, const Tensor<hp>& own) {
    for (std::size_t x = 0; x < got.size(); ++x) {
      using std::abs;
      if (std::isinf(got[x]) && want[x] == hp(got[x])) continue;  // an empty row's −inf lse
      const hp err = abs(hp(got[x]) - want[x]);
      if (err == 0) continue;
      w = std::max(w, static_cast<double>(err / (bound[x] + own[x])));
    }
  };
  judge(run.out, fwd.out, b.out, rb.out);
  judge(run.lse, fwd.lse, b.lse, rb.lse);
  if (!forget_l_rescale && w > 0.5) RC_TAG("past half the bound");
  return w;
}

RC_GTEST_PROP(attention_bounds, an_online_softmax_kernel_stays_within_the_online_bound_float32,
              ()) {
  RC_ASSERT(online_case<float>(false) <= 1);
}
RC_GTEST_PROP(attention_bounds, an_online_softmax_kernel_stays_within_the_online_bound_bfloat16,
              ()) {
  RC_ASSERT(online_case<bfloat16>(false) <= 1);
}
TEST(attention_bounds, an_online_kernel_that_never_rescales_l_is_caught) {
  const auto result = rc::check("the online kernel without l's rescale",
                                [] { RC_ASSERT(online_case<float>(true) <= 1); });
  EXPECT_FALSE(result) << "an online kernel that never rescales l passed the online bound";
}

// Where the online exp2 kernel's own terms decide: one query row over 2 to 6 keys, each key
// raising the running max (blocks of one key: a rescale at every key), large scores (|s| up to
// 2^10·scale, head_dim 1) within a few units of each other, so every key keeps weight. Each
// block's m₂ = fl(m_b·scale_log2) rounds by up to u·|s|, and unlike the whole-row kernel's single
// m₂ those roundings do not cancel against the final lse's. The worst ratio over out and lse
// must be ≤ 1 and above 1/4.
TEST(attention_bounds, an_online_exp2_kernel_at_large_scores_comes_close_to_the_online_bound) {
  SplitMix64 rng{141212};
  double worst = 0, whole = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    AttnCase c = one_query_row(rng, 2, 5);
    const double scale = c.cfg.scale;
    const auto frac = [&] { return fraction24(rng); };
    c.q[0] = hp(static_cast<float>(std::ldexp(1 + frac(), 7 + static_cast<int>(rng.below(4)))));
    double k = 1 + frac() / 2;
    for (std::size_t s = 0; s < c.lk; ++s) {
      k += std::ldexp(frac(), -9);  // increasing: each key a new max
      c.k[s] = hp(static_cast<float>(k));
      c.v[s] = hp(static_cast<float>(std::ldexp(1 + frac(), -1) * (rng.below(2) == 0 ? 1 : -1)));
    }
    attention_emulation::KernelForm form;  // each of the eight forms in turn
    form.unfused = (trial & 1) != 0;
    form.natural_lse = (trial & 2) != 0;
    form.reciprocal = (trial & 4) != 0;
    const auto run =
        attention_online::online_kernel<float>(c.cfg, c.q, c.k, c.v, 1, true, false, form);
    const auto fwd = reference::attention_forward(c.cfg, c.q, c.k, c.v);
    reference::AttentionBoundOptions<hp> opt;
    opt.exp = reference::SoftmaxExp::base2;
    opt.exp2_lse = form.natural_lse ? reference::Exp2Lse::natural : reference::Exp2Lse::base2;
    opt.online = true;
    const auto b = reference::attention_bounds(c.cfg, c.q, c.k, c.v, Tensor<hp>(),
                                               reference::arithmetic_of<float>(), opt);
    using std::abs;
    const hp el = abs(hp(run.lse[0]) - fwd.lse[0]);
    const hp eo = abs(hp(run.out[0]) - fwd.out[0]);
    {
      auto o2 = opt;
      o2.online = false;
      const auto b2 = reference::attention_bounds(c.cfg, c.q, c.k, c.v, Tensor<hp>(),
                                                  reference::arithmetic_of<float>(), o2);
      whole = std::max(
          {whole, static_cast<double>(el / b2.lse[0]), static_cast<double>(eo / b2.out[0])});
    }
    EXPECT_LE(el, b.lse[0]) << "scale " << scale << " q " << static_cast<double>(c.q[0]);
    EXPECT_LE(eo, b.out[0]) << "scale " << scale << " q " << static_cast<double>(c.q[0]);
    worst =
        std::max({worst, static_cast<double>(el / b.lse[0]), static_cast<double>(eo / b.out[0])});
  }
  std::printf(
      "attention online exp2 kernel at large scores: worst |err|/bound %.3f (%.3f under "
      "the whole-row exp2 bound)\n",
      worst, whole);
  EXPECT_GT(worst, 0.25);
}

}  // namespace
}  // namespace shardcheck::props::ref::attention_props
