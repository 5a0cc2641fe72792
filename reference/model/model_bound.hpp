// The a-priori elementwise error bound of one training step of the model (model.hpp) computed
// under lib/ops/model/model.hpp's arithmetic contract on a given partition (ModelPartition): the
// bound of every result an implementation returns (the loss, every parameter gradient after
// every reduction, the input gradient, the global norm, the clip coefficient and the parameters
// after the step), composed from the families' own bounds. docs/model.md has the derivation in
// prose; each function below is one step of it, named after the op it bounds.
//
// Method: forward error propagation through the whole step (Higham, ASNA 2nd ed., §3.3, done a
// priori). Every intermediate is an Approx {v, e}: v its value in R computed from the previous
// values (the reference's value), e a bound on |implementation − v| (the implementation's
// roundings and the errors of its inputs, propagated; R's own roundings are ~2^-100 relative and
// covered by the final factor 1 + 2^-40, as every family's bound covers them). Each op's step
// evaluates its family's bound with input errors:
//   contractions  a·b with perturbed factors, the contracted axis cut into the parts the mesh
//                 cuts it into (each part a dot in A rounded to T, the parts summed in T, a bias
//                 added in T): reference/mlp/mlp_bound.hpp's perturbed_parts and
//                 perturbed_dot_bound (bounds.hpp's element_bound on magnitudes raised by the
//                 input errors, plus Σ (|a| + e_a)(|b| + e_b) − |ab|)
//   norms         reference/norm/norm_bound.hpp's Propagator (running error rules per operation),
//                 on inputs that carry errors; dgamma/dbeta per op call with the sequence-parallel
//                 ranks' token parts
//   attention     reference/attention/attention.hpp's attention_bounds with q, k, v, dout errors
//                 and the cp ring's key blocks as its parts, per tp rank's heads (a kv head shared
//                 by several tp ranks gets each rank's partial dk, dv)
//   activation    reference/mlp/mlp_bound.hpp's activation_error and activation_grad_error
//   cross-entropy the Propagator's rules plus exp and log (exp_of, log_of below) on the library's
//                 steps (vocab_cross_entropy.hpp): m = max z, d = z − m, e = exp(d), S = Σ e,
//                 L = log S, l = L + (m − z_y); gradient exp(z − m)/S − [v = y]
//   residual      x + y in A, rounded to T
//   finalize      each op call's parameter gradient (rounded to T by the op) summed in A over the
//                 calls (micro-batches, dp × cp), any order; a tied embedding's two sums added in
//                 A; times fl(1/N) in A
//   optimizer     ‖g‖₂ = sqrt(Σ g²) in A (any order), coef = max/(‖g‖₂ + eps) when below 1,
//                 p' = T(p − lr·coef·g)
// The partition matters only through which sums round where: which tokens each op call holds
// (a parameter gradient's calls), the tp ranks' heads, ffn and vocabulary pieces (the parts of
// the contractions the ranks split), the sequence-parallel ranks' token rows, and the number of
// key blocks a ring merges. Overflow is outside the derivation (the suite draws values far from
// it); an infinite bound accepts anything (a divisor whose bound reaches 0, as norm_bound.hpp).
#pragma once

#include "ops/model/model_config.hpp"
#include "reference/attention/attention.hpp"
#include "reference/bounds.hpp"
#include "reference/contraction/contract.hpp"
#include "reference/mlp/mlp_bound.hpp"
#include "reference/model/model.hpp"
#include "reference/norm/norm_bound.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardcheck::reference {

// How the implementation's mesh cuts the step: the reference-only description the bound needs
// (lib/ops/model/model.hpp derives it from ModelParallelConfig; the reference never sees a mesh).
struct ModelPartition {
  // Every op call's tokens, as indices into the batch's B·L tokens (b·L + t), in the call's
  // order: one per (dp rank, micro-batch, cp rank). Together they hold every token once.
  std::vector<std::vector<std::size_t>> token_groups;
  // With sequence parallelism: per token group, the tp ranks' row counts of it (the norms'
  // dgamma parts); empty: every tp rank holds the whole group.
  std::vector<std::vector<std::size_t>> sp_rows;
  struct Heads {
    std::size_t q_offset = 0, q_count = 0, kv_offset = 0, kv_count = 0;
  };
  std::vector<Heads> heads;              // per tp rank, in rank order
  std::vector<std::size_t> ffn_parts;    // per tp rank: its ffn features
  std::vector<std::size_t> vocab_parts;  // per tp rank: its vocabulary rows
  std::size_t attention_parts = 1;       // the key blocks a query row's partials merge from
};

// A value and a bound on |implementation − value|, elementwise.
template <class R = hp>
struct Approx {
  Tensor<R> v, e;
};

template <class R = hp>
struct ModelExpected {
  Approx<R> loss;  // [1]
  std::size_t tokens = 0;
  ModelParams<R> grads, grads_bound;    // in A: after the finalize, before the step
  Approx<R> grad_norm, clip_coef;       // [1] each
  ModelParams<R> params, params_bound;  // after the step, rounded to T
  Approx<R> input_grad;                 // ∂(Σ loss)/∂x_0 [B·L, H], rounded to T
};

namespace model_detail {

// ---------------------------------------------------------------- Approx helpers

template <class R>
Approx<R> exact(const Tensor<R>& v) {
  return {v, Tensor<R>(v.shape())};
}

template <class R>
Approx<R> rows_of(const Approx<R>& a, std::span<const std::size_t> rows) {
  const std::size_t w = a.v.size() / std::max<std::size_t>(a.v.dim(0), 1);
  Approx<R> o{Tensor<R>(Shape{rows.size(), w}), Tensor<R>(Shape{rows.size(), w})};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t j = 0; j < w; ++j) {
      o.v[i * w + j] = a.v[rows[i] * w + j];
      o.e[i * w + j] = a.e[rows[i] * w + j];
    }
  }
  return o;
}

