// The attention bound's evaluation on the fast path (attention_bound.hpp, step (7)): the same
// formulas as detail::AttentionModel's loops, with every length-d, length-Lk and length-N sum of
// nonnegative magnitudes one magnitude_sum (contraction/magnitude_sum.hpp) per head or per kv
// head, and the per-(row, key) work (ε_s, a_s, ρ_s, π_s, E_dS, ...) left in R. And
// detail::attention_model, which picks the evaluation by the contraction path.
//
// Per sequence b and kv head j, for each query head i of its group (i = j·G + i', G = h/g), with
// |x|⁺ = |x| + e_x and the head blocks of attention_products.hpp:
//   S     = Q·Kᵀ                              the scores' dots (values, on `path`)
//   M_qk  = |Q|⁺·(|K|⁺)ᵀ                       (1) Σ_e |q_e|⁺|k_se|⁺ for every (t, s)
//   I_qk  = |Q|·E_kᵀ + E_q·(|K|⁺)ᵀ             (1) Σ_e (|q|ek + |k|eq + eq·ek): its own sum of
//                                              nonnegative terms, never a difference
//   row t: the softmax of its visible keys, ε_s, a_s, Δ, ρ_s as the loops; then
//   E_out = W·|V|⁺ + P·E_v + the underflow term, W[t, s] = (ρ_s + (1 + ρ_s)·g_out)·P_s
//   dP = dout·Vᵀ (values), M_dv = |dout|⁺·(|V|⁺)ᵀ, I_dv = |dout|·E_vᵀ + E_do·(|V|⁺)ᵀ;
//   per (t, s) π_s, E_dS, |dS|, dŜ as the loops; then
//   E_dq  = Wq·|K|⁺ + |dS|·K_c + (n + 2)η,      Wq = σ⁺·(E_dS + γ_{n+p}·dŜ),
//                                              K_c = σ⁺·E_k + δσ·|K|
// and per kv head, the group's heads stacked along the contracted axis (G·Lq rows, as
// attention_products.hpp's dk and dv):
//   E_dk  = Wkᵀ·|Q_G|⁺ + |dS_G|ᵀ·Q_c,G + (N_s + 2)η,   Wk = σ⁺·(E_dS + γ_{N_s+p}·dŜ)
//   E_dv  = Wvᵀ·|dout_G|⁺ + P_Gᵀ·E_do,G + (N_s + 1)η,  Wv = π·P + η + γ_{N_s+p−1}·P̂
// (N_s = G·|{t : t sees s}|, the loops' count of the (head, query) pairs that see key s).
// The γ factors of a row (γ_{n+p}) or of a key (γ_{N_s+p}) are constants of the sum they
// scale, so they are folded into its weights. Off the mask every weight is exactly 0, so the
// products meet the masked keys' values only through exact zeros (0·x = 0: every operand is
// finite, the inputs being finite, which attention_model checks); an unbounded row (Δ ≥ 1) has
// zero weights too, and its out, lse, dq and its keys' dk, dv are set to +inf as the loops do.
// What is left in loops: the max of |v_s|⁺ over a row's keys (in doubles rounded up, by a
// prefix table when the visible keys are 0..n−1) and D = dout·out, E_D (length d per row).
#pragma once

#include "reference/attention/attention_bound.hpp"
#include "reference/attention/attention_products.hpp"
#include "reference/contraction/magnitude_sum.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

namespace shardcheck::reference::detail {

// One input's magnitudes: |x|, |x|⁺ = |x| + e_x and e_x (empty for an exact input).
template <class R>
struct InputMagnitudes {
  Tensor<R> absolute, raised, err;

  InputMagnitudes(const Tensor<R>& x, const Tensor<R>* e)
      : absolute(x.shape()), raised(x.shape()), err(e != nullptr ? *e : Tensor<R>()) {
    using std::abs;
    for (std::size_t i = 0; i < x.size(); ++i) {
      absolute[i] = abs(x[i]);
      raised[i] = err.empty() ? absolute[i] : R(absolute[i] + err[i]);
    }
  }
};

// Dots of perturbed factors: their values, and the two magnitude sums mag = Σ|x|⁺|y|⁺ and
// in = Σ(|x|ey + ex|y|⁺) (empty when both inputs are exact).
template <class R>
struct DotMagnitudes {
  Tensor<R> value, mag, in;
  R in_at(std::size_t x) const { return in.empty() ? R(0) : in[x]; }
};

// (7) The fast path's evaluation of steps (1)–(4): add_heads() per (sequence, kv head), then
// AttentionModel::finish.
template <class R>
class AttentionProductsModel : public AttentionModel<R> {
  using Base = AttentionModel<R>;