template <class R>
Approx<R> cols_of(const Approx<R>& a, std::size_t first, std::size_t count) {
  const std::size_t n = a.v.dim(0), w = a.v.dim(1);
  Approx<R> o{Tensor<R>(Shape{n, count}), Tensor<R>(Shape{n, count})};
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < count; ++j) {
      o.v[i * count + j] = a.v[i * w + first + j];
      o.e[i * count + j] = a.e[i * w + first + j];
    }
  }
  return o;
}

template <class R>
Tensor<R> rows_range(const Tensor<R>& t, std::size_t first, std::size_t count) {
  const std::size_t w = t.ndim() == 2 ? t.dim(1) : 1;
  Shape s = t.shape();
  s[0] = count;
  const auto b = t.values().begin() + static_cast<std::ptrdiff_t>(first * w);
  return Tensor<R>(s, std::vector<R>(b, b + static_cast<std::ptrdiff_t>(count * w)));
}

template <class R>
Tensor<R> ones(std::size_t n) {
  Tensor<R> o(Shape{n, 1});
  for (auto& x : o.values()) x = 1;
  return o;
}

// An infinite bound means "no bound" (a divisor that may be 0 upstream); products of it with an
// exact 0 (∞·0) and differences (∞ − ∞) in the rules give NaN, which is no bound either: +inf.
template <class R>
R no_nan(const R& e) {
  using std::isnan;
  return isnan(e) ? std::numeric_limits<R>::infinity() : e;
}

// The contraction a·b, a [m, k] and b [k, n] read through layouts, with error bounds e_a, e_b
// (empty: exact), the contracted axis cut into `parts` (each a dot in A rounded to T, summed in
// T) and a bias [n] added in T: values and bounds (perturbed_dot_bound).
template <class R>
Approx<R> contract(const Tensor<R>& a, const Tensor<R>& e_a, const Layout& la, const Tensor<R>& b,
                   const Tensor<R>& e_b, const Layout& lb, std::vector<std::size_t> parts,
                   const Tensor<R>& bias, const Arithmetic& arith) {
  const std::size_t m = la.rows, n = lb.cols, mn = m * n;
  if (parts.empty()) parts = {la.cols};
  const auto terms = perturbed_parts<R>(a, e_a, la, b, e_b, lb, parts);
  Approx<R> o{Tensor<R>(Shape{m, n}), Tensor<R>(Shape{m, n})};
  std::vector<PerturbedPart<R>> p(parts.size());
  for (std::size_t x = 0; x < mn; ++x) {
    R v(0);
    for (std::size_t r = 0; r < parts.size(); ++r) {
      p[r] = terms[r * mn + x];
      v += p[r].partial;
    }
    const R* bx = bias.empty() ? nullptr : &bias[x % n];
    if (bx != nullptr) v += *bx;
    o.v[x] = v;
    o.e[x] = no_nan(perturbed_dot_bound<R>(p, bx, arith));
  }
  return o;
}

// x·Wᵀ + b: x [m, k] with errors, W [n, k] exact, over `parts` of k.
template <class R>
Approx<R> linear_of(const Approx<R>& x, const Tensor<R>& w, const Tensor<R>& b,
                    std::vector<std::size_t> parts, const Arithmetic& arith) {
  const std::size_t m = x.v.dim(0), k = x.v.dim(1), n = w.dim(0);
  return contract<R>(x.v, x.e, row_major_layout(m, k), w, Tensor<R>(), transposed_layout(k, n),
                     std::move(parts), b, arith);
}

// dy·W: dy [m, n] with errors, W [n, k] exact, over `parts` of n.
template <class R>
Approx<R> input_grad_of(const Approx<R>& dy, const Tensor<R>& w, std::vector<std::size_t> parts,
                        const Arithmetic& arith) {
  const std::size_t m = dy.v.dim(0), n = dy.v.dim(1), k = w.dim(1);
  return contract<R>(dy.v, dy.e, row_major_layout(m, n), w, Tensor<R>(), row_major_layout(n, k),
                     std::move(parts), Tensor<R>(), arith);
}

// dyᵀ·x over the tokens `rows` (one op call: one part): [n, k].
template <class R>
Approx<R> weight_grad_of(const Approx<R>& dy, const Approx<R>& x, std::span<const std::size_t> rows,
                         const Arithmetic& arith) {
  const Approx<R> d = rows_of(dy, rows), a = rows_of(x, rows);
  const std::size_t t = rows.size(), n = d.v.size() / std::max<std::size_t>(t, 1),
                    k = a.v.size() / std::max<std::size_t>(t, 1);
  if (t == 0) return exact(Tensor<R>(Shape{dy.v.dim(1), x.v.dim(1)}));
  return contract<R>(d.v, d.e, transposed_layout(n, t), a.v, a.e, row_major_layout(t, k), {t},
                     Tensor<R>(), arith);
}

// Σ of values each within its bound, summed in any order with unit roundoff u (n terms:
// γ_{n−1}(u)·Σ(|v_i| + e_i), Higham (3.4)).
template <class R>
Approx<R> sum_of(const std::vector<Approx<R>>& terms, const R& u) {
  using std::abs;
  Approx<R> s{Tensor<R>(terms.at(0).v.shape()), Tensor<R>(terms.at(0).v.shape())};
  const R g = gamma<R>(terms.size() > 1 ? terms.size() - 1 : 0, u);
  for (std::size_t i = 0; i < s.v.size(); ++i) {
    R mag(0);
    for (const auto& t : terms) {
      s.v[i] += t.v[i];
      s.e[i] += t.e[i];
      mag += abs(t.v[i]) + t.e[i];
    }
    s.e[i] += g * mag;
  }
  return s;
}

// Summed in A (accumulations), and in T (reductions across ranks in the storage type).
template <class R>
Approx<R> sum_in_a(const std::vector<Approx<R>>& terms, const Units<R>& u) {
  return sum_of(terms, u.u_a);
}
template <class R>
Approx<R> sum_in_t(const std::vector<Approx<R>>& terms, const Units<R>& u) {
  return sum_of(terms, u.round_t ? u.u_t : u.u_a);
}

// a + b in A, rounded to T (the residual connections and the backward's sums of two paths).
template <class R>
Approx<R> add_t(const Approx<R>& a, const Approx<R>& b, const Units<R>& u) {
  using std::abs;
  Approx<R> c{Tensor<R>(a.v.shape()), Tensor<R>(a.v.shape())};
  for (std::size_t i = 0; i < a.v.size(); ++i) {
    c.v[i] = a.v[i] + b.v[i];
    const R p = a.e[i] + b.e[i];
    const R ea = p + u.u_a * (abs(c.v[i]) + p);  // the addition in A (exact when subnormal)
    c.e[i] = ea + u.to_t(abs(c.v[i]) + ea);
  }
  return c;
}

// ---------------------------------------------------------------- Tracked conversions

template <class R>
TrackedTensor<R> tracked(const Approx<R>& a) {
  TrackedTensor<R> t(a.v.shape());
  for (std::size_t i = 0; i < a.v.size(); ++i) t.data[i] = {a.v[i], a.e[i], R(0)};
  return t;
}

template <class R>
Approx<R> approx(const TrackedTensor<R>& t) {
  Approx<R> a{Tensor<R>(t.shape), Tensor<R>(t.shape)};
  for (std::size_t i = 0; i < t.data.size(); ++i) {
    a.v[i] = t.data[i].v;
    a.e[i] = no_nan(R(t.data[i].e + t.data[i].r));
  }
  return a;
}

template <class R>
Approx<R> scalar(const Tracked<R>& t) {
  return {Tensor<R>(Shape{1}, std::vector<R>{t.v}), Tensor<R>(Shape{1}, std::vector<R>{t.e + t.r})};
}

// Upper bounds of expm1(x), x ≥ 0 (e^x − 1 ≤ x + (e − 2)·x² for x ≤ 1), and of −log(1 − y),
// 0 ≤ y < 1 (≤ y/(1 − y)): this Boost's float128 has neither expm1 nor log1p.
template <class R>
R expm1_above(const R& x) {
  using std::exp;
  return x <= 1 ? R(x * (1 + x)) : R(exp(x));
}
template <class R>
R neg_log1m_above(const R& y) {
  return y / (1 - y);
}

// exp and log of A (the C library's: within 2u relative, plus η below the normal range) of a
// tracked argument. exp: |exp(â) − exp(a)| ≤ exp(a)·expm1(e_a); log (a > 0): |log â − log a| ≤
// −log(1 − e_a/a_lo) with a_lo = |a.v| − a.r ≤ a (+inf when e_a ≥ a_lo: â may be 0).
template <class R>
Tracked<R> exp_of(const Tracked<R>& a, const Units<R>& u) {
  using std::exp;
  Tracked<R> o;
  o.v = exp(a.v);
  const R hi = exp(a.v + a.r);  // ≥ exp(a)
  o.r = hi * expm1_above(a.r) + 2 * u.u_r * o.v;
  const R p = hi * expm1_above(a.e);
  o.e = p + 2 * u.u_a * (hi + p) + u.eta_a;
  return o;
}

template <class R>
Tracked<R> log_of(const Tracked<R>& a, const Units<R>& u) {
  using std::abs;
  using std::log;
  Tracked<R> o;
  o.v = log(a.v);
  const R lo = abs(a.v) - a.r;
  if (!(lo > 0) || !(a.e < lo)) {
    o.r = o.e = std::numeric_limits<R>::infinity();
    return o;
  }
  o.r = neg_log1m_above(R(a.r / lo)) + 2 * u.u_r * abs(o.v);
  const R p = neg_log1m_above(R(a.e / lo));
  o.e = p + 2 * u.u_a * (abs(o.v) + o.r + p) + u.eta_a;
  return o;
}

// max over tracked values: |max â − max a| ≤ max |â_i − a_i| (and the same for r). Exact.
template <class R>
Tracked<R> max_of(std::span<const Tracked<R>> xs) {
  Tracked<R> o = xs[0];
  for (const auto& x : xs) {
    if (x.v > o.v) o.v = x.v;
    if (x.e > o.e) o.e = x.e;
    if (x.r > o.r) o.r = x.r;
  }
  return o;
}

}  // namespace model_detail

// ---------------------------------------------------------------- the steps

namespace model_detail {

template <class R>
struct Context {
  const ModelConfig& cfg;
  const ModelPartition& part;
  const Arithmetic& arith;
  Units<R> u;
  Propagator<R> P;
  std::size_t B, L;
  Context(const ModelConfig& c, const ModelPartition& p, const Arithmetic& a, std::size_t b,
          std::size_t l)
      : cfg(c), part(p), arith(a), u(a), P(a), B(b), L(l) {}
  std::size_t tokens() const { return B * L; }
};

// A norm's forward: propagate_norm_forward per token (tokens are independent).
template <class R>
Approx<R> norm_fwd(const Context<R>& c, const Approx<R>& x, const Tensor<R>& gamma,
                   const Tensor<R>& beta) {
  const auto f =
      propagate_norm_forward<R>(c.cfg.norm.kind, tracked(x), gamma, beta, R(c.cfg.norm.eps), c.P);
  return approx(f.y);
}

// A norm's backward, per op call: dx for every token, and per call dgamma/dbeta (its
// sequence-parallel ranks' parts, summed in T over tp), the calls summed in A.
template <class R>
struct NormBackApprox {
  Approx<R> dx, dgamma, dbeta;
};

template <class R>
NormBackApprox<R> norm_bwd(const Context<R>& c, const Approx<R>& x, const Tensor<R>& gamma,
                           const Approx<R>& dy) {
  const std::size_t H = x.v.dim(1);
  NormBackApprox<R> o{exact(Tensor<R>(x.v.shape())), {}, {}};
  std::vector<Approx<R>> dg, db;
  for (std::size_t g = 0; g < c.part.token_groups.size(); ++g) {
    const auto& rows = c.part.token_groups[g];
    if (rows.empty()) continue;
    const std::vector<std::size_t> parts =
        c.part.sp_rows.empty() ? std::vector<std::size_t>{} : c.part.sp_rows[g];
    const auto b =
        propagate_norm_backward<R>(c.cfg.norm.kind, tracked(rows_of(x, rows)), gamma,
                                   tracked(rows_of(dy, rows)), R(c.cfg.norm.eps), c.P, parts);
    const Approx<R> dx = approx(b.dx);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (std::size_t j = 0; j < H; ++j) {
        o.dx.v[rows[i] * H + j] = dx.v[i * H + j];
        o.dx.e[rows[i] * H + j] = dx.e[i * H + j];
      }
    }
    dg.push_back(approx(b.dgamma));
    if (!b.dbeta.empty()) db.push_back(approx(b.dbeta));
  }
  o.dgamma = dg.empty() ? exact(Tensor<R>(gamma.shape())) : sum_in_a(dg, c.u);
  if (c.cfg.norm.kind == NormKind::layer_norm) {
    o.dbeta = db.empty() ? exact(Tensor<R>(gamma.shape())) : sum_in_a(db, c.u);
  }
  return o;
}