 public:
  AttentionProductsModel(const AttentionConfig& cfg, const Tensor<R>& q, const Tensor<R>& k,
                         const Tensor<R>& v, const Tensor<R>& dout, const ErrorModel<R>& em,
                         ContractionPath path)
      : Base(cfg, q, k, v, dout, em, path),
        qo_(q, path),
        ko_(k, path),
        vo_(v, path),
        doo_(dout, path),
        qm_(q, em.eq),
        km_(k, em.ek),
        vm_(v, em.ev),
        dom_(dout, em.edo),
        qc_(combined(qm_)),
        kc_(combined(km_)) {
    if (this->backward_) {
      this->B_.dk_acc = Tensor<R>(k.shape());
      this->B_.dv_acc = Tensor<R>(k.shape());
    }
  }

  void add_heads() {
    for (std::size_t b = 0; b < this->D_.batch; ++b) {
      for (std::size_t j = 0; j < this->D_.g; ++j) add_group(b, j);
    }
  }

 private:
  // One row of the forward, kept for the backward.
  struct Row {
    RowSoftmax<R> row;
    std::vector<R> eps;
    R e_lse{0};
    bool bounded = false;
  };

  // The group's weights of dk and dv, [Lk, G·Lq] (key s, column i'·Lq + t), and the keys that
  // an unbounded row sees.
  struct GroupWeights {
    Tensor<R> wk, ds, wv, p;
    std::vector<char> unbounded;
    std::vector<std::size_t> count;  // N_s
    std::vector<R> g_dk, g_dv;       // γ_{N_s+p}, γ_{N_s+p−1}
  };

  // σ⁺·e_x + δσ·|x|, the weight of |dS| in dq (of k) and dk (of q); empty when 0.
  Tensor<R> combined(const InputMagnitudes<R>& m) const {
    if (m.err.empty() && this->dsig_ == 0) return {};
    Tensor<R> c(m.absolute.shape());
    for (std::size_t i = 0; i < c.size(); ++i) {
      c[i] = (m.err.empty() ? R(0) : R(this->sig_hat_ * m.err[i])) + this->dsig_ * m.absolute[i];
    }
    return c;
  }

  HeadBlocks query_blocks() const { return {this->D_.lq, this->D_.h, this->D_.d}; }
  HeadBlocks key_blocks() const { return {this->D_.lk, this->D_.g, this->D_.d}; }

  // The dots of query head i's rows of x (q or dout) with its kv head's rows of y (k or v),
  // [Lq, Lk]: their values x·yᵀ on `path`, and Σ_e |x_e|⁺|y_se|⁺ and the input-error sum.
  DotMagnitudes<R> head_dots(const ContractionOperand<R>& xv, const InputMagnitudes<R>& x,
                             const ContractionOperand<R>& yv, const InputMagnitudes<R>& y,
                             std::size_t b, std::size_t i) const {
    const auto qb = query_blocks(), kb = key_blocks();
    const std::size_t j = i / this->D_.group, all_d[] = {this->D_.d};
    const std::size_t xo = qb.offset(b, i), yo = kb.offset(b, j), lq = this->D_.lq,
                      lk = this->D_.lk;
    DotMagnitudes<R> r;
    r.value =
        contraction_at<R>(xv, xo, qb.rows(), yv, yo, kb.transposed(), all_d, this->path_).value;
    const MagnitudeTerm<R> mag[] = {{{&x.raised, xo, qb.rows()}, {&y.raised, yo, kb.transposed()}}};
    r.mag = magnitude_sum<R>(mag, lq, lk, this->path_);
    std::vector<MagnitudeTerm<R>> in;
    if (!y.err.empty()) in.push_back({{&x.absolute, xo, qb.rows()}, {&y.err, yo, kb.transposed()}});
    if (!x.err.empty()) in.push_back({{&x.err, xo, qb.rows()}, {&y.raised, yo, kb.transposed()}});
    if (!in.empty()) r.in = magnitude_sum<R>(in, lq, lk, this->path_);
    return r;
  }