// A parameter gradient dyᵀ·x: per op call (one part each, rounded to T), the calls summed in A.
template <class R>
Approx<R> param_grad(const Context<R>& c, const Approx<R>& dy, const Approx<R>& x) {
  std::vector<Approx<R>> calls;
  for (const auto& rows : c.part.token_groups) {
    if (!rows.empty()) calls.push_back(weight_grad_of(dy, x, rows, c.arith));
  }
  if (calls.empty()) return exact(Tensor<R>(Shape{dy.v.dim(1), x.v.dim(1)}));
  return sum_in_a(calls, c.u);
}

// A bias gradient Σ_t dy: as param_grad with x = 1, flattened to [n].
template <class R>
Approx<R> bias_grad(const Context<R>& c, const Approx<R>& dy) {
  Approx<R> g = param_grad(c, dy, exact(ones<R>(dy.v.dim(0))));
  const Shape s{g.v.dim(0)};
  return {Tensor<R>(s, g.v.values()), Tensor<R>(s, g.e.values())};
}

// The parameters' gradients as Approx, before the division by N (absent biases stay empty).
template <class R>
struct LayerGrads {
  Approx<R> norm1_gamma, norm1_beta, wq, bq, wk, bk, wv, bv, wo, bo, norm2_gamma, norm2_beta, w_up,
      b_up, w_down, b_down;
};
template <class R>
struct ModelGrads {
  Approx<R> embedding, final_gamma, final_beta, output;
  std::vector<LayerGrads<R>> layers;
};

// What one layer's forward keeps.
template <class R>
struct LayerApprox {
  Approx<R> x, a, q, k, v, o, h, b, mh, ma;  // mh, ma: the MLP's pre-activation and activation
};

// The attention core of every tp rank: forward values and bounds (o [n, h·d]), and the backward
// given do [n, h·d]: dq [n, h·d] (each query head on one rank), and per rank its partial dk, dv
// [n, kv_count·d] (complete when no other rank shares its kv heads).
template <class R>
struct CoreApprox {
  Approx<R> o, dq;
  std::vector<Approx<R>> dk, dv;  // per tp rank
};

template <class R>
CoreApprox<R> attention_core(const Context<R>& c, const Approx<R>& q, const Approx<R>& k,
                             const Approx<R>& v, const Approx<R>* dout) {
  const std::size_t d = c.cfg.head_dim, n = c.tokens(), hd = c.cfg.heads * d;
  CoreApprox<R> out{exact(Tensor<R>(Shape{n, hd})), exact(Tensor<R>(Shape{n, hd})), {}, {}};
  for (const auto& hs : c.part.heads) {
    const std::size_t kd = hs.kv_count * d;
    out.dk.push_back(exact(Tensor<R>(Shape{n, kd})));
    out.dv.push_back(exact(Tensor<R>(Shape{n, kd})));
    if (hs.q_count == 0) continue;
    AttentionConfig cfg = model_attention(c.cfg, c.L);
    cfg.q_heads = hs.q_count;
    cfg.kv_heads = hs.kv_count;
    cfg.scale = score_scale(model_attention(c.cfg, c.L));
    const Shape qs{c.B, c.L, hs.q_count, d}, ks{c.B, c.L, hs.kv_count, d};
    auto four = [](const Tensor<R>& t, const Shape& s) { return Tensor<R>(s, t.values()); };
    const Approx<R> qr = cols_of(q, hs.q_offset * d, hs.q_count * d);
    const Approx<R> kr = cols_of(k, hs.kv_offset * d, kd), vr = cols_of(v, hs.kv_offset * d, kd);
    const Tensor<R> q4 = four(qr.v, qs), k4 = four(kr.v, ks), v4 = four(vr.v, ks);
    const auto fwd = reference::attention_forward<R>(cfg, q4, k4, v4);
    AttentionBoundOptions<R> opt;
    opt.parts = c.part.attention_parts;
    opt.q_error = four(qr.e, qs);
    opt.k_error = four(kr.e, ks);
    opt.v_error = four(vr.e, ks);
    Tensor<R> do4;
    if (dout != nullptr) {
      const Approx<R> dr = cols_of(*dout, hs.q_offset * d, hs.q_count * d);
      do4 = four(dr.v, qs);
      opt.dout_error = four(dr.e, qs);
    }
    const auto bnd = attention_bounds<R>(cfg, q4, k4, v4, do4, c.arith, opt);
    const auto rb = attention_reference_error<R>(cfg, q4, k4, v4, do4);
    auto put = [&](Approx<R>& into, std::size_t first, const Tensor<R>& val, const Tensor<R>& b1,
                   const Tensor<R>& b2) {
      const std::size_t w = val.size() / n, width = into.v.dim(1);
      for (std::size_t t = 0; t < n; ++t) {
        for (std::size_t j = 0; j < w; ++j) {
          into.v[t * width + first + j] = val[t * w + j];
          into.e[t * width + first + j] = b1[t * w + j] + b2[t * w + j];
        }
      }
    };
    put(out.o, hs.q_offset * d, fwd.out, bnd.out, rb.out);
    if (dout == nullptr) continue;
    const auto g = reference::attention_backward<R>(cfg, q4, k4, v4, fwd, do4);
    put(out.dq, hs.q_offset * d, g.dq, bnd.dq, rb.dq);
    put(out.dk.back(), 0, g.dk, bnd.dk, rb.dk);
    put(out.dv.back(), 0, g.dv, bnd.dv, rb.dv);
  }
  return out;
}

// The ranks' query-feature counts (the output projection's parts), in rank order.
inline std::vector<std::size_t> q_parts(const ModelPartition& p, std::size_t d) {
  std::vector<std::size_t> o;
  for (const auto& h : p.heads) o.push_back(h.q_count * d);
  return o;
}

template <class R>
LayerApprox<R> layer_fwd(const Context<R>& c, const TransformerLayerParams<R>& w,
                         const Approx<R>& x) {
  const std::size_t H = c.cfg.hidden, d = c.cfg.head_dim;
  LayerApprox<R> s;
  s.x = x;
  s.a = norm_fwd(c, x, w.norm1_gamma, w.norm1_beta);
  s.q = linear_of(s.a, w.wq, w.bq, {H}, c.arith);
  s.k = linear_of(s.a, w.wk, w.bk, {H}, c.arith);
  s.v = linear_of(s.a, w.wv, w.bv, {H}, c.arith);
  s.o = attention_core(c, s.q, s.k, s.v, static_cast<const Approx<R>*>(nullptr)).o;
  s.h = add_t(x, linear_of(s.o, w.wo, w.bo, q_parts(c.part, d), c.arith), c.u);
  s.b = norm_fwd(c, s.h, w.norm2_gamma, w.norm2_beta);
  s.mh = linear_of(s.b, w.w_up, w.b_up, {H}, c.arith);
  const auto m = reference::mlp<R>(s.b.v, w.w_up, w.b_up, w.w_down, w.b_down, c.cfg.activation);
  s.ma = {m.a, activation_error<R>(c.cfg.activation, s.mh.v, s.mh.e, c.arith)};
  return s;
}

template <class R>
Approx<R> layer_out(const Context<R>& c, const TransformerLayerParams<R>& w,
                    const LayerApprox<R>& s) {
  return add_t(s.h, linear_of(s.ma, w.w_down, w.b_down, c.part.ffn_parts, c.arith), c.u);
}

// The fused up projection's columns in rank order (rank r's gate features, then its up
// features): the order dx's contraction over the ffn axis is cut in.
inline std::vector<std::size_t> fused_ffn_order(Activation act, const std::vector<std::size_t>& ffn,
                                                std::size_t F) {
  const std::size_t k = act == Activation::swiglu ? 2 : 1;
  std::vector<std::size_t> order;
  for (std::size_t r = 0, off = 0; r < ffn.size(); off += ffn[r], ++r) {
    for (std::size_t h = 0; h < k; ++h) {
      for (std::size_t q = 0; q < ffn[r]; ++q) order.push_back(h * F + off + q);
    }
  }
  return order;
}