  void add_group(std::size_t b, std::size_t j) {
    const auto& D = this->D_;
    const std::size_t gq = D.group * D.lq;
    GroupWeights gw;
    if (this->backward_) {
      for (auto* t : {&gw.wk, &gw.ds, &gw.wv, &gw.p}) *t = Tensor<R>(Shape{D.lk, gq});
    }
    gw.unbounded.assign(D.lk, 0);
    gw.count.assign(D.lk, 0);
    for (std::size_t t = 0; t < D.lq; ++t) {
      for (std::size_t s = 0; s < D.lk; ++s) {
        if (mask_visible(this->cfg_.mask, b, t, s)) gw.count[s] += D.group;
      }
    }
    for (std::size_t s = 0; s < D.lk; ++s) {
      const std::size_t n_s = gw.count[s];
      gw.g_dk.push_back(n_s == 0 ? R(0) : gamma<R>(n_s + this->p_, this->u_));
      gw.g_dv.push_back(n_s == 0 ? R(0) : gamma<R>(n_s + this->p_ - 1, this->u_));
    }
    const auto vmax = value_maxima(b, j);
    for (std::size_t ip = 0; ip < D.group; ++ip) {
      auto rows = forward_head(b, j * D.group + ip, vmax);
      if (this->backward_) backward_head(b, j * D.group + ip, ip, rows, gw);
    }
    if (this->backward_) group_gradients(b, j, gw);
  }

  // |v_s|⁺ of kv head j as doubles rounded up, [Lk, d], and their running maxima over s.
  struct ValueMaxima {
    std::vector<double> up, prefix;
  };
  ValueMaxima value_maxima(std::size_t b, std::size_t j) const {
    const auto& D = this->D_;
    ValueMaxima m;
    m.up.resize(D.lk * D.d);
    m.prefix.resize(D.lk * D.d);
    for (std::size_t s = 0; s < D.lk; ++s) {
      for (std::size_t e = 0; e < D.d; ++e) {
        const auto x = static_cast<double>(double_at_least(vm_.raised[D.ki(b, s, j, e)]));
        m.up[s * D.d + e] = x;
        m.prefix[s * D.d + e] = s == 0 ? x : std::max(x, m.prefix[(s - 1) * D.d + e]);
      }
    }
    return m;
  }

  // (3) max_s |v_se|⁺ over the visible keys of the current row (row_).
  R value_max(const ValueMaxima& m, std::size_t e) const {
    const auto& keys = this->row_.keys;
    const std::size_t d = this->D_.d;
    if (keys.back() + 1 == keys.size()) return R(m.prefix[keys.back() * d + e]);  // keys 0..n−1
    double x = 0;
    for (std::size_t s : keys) x = std::max(x, m.up[s * d + e]);
    return R(x);
  }