// Returns the layer input's gradient; g receives the parameters' gradients (finalize's sums over
// the op calls, before the division by N).
template <class R>
Approx<R> layer_bwd(const Context<R>& c, const TransformerLayerParams<R>& w,
                    const LayerApprox<R>& s, const Approx<R>& dy, LayerGrads<R>& g) {
  const std::size_t H = c.cfg.hidden, d = c.cfg.head_dim, F = c.cfg.ffn;
  const Activation act = c.cfg.activation;
  const bool bias = c.cfg.linear_bias;
  // MLP: da = dy·W_down (one part over H per rank), dh = f'(h)⊙da, dx over the fused ffn axis.
  const Approx<R> da = input_grad_of(dy, w.w_down, {H}, c.arith);
  const auto fwd = reference::mlp<R>(s.b.v, w.w_up, w.b_up, w.w_down, w.b_down, act);
  const auto mg = reference::mlp_backward<R>(s.b.v, w.w_up, w.w_down, fwd, bias, dy.v, act);
  const Approx<R> dh{mg.dh, activation_grad_error<R>(act, s.mh.v, s.mh.e, da.v, da.e, c.arith)};
  const auto order = fused_ffn_order(act, c.part.ffn_parts, F);
  const std::size_t n = c.tokens(), kf = order.size();
  Approx<R> dh_p{Tensor<R>(Shape{n, kf}), Tensor<R>(Shape{n, kf})};
  Tensor<R> wup_p(Shape{kf, H});
  for (std::size_t col = 0; col < kf; ++col) {
    for (std::size_t t = 0; t < n; ++t) {
      dh_p.v[t * kf + col] = dh.v[t * kf + order[col]];
      dh_p.e[t * kf + col] = dh.e[t * kf + order[col]];
    }
    for (std::size_t i = 0; i < H; ++i) wup_p[col * H + i] = w.w_up[order[col] * H + i];
  }
  std::vector<std::size_t> dx_parts;
  for (const std::size_t f : c.part.ffn_parts) dx_parts.push_back(kf / F * f);
  const Approx<R> dx_mlp = input_grad_of(dh_p, wup_p, dx_parts, c.arith);
  g.w_up = param_grad(c, dh, s.b);
  g.w_down = param_grad(c, dy, s.ma);
  if (bias) {
    g.b_up = bias_grad(c, dh);
    g.b_down = bias_grad(c, dy);
  }
  const auto n2 = norm_bwd(c, s.h, w.norm2_gamma, dx_mlp);
  g.norm2_gamma = n2.dgamma;
  g.norm2_beta = n2.dbeta;
  const Approx<R> dhh = add_t(dy, n2.dx, c.u);
  // Attention: do = dh·Wo (per rank its columns, one part over H), the core, then
  // dx = Σ_r [dq_r | dk_r | dv_r]·[Wq_r; Wk_r; Wv_r] summed in T over the ranks.
  const Approx<R> dout = input_grad_of(dhh, w.wo, {H}, c.arith);
  const CoreApprox<R> core = attention_core(c, s.q, s.k, s.v, &dout);
  std::size_t width = 0;
  std::vector<std::size_t> parts;
  for (const auto& hs : c.part.heads) {
    parts.push_back((hs.q_count + 2 * hs.kv_count) * d);
    width += parts.back();
  }
  Approx<R> cat{Tensor<R>(Shape{n, width}), Tensor<R>(Shape{n, width})};
  Tensor<R> wcat(Shape{width, H});
  std::size_t col = 0;
  for (std::size_t r = 0; r < c.part.heads.size(); ++r) {
    const auto& hs = c.part.heads[r];
    const std::size_t qd = hs.q_count * d, kd = hs.kv_count * d;
    const Approx<R> pieces[] = {cols_of(core.dq, hs.q_offset * d, qd), core.dk[r], core.dv[r]};
    const Tensor<R> weights[] = {rows_range(w.wq, hs.q_offset * d, qd),
                                 rows_range(w.wk, hs.kv_offset * d, kd),
                                 rows_range(w.wv, hs.kv_offset * d, kd)};
    for (int p = 0; p < 3; ++p) {
      const std::size_t pw = pieces[p].v.dim(1);
      for (std::size_t j = 0; j < pw; ++j, ++col) {
        for (std::size_t t = 0; t < n; ++t) {
          cat.v[t * width + col] = pieces[p].v[t * pw + j];
          cat.e[t * width + col] = pieces[p].e[t * pw + j];
        }
        for (std::size_t i = 0; i < H; ++i) wcat[col * H + i] = weights[p][j * H + i];
      }
    }
  }
  const Approx<R> dx_att = input_grad_of(cat, wcat, parts, c.arith);
  g.wq = param_grad(c, core.dq, s.a);
  g.wo = param_grad(c, dhh, s.o);
  if (bias) {
    g.bq = bias_grad(c, core.dq);
    g.bo = bias_grad(c, dhh);
  }
  // wk, wv (bk, bv): per kv head, the ranks holding it (one, or a kv group sharing it); per op
  // call each rank's partial rounded to T, summed in T over the group (per micro-batch), then the
  // calls summed in A.
  const std::size_t kd_all = c.cfg.kv_heads * d;
  g.wk = exact(Tensor<R>(Shape{kd_all, H}));
  g.wv = exact(Tensor<R>(Shape{kd_all, H}));
  if (bias) {
    g.bk = exact(Tensor<R>(Shape{kd_all}));
    g.bv = exact(Tensor<R>(Shape{kd_all}));
  }
  for (std::size_t kv = 0; kv < c.cfg.kv_heads; ++kv) {
    std::vector<std::size_t> holders;
    for (std::size_t r = 0; r < c.part.heads.size(); ++r) {
      const auto& hs = c.part.heads[r];
      if (hs.q_count > 0 && kv >= hs.kv_offset && kv < hs.kv_offset + hs.kv_count) {
        holders.push_back(r);
      }
    }
    auto one_head = [&](const std::vector<Approx<R>>& dkv, const Approx<R>& x, bool is_bias) {
      std::vector<Approx<R>> calls;
      for (const auto& rows : c.part.token_groups) {
        if (rows.empty()) continue;
        std::vector<Approx<R>> partials;
        for (const std::size_t r : holders) {
          const auto& hs = c.part.heads[r];
          const Approx<R> piece = cols_of(dkv[r], (kv - hs.kv_offset) * d, d);
          partials.push_back(weight_grad_of(piece, x, rows, c.arith));
        }
        calls.push_back(sum_in_t(partials, c.u));
      }
      Approx<R> s =
          calls.empty() ? exact(Tensor<R>(Shape{d, is_bias ? 1 : H})) : sum_in_a(calls, c.u);
      return s;
    };
    auto place = [&](Approx<R>& into, const Approx<R>& head, std::size_t w_cols) {
      for (std::size_t i = 0; i < head.v.size(); ++i) {
        into.v[kv * d * w_cols + i] = head.v[i];
        into.e[kv * d * w_cols + i] = head.e[i];
      }
    };
    if (holders.empty()) continue;  // a kv head no rank computes with (no query heads): 0
    place(g.wk, one_head(core.dk, s.a, false), H);
    place(g.wv, one_head(core.dv, s.a, false), H);
    if (bias) {
      const Approx<R> one = exact(ones<R>(n));
      place(g.bk, one_head(core.dk, one, true), 1);
      place(g.bv, one_head(core.dv, one, true), 1);
    }
  }
  const auto n1 = norm_bwd(c, s.x, w.norm1_gamma, dx_att);
  g.norm1_gamma = n1.dgamma;
  g.norm1_beta = n1.dbeta;
  return add_t(dhh, n1.dx, c.u);
}

// The loss sum's per-token loss and the logits' gradient, on the library's steps
// (vocab_cross_entropy.hpp without smoothing and weights), per token.
template <class R>
struct LossApprox {
  std::vector<Tracked<R>> token_loss;  // 0 exactly for ignored tokens
  Approx<R> dlogits;                   // rounded to T
};