  // (1)–(3) of query head i's rows: S, M_qk, I_qk, then per row ε, a, Δ, the weights W and lse;
  // then E_out = W·|V|⁺ + P·E_v.
  std::vector<Row> forward_head(std::size_t b, std::size_t i, const ValueMaxima& vmax) {
    using std::abs;
    const auto& D = this->D_;
    const std::size_t j = i / D.group, lq = D.lq, lk = D.lk, d = D.d;
    const auto kb = key_blocks();
    const auto dm = head_dots(qo_, qm_, ko_, km_, b, i);
    const Tensor<R>& s = dm.value;
    std::vector<Row> rows(lq);
    Tensor<R> w(Shape{lq, lk}), p(Shape{lq, lk});
    auto& row = this->row_;
    for (std::size_t t = 0; t < lq; ++t) {
      row.keys.clear();
      row.qk.clear();
      for (std::size_t x = 0; x < lk; ++x) {
        if (!mask_visible(this->cfg_.mask, b, t, x)) continue;
        row.keys.push_back(x);
        row.qk.push_back(s[t * lk + x]);
      }
      if (row.keys.empty()) continue;  // empty row: exact, bound 0
      finish_row_softmax(R(score_scale(this->cfg_)), row);
      const std::size_t n = row.keys.size();
      ScoreErrors<R> se;
      se.eps.resize(n);
      for (std::size_t x = 0; x < n; ++x) {
        const std::size_t st = t * lk + row.keys[x];
        se.eps[x] = this->score_error(dm.mag[st], dm.in_at(st), abs(row.qk[x]));
      }
      this->finish_score_errors(se);
      const auto we = this->weight_errors(se);
      if (!(we.delta < 1)) {
        this->unbounded_row(b, i, t);
        std::swap(rows[t].row, row);
        continue;
      }
      const auto wt = this->output_weights(we);
      for (std::size_t x = 0; x < n; ++x) {
        w[t * lk + row.keys[x]] = wt[x];
        p[t * lk + row.keys[x]] = row.p[x];
      }
      rows[t].e_lse = this->lse_error(we);
      this->B_.lse[D.li(b, i, t)] = rows[t].e_lse;
      rows[t].eps = std::move(se.eps);
      rows[t].bounded = true;
      std::swap(rows[t].row, row);
    }
    std::vector<MagnitudeTerm<R>> terms{
        {{&w, 0, row_major_layout(lq, lk)}, {&vm_.raised, kb.offset(b, j), kb.rows()}}};
    if (!vm_.err.empty())
      terms.push_back({{&p, 0, row_major_layout(lq, lk)}, {&vm_.err, kb.offset(b, j), kb.rows()}});
    const auto e_out = magnitude_sum<R>(terms, lq, d, this->path_);
    for (std::size_t t = 0; t < lq; ++t) {
      if (!rows[t].bounded) continue;
      std::swap(row, rows[t].row);
      for (std::size_t e = 0; e < d; ++e) {
        this->set_output(
            D.qi(b, t, i, e),
            e_out[t * d + e] + this->output_floor(row.keys.size(), value_max(vmax, e)));
      }
      std::swap(row, rows[t].row);
    }
    return rows;
  }

  // (4) Query head i's rows (head i' of its group): dP, M_dv, I_dv, per (t, s) E_dS; E_dq =
  // Wq·|K|⁺ + |dS|·K_c; and the head's columns of the group's dk and dv weights.
  void backward_head(std::size_t b, std::size_t i, std::size_t ip, std::vector<Row>& rows,
                     GroupWeights& gw) {
    using std::abs;
    const auto& D = this->D_;
    const std::size_t j = i / D.group, lq = D.lq, lk = D.lk, d = D.d, gq = D.group * lq;
    const auto kb = key_blocks();
    const auto dm = head_dots(doo_, dom_, vo_, vm_, b, i);
    const Tensor<R>& dp = dm.value;
    const R sig = this->sig_hat_, u = this->u_;
    Tensor<R> wq(Shape{lq, lk}), ds(Shape{lq, lk});
    auto& row = this->row_;
    for (std::size_t t = 0; t < lq; ++t) {
      if (!rows[t].row.keys.empty() && !rows[t].bounded) {
        for (std::size_t s : rows[t].row.keys) gw.unbounded[s] = 1;
      }
      if (!rows[t].bounded) continue;
      std::swap(row, rows[t].row);
      const R dval = this->output_dot(b, i, t);
      const R e_d = this->output_dot_error(b, i, t);
      const R g_dq = gamma<R>(row.keys.size() + this->p_, u);
      for (std::size_t x = 0; x < row.keys.size(); ++x) {
        const std::size_t s = row.keys[x], st = t * lk + s, col = s * gq + ip * lq + t;
        const auto g = this->score_gradient(rows[t].eps[x], rows[t].e_lse, e_d, dval, x, dp[st],
                                            dm.mag[st], dm.in_at(st));
        wq[st] = sig * (g.e_ds + g_dq * g.ds_hat);
        ds[st] = abs(g.ds);
        gw.wk[col] = sig * (g.e_ds + gw.g_dk[s] * g.ds_hat);
        gw.ds[col] = abs(g.ds);
        gw.wv[col] = (g.pi * g.p + this->floor_) + gw.g_dv[s] * g.p_hat;
        gw.p[col] = g.p;
      }
      std::swap(row, rows[t].row);
    }
    std::vector<MagnitudeTerm<R>> terms{
        {{&wq, 0, row_major_layout(lq, lk)}, {&km_.raised, kb.offset(b, j), kb.rows()}}};
    if (!kc_.empty())
      terms.push_back({{&ds, 0, row_major_layout(lq, lk)}, {&kc_, kb.offset(b, j), kb.rows()}});
    const auto e_dq = magnitude_sum<R>(terms, lq, d, this->path_);
    for (std::size_t t = 0; t < lq; ++t) {
      if (!rows[t].bounded) continue;
      const R floor = R(rows[t].row.keys.size() + 2) * this->eta_;
      for (std::size_t e = 0; e < d; ++e)
        this->B_.dq_acc[D.qi(b, t, i, e)] = e_dq[t * d + e] + floor;
    }
  }