template <class R>
LossApprox<R> cross_entropy_steps(const Context<R>& c, const Approx<R>& z,
                                  std::span<const std::int64_t> targets) {
  const std::size_t n = z.v.dim(0), V = z.v.dim(1);
  const auto& P = c.P;
  LossApprox<R> o{std::vector<Tracked<R>>(n), exact(Tensor<R>(z.v.shape()))};
  std::vector<Tracked<R>> row(V), ex(V);
  for (std::size_t t = 0; t < n; ++t) {
    if (c.cfg.ignore_index && targets[t] == *c.cfg.ignore_index) {
      o.token_loss[t] = Propagator<R>::exact(R(0));
      continue;
    }
    for (std::size_t v = 0; v < V; ++v) row[v] = {z.v[t * V + v], z.e[t * V + v], R(0)};
    const Tracked<R> m = max_of<R>(row);
    for (std::size_t v = 0; v < V; ++v) ex[v] = exp_of(P.sub(row[v], m), c.u);
    const Tracked<R> S = P.sum(ex);
    const Tracked<R> Lg = log_of(S, c.u);
    const auto y = static_cast<std::size_t>(targets[t]);
    o.token_loss[t] = P.add(Lg, P.sub(m, row[y]));
    for (std::size_t v = 0; v < V; ++v) {
      Tracked<R> p = P.div(ex[v], S);
      if (v == y) p = P.sub(p, Propagator<R>::exact(R(1)));
      const Tracked<R> gt = P.to_storage(p);
      o.dlogits.v[t * V + v] = gt.v;
      o.dlogits.e[t * V + v] = gt.e + gt.r;
    }
  }
  return o;
}

}  // namespace model_detail