  // (4) dk and dv of kv head j: the group's weights against its heads' stacked q and dout.
  void group_gradients(std::size_t b, std::size_t j, const GroupWeights& gw) {
    const auto& D = this->D_;
    const std::size_t gq = D.group * D.lq, lk = D.lk, d = D.d;
    const Layout wl = row_major_layout(lk, gq), sl = row_major_layout(gq, d);
    const auto q_st = stacked_heads(qm_.raised, D, b, j);
    std::vector<MagnitudeTerm<R>> dk_terms{{{&gw.wk, 0, wl}, {&q_st, 0, sl}}};
    Tensor<R> qc_st, edo_st;
    if (!qc_.empty()) {
      qc_st = stacked_heads(qc_, D, b, j);
      dk_terms.push_back({{&gw.ds, 0, wl}, {&qc_st, 0, sl}});
    }
    const auto do_st = stacked_heads(dom_.raised, D, b, j);
    std::vector<MagnitudeTerm<R>> dv_terms{{{&gw.wv, 0, wl}, {&do_st, 0, sl}}};
    if (!dom_.err.empty()) {
      edo_st = stacked_heads(dom_.err, D, b, j);
      dv_terms.push_back({{&gw.p, 0, wl}, {&edo_st, 0, sl}});
    }
    const auto dk = magnitude_sum<R>(dk_terms, lk, d, this->path_);
    const auto dv = magnitude_sum<R>(dv_terms, lk, d, this->path_);
    const R inf = std::numeric_limits<R>::infinity();
    for (std::size_t s = 0; s < lk; ++s) {
      const std::size_t n_s = gw.count[s];
      if (n_s == 0) continue;
      for (std::size_t e = 0; e < d; ++e) {
        const std::size_t c = D.ki(b, s, j, e);
        this->B_.dk_acc[c] = gw.unbounded[s] ? inf : R(dk[s * d + e] + R(n_s + 2) * this->eta_);
        this->B_.dv_acc[c] = gw.unbounded[s] ? inf : R(dv[s * d + e] + R(n_s + 1) * this->eta_);
      }
    }
  }

  const ContractionOperand<R> qo_, ko_, vo_, doo_;
  const InputMagnitudes<R> qm_, km_, vm_, dom_;
  const Tensor<R> qc_, kc_;  // σ⁺·e + δσ·|x| of q and k (empty when 0)
};

// The bounds of attention_model's error model, evaluated by `path`: plain, or an input (or an
// input error) that is not finite, or R not holding the fast path's argument: the loops
// (AttentionModel::add_rows); else the products above (AttentionProductsModel::add_heads), each
// contraction by `path` (automatic: by its shape).
template <class R>
AttentionBounds<R> attention_model(const AttentionConfig& cfg, const Tensor<R>& q,
                                   const Tensor<R>& k, const Tensor<R>& v, const Tensor<R>& dout,
                                   const ErrorModel<R>& em, const R& raise, ContractionPath path) {
  if constexpr (fast_path_holds_in<R>) {
    bool finite = all_finite(q) && all_finite(k) && all_finite(v) && all_finite(dout);
    for (const Tensor<R>* e : {em.eq, em.ek, em.ev, em.edo}) {
      finite = finite && (e == nullptr || all_finite(*e));
    }
    if (path != ContractionPath::plain && finite) {
      AttentionProductsModel<R> model(cfg, q, k, v, dout, em, path);
      model.add_heads();
      return model.finish(raise);
    }
  }
  AttentionModel<R> model(cfg, q, k, v, dout, em, path);
  model.add_rows();
  return model.finish(raise);
}

}  // namespace shardcheck::reference::detail