// The expected results of one training step and their bounds, for an implementation of
// lib/ops/model/model.hpp's contract in `arith` on `part`. Arguments as the definition's
// model_train_step, the partition and the arithmetic last. cfg.norm.eps, opt's clip_eps,
// max_grad_norm and learning_rate are taken as the values the implementation computes with (the
// library converts them to acc_t<T>: pass values exact in it).
template <HighPrecision R = hp>
ModelExpected<R> model_train_step_bounds(const ModelConfig& cfg, const OptimizerConfig& opt,
                                         const ModelParams<R>& p, const ModelBatch& batch,
                                         const ModelPartition& part, const Arithmetic& arith) {
  using namespace model_detail;
  using std::abs;
  const std::size_t B = batch.sequences, L = batch.seq_len, H = cfg.hidden, V = cfg.vocab;
  const Context<R> c(cfg, part, arith, B, L);
  const auto& P = c.P;
  const Tensor<R>& W = cfg.tied_embedding ? p.embedding : p.output;
  // Forward.
  std::vector<LayerApprox<R>> saved;
  Approx<R> x = exact(reference::embedding<R>(batch.ids, p.embedding));
  for (const auto& w : p.layers) {
    saved.push_back(layer_fwd(c, w, x));
    x = layer_out(c, w, saved.back());
  }
  const Approx<R> f = norm_fwd(c, x, p.final_gamma, p.final_beta);
  const Approx<R> logits = linear_of(f, W, Tensor<R>(), {H}, arith);
  const LossApprox<R> ce = cross_entropy_steps(c, logits, batch.targets);
  ModelExpected<R> out;
  out.tokens = counted_targets(cfg, batch);
  // The loss: per op call Σ_t l_t in A rounded to T; the calls summed in A; / N in A.
  {
    std::vector<Tracked<R>> calls, terms;
    for (const auto& rows : part.token_groups) {
      if (rows.empty()) continue;
      terms.clear();
      for (const std::size_t t : rows) terms.push_back(ce.token_loss[t]);
      calls.push_back(P.to_storage(P.sum(terms)));
    }
    Tracked<R> total = calls.empty() ? Propagator<R>::exact(R(0)) : P.sum(calls);
    if (out.tokens > 0) total = P.div(total, Propagator<R>::exact(R(out.tokens)));
    else total = Propagator<R>::exact(R(0));
    out.loss = scalar(total);
  }
  // Backward of the loss sum.
  ModelGrads<R> g;
  g.layers.resize(cfg.layers);
  const Approx<R> df = input_grad_of(ce.dlogits, W, part.vocab_parts, arith);
  const Approx<R> dW = param_grad(c, ce.dlogits, f);
  const auto fb = norm_bwd(c, x, p.final_gamma, df);
  g.final_gamma = fb.dgamma;
  g.final_beta = fb.dbeta;
  Approx<R> dx = fb.dx;
  for (std::size_t l = cfg.layers; l-- > 0;)
    dx = layer_bwd(c, p.layers[l], saved[l], dx, g.layers[l]);
  out.input_grad = dx;
  // The embedding's gradient: per op call Σ of its tokens' rows (one-hot contraction).
  {
    const std::size_t n = B * L;
    Tensor<R> onehot(Shape{n, V});
    for (std::size_t t = 0; t < n; ++t) onehot[t * V + static_cast<std::size_t>(batch.ids[t])] = 1;
    g.embedding = param_grad(c, exact(onehot), dx);
    if (cfg.tied_embedding) {
      g.embedding = sum_in_a<R>({g.embedding, dW}, c.u);
    } else {
      g.output = dW;
    }
  }
  // Divide by N, the norm, the coefficient, the step.
  const Tracked<R> inv =
      out.tokens == 0 ? Propagator<R>::exact(R(0))
                      : P.div(Propagator<R>::exact(R(1)), Propagator<R>::exact(R(out.tokens)));
  std::vector<Tracked<R>> squares;
  out.grads.layers.resize(cfg.layers);
  out.grads_bound.layers.resize(cfg.layers);
  // Walk g and the result structs together.
  auto finish = [&](const Approx<R>& a, Tensor<R>& v, Tensor<R>& e, bool counted) {
    if (a.v.empty()) return;  // an absent bias or beta
    v = Tensor<R>(a.v.shape());
    e = Tensor<R>(a.v.shape());
    for (std::size_t i = 0; i < a.v.size(); ++i) {
      Tracked<R> t{a.v[i], a.e[i], R(0)};
      t = out.tokens == 0 ? Propagator<R>::exact(R(0)) : P.mul(t, inv);
      v[i] = t.v;
      e[i] = t.e + t.r;
      if (counted) squares.push_back(P.mul(t, t));
    }
  };
  finish(g.embedding, out.grads.embedding, out.grads_bound.embedding, true);
  for (std::size_t l = 0; l < cfg.layers; ++l) {
    auto& a = g.layers[l];
    auto& v = out.grads.layers[l];
    auto& e = out.grads_bound.layers[l];
    const std::pair<Approx<R>*, std::pair<Tensor<R>*, Tensor<R>*>> all[] = {
        {&a.norm1_gamma, {&v.norm1_gamma, &e.norm1_gamma}},
        {&a.norm1_beta, {&v.norm1_beta, &e.norm1_beta}},
        {&a.wq, {&v.wq, &e.wq}},
        {&a.bq, {&v.bq, &e.bq}},
        {&a.wk, {&v.wk, &e.wk}},
        {&a.bk, {&v.bk, &e.bk}},
        {&a.wv, {&v.wv, &e.wv}},
        {&a.bv, {&v.bv, &e.bv}},
        {&a.wo, {&v.wo, &e.wo}},
        {&a.bo, {&v.bo, &e.bo}},
        {&a.norm2_gamma, {&v.norm2_gamma, &e.norm2_gamma}},
        {&a.norm2_beta, {&v.norm2_beta, &e.norm2_beta}},
        {&a.w_up, {&v.w_up, &e.w_up}},
        {&a.b_up, {&v.b_up, &e.b_up}},
        {&a.w_down, {&v.w_down, &e.w_down}},
        {&a.b_down, {&v.b_down, &e.b_down}}};
    for (const auto& [src, dst] : all) finish(*src, *dst.first, *dst.second, true);
  }
  finish(g.final_gamma, out.grads.final_gamma, out.grads_bound.final_gamma, true);
  finish(g.final_beta, out.grads.final_beta, out.grads_bound.final_beta, true);
  if (!cfg.tied_embedding) finish(g.output, out.grads.output, out.grads_bound.output, true);
  const Tracked<R> norm = squares.empty() ? Propagator<R>::exact(R(0)) : P.sqrt(P.sum(squares));
  out.grad_norm = scalar(norm);
  Tracked<R> coef = Propagator<R>::exact(R(1));
  if (opt.max_grad_norm > 0) {
    const Tracked<R> ratio = P.div(Propagator<R>::exact(R(opt.max_grad_norm)),
                                   P.add(norm, Propagator<R>::exact(R(opt.clip_eps))));
    // min(ratio, 1): |min(â, 1) − min(a, 1)| ≤ |â − a|; the value is the exact one's branch.
    coef = ratio.v < 1 ? ratio : Tracked<R>{R(1), ratio.e, ratio.r};
  }
  out.clip_coef = scalar(coef);
  const Tracked<R> step = P.mul(Propagator<R>::exact(R(opt.learning_rate)), coef);
  out.params = p;
  out.params_bound = p;
  ModelParams<R> gv = out.grads, ge = out.grads_bound;
  auto sgd = [&](Tensor<R>& w, Tensor<R>& wb, const Tensor<R>& gvv, const Tensor<R>& gee) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      const Tracked<R> upd = P.mul(step, Tracked<R>{gvv[i], gee[i], R(0)});
      const Tracked<R> np = P.to_storage(P.sub(Propagator<R>::exact(w[i]), upd));
      w[i] = np.v;
      wb[i] = np.e + np.r;
    }
  };
  // Walk params with their grads (the tied output has no tensor of its own).
  sgd(out.params.embedding, out.params_bound.embedding, gv.embedding, ge.embedding);
  for (std::size_t l = 0; l < cfg.layers; ++l) {
    auto& pv = out.params.layers[l];
    auto& pb = out.params_bound.layers[l];
    const auto& a = gv.layers[l];
    const auto& b = ge.layers[l];
    const std::tuple<Tensor<R>*, Tensor<R>*, const Tensor<R>*, const Tensor<R>*> all[] = {
        {&pv.norm1_gamma, &pb.norm1_gamma, &a.norm1_gamma, &b.norm1_gamma},
        {&pv.norm1_beta, &pb.norm1_beta, &a.norm1_beta, &b.norm1_beta},
        {&pv.wq, &pb.wq, &a.wq, &b.wq},
        {&pv.bq, &pb.bq, &a.bq, &b.bq},
        {&pv.wk, &pb.wk, &a.wk, &b.wk},
        {&pv.bk, &pb.bk, &a.bk, &b.bk},
        {&pv.wv, &pb.wv, &a.wv, &b.wv},
        {&pv.bv, &pb.bv, &a.bv, &b.bv},
        {&pv.wo, &pb.wo, &a.wo, &b.wo},
        {&pv.bo, &pb.bo, &a.bo, &b.bo},
        {&pv.norm2_gamma, &pb.norm2_gamma, &a.norm2_gamma, &b.norm2_gamma},
        {&pv.norm2_beta, &pb.norm2_beta, &a.norm2_beta, &b.norm2_beta},
        {&pv.w_up, &pb.w_up, &a.w_up, &b.w_up},
        {&pv.b_up, &pb.b_up, &a.b_up, &b.b_up},
        {&pv.w_down, &pb.w_down, &a.w_down, &b.w_down},
        {&pv.b_down, &pb.b_down, &a.b_down, &b.b_down}};
    for (const auto& [w, wb, gvv, gee] : all) sgd(*w, *wb, *gvv, *gee);
  }
  sgd(out.params.final_gamma, out.params_bound.final_gamma, gv.final_gamma, ge.final_gamma);
  sgd(out.params.final_beta, out.params_bound.final_beta, gv.final_beta, ge.final_beta);
  if (!cfg.tied_embedding) sgd(out.params.output, out.params_bound.output, gv.output, ge.output);
  // R's own roundings, and the bounds' evaluation in R: every bound raised by 2^-40 of itself.
  const R slack = 1 + ldexp(R(1), -40);
  auto raise = [&](Tensor<R>& e) {
    for (auto& b : e.values()) b = no_nan(R(b * slack));
  };
  raise(out.loss.e);
  raise(out.grad_norm.e);
  raise(out.clip_coef.e);
  raise(out.input_grad.e);
  detail::for_each_param_pair(out.grads_bound, out.params_bound, [&](Tensor<R>& a, Tensor<R>& b) {
    raise(a);
    raise(b);
  });
  return out;
}

}  // namespace shardcheck::reference
