// Attention's forward and backward (attention_definition.hpp's formulas) with its matrix products
// as contractions (contraction/contract.hpp), and the entry points attention_forward and
// attention_backward, which take the path: plain runs the definition's loops
// (attention_forward_loops, attention_backward_loops); fast runs the products below, each on the
// fast contraction path; automatic (the default) the products below, each by its shape.
//
// Per sequence b and kv head j, for each query head i of its group (i = j·G + i', G = h/g):
//   S_i  = Q_bi·K_bjᵀ  [Lq, Lk]   q·k for every pair (the masked ones are not used)
//   row t: the definition's softmax (finish_row_softmax) over the visible keys of S_i's row,
//          P_i[t, s] = exp(σ·S − lse) on them and exactly 0 elsewhere
//   out_bi = P_i·V_bj  [Lq, d]
// and for the backward, with P recomputed from the forward's lse as the loops do,
//   dP_i = dout_bi·V_bjᵀ,  D_t = dout_t·out_t (a loop in e),  dS_i = P_i ⊙ (dP_i − D) (0 off the
//   mask),  dq_bi = σ·(dS_i·K_bj),
//   dk_bj = σ·(dS_Gᵀ·Q_G),  dv_bj = P_Gᵀ·dout_G   (the group's heads stacked along the contracted
//   axis: the sums over the G heads and the Lq queries that see each key are one product).
// Exact zeros add nothing, so every sum has the terms the definition's has.
//
// Rounding. Every product's terms are within gamma_rho(u_R)·Σ|ab| of the exact value with
// rho ≤ D − 1 + |nonzero rest products| + 1 ≤ n + 15 (fast_contraction.hpp: D − 1 ≤ 14 with its
// default 8 slices per operand; adding an exact 0 rounds nothing; n the nonzero products of the
// term), and σ·(·) rounds once more. The definition's loops round each such sum at most n + 1
// times. attention_reference_error bounds R's own error with the header's model at 16·u_R on
// the fast path: gamma_n(16u) ≥ gamma_(n+15)(u) for n ≥ 1, since 16n ≥ n + 15 (and the model's
// one-rounding terms grow by 16 too, which only loosens them).
//
// Non-finite inputs. Masked keys are skipped by the definition, while a product with an exact 0
// weight would still meet their values (0·inf is NaN); so any q, k, v or dout holding ±inf or NaN
// takes the loops, and the definition's conventions hold bit for bit there.
#pragma once

#include "reference/attention/attention_definition.hpp"
#include "reference/contraction/contract.hpp"
#include "reference/precision.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace shardcheck::reference {

namespace detail {

template <class R>
bool all_finite(const Tensor<R>& t) {
  using std::isfinite;
  for (const R& x : t.values()) {
    if (!isfinite(x)) return false;
  }
  return true;
}

// The blocks of one (b, head) of a BSHD tensor [batch, L, heads, d] as matrices.
struct HeadBlocks {
  std::size_t len, heads, d;
  std::size_t offset(std::size_t b, std::size_t head) const { return (b * len * heads + head) * d; }
  Layout rows() const {  // [L, d]
    return {len, d, static_cast<std::ptrdiff_t>(heads * d), 1};
  }
  Layout transposed() const {  // [d, L]
    return {d, len, 1, static_cast<std::ptrdiff_t>(heads * d)};
  }
};

// The G query heads of kv head j of sequence b, stacked: [G·Lq, d], row i'·Lq + t.
template <class R>
Tensor<R> stacked_heads(const Tensor<R>& x, const AttentionDims& D, std::size_t b, std::size_t j) {
  Tensor<R> out(Shape{D.group * D.lq, D.d});
  for (std::size_t ip = 0; ip < D.group; ++ip) {
    for (std::size_t t = 0; t < D.lq; ++t) {
      for (std::size_t e = 0; e < D.d; ++e)
        out[(ip * D.lq + t) * D.d + e] = x[D.qi(b, t, j * D.group + ip, e)];
    }
  }
  return out;
}

// S_i = Q_bi·K_bjᵀ and, per query row, the softmax of its visible keys: P [Lq, Lk] (0 off the
// mask) and lse [Lq] (−inf on empty rows); with `lse_given`, P = exp(σ·S − lse) from those.
template <class R>
struct HeadWeights {
  Tensor<R> p;
  std::vector<R> lse;
};

template <class R>
HeadWeights<R> head_weights(const AttentionConfig& cfg, const AttentionDims& D,
                            const ContractionOperand<R>& q, const ContractionOperand<R>& k,
                            std::size_t b, std::size_t i, const R* lse_given,
                            ContractionPath path) {
  using std::exp;
  const HeadBlocks qb{D.lq, D.h, D.d}, kb{D.lk, D.g, D.d};
  const std::size_t j = i / D.group, all_d[] = {D.d};
  const auto s = contraction_at<R>(q, qb.offset(b, i), qb.rows(), k, kb.offset(b, j),
                                   kb.transposed(), all_d, path);
  const R sigma = R(score_scale(cfg));
  HeadWeights<R> w{Tensor<R>(Shape{D.lq, D.lk}), std::vector<R>(D.lq)};
  RowSoftmax<R> row;
  for (std::size_t t = 0; t < D.lq; ++t) {
    row.keys.clear();
    row.qk.clear();
    for (std::size_t x = 0; x < D.lk; ++x) {
      if (!mask_visible(cfg.mask, b, t, x)) continue;
      row.keys.push_back(x);
      row.qk.push_back(s.value[t * D.lk + x]);
    }
    if (row.keys.empty()) {
      w.lse[t] = -std::numeric_limits<R>::infinity();
      continue;
    }
    if (lse_given == nullptr) {
      finish_row_softmax(sigma, row);
      w.lse[t] = row.lse;
      for (std::size_t x = 0; x < row.keys.size(); ++x) w.p[t * D.lk + row.keys[x]] = row.p[x];
    } else {
      w.lse[t] = lse_given[t];
      for (std::size_t x = 0; x < row.keys.size(); ++x)
        w.p[t * D.lk + row.keys[x]] = exp(sigma * row.qk[x] - lse_given[t]);
    }
  }
  return w;
}

// σ·x, leaving an exact 0 as it is (+0 where the loops never touch an element).
template <class R>
void scale_nonzero(Tensor<R>& t, const R& sigma) {
  for (R& x : t.values()) {
    if (x != 0) x *= sigma;
  }
}

template <class R>
AttentionOutput<R> attention_forward_products(const AttentionConfig& cfg, const Tensor<R>& q,
                                              const Tensor<R>& k, const Tensor<R>& v,
                                              ContractionPath path) {
  const auto D = attention_dims<R>(cfg, q, k, v, nullptr);
  AttentionOutput<R> r{Tensor<R>(q.shape()), Tensor<R>(Shape{D.batch, D.h, D.lq})};
  const ContractionOperand<R> qo(q, path), ko(k, path), vo(v, path);
  const HeadBlocks kb{D.lk, D.g, D.d};
  const std::size_t all_keys[] = {D.lk};
  for (std::size_t b = 0; b < D.batch; ++b) {
    for (std::size_t i = 0; i < D.h; ++i) {
      const auto w = head_weights<R>(cfg, D, qo, ko, b, i, nullptr, path);
      const auto out =
          contraction_at<R>(ContractionOperand<R>(w.p, path), 0, row_major_layout(D.lq, D.lk), vo,
                            kb.offset(b, i / D.group), kb.rows(), all_keys, path);
      for (std::size_t t = 0; t < D.lq; ++t) {
        r.lse[D.li(b, i, t)] = w.lse[t];
        for (std::size_t e = 0; e < D.d; ++e) r.out[D.qi(b, t, i, e)] = out.value[t * D.d + e];
      }
    }
  }
  return r;
}

template <class R>
AttentionGrads<R> attention_backward_products(const AttentionConfig& cfg, const Tensor<R>& q,
                                              const Tensor<R>& k, const Tensor<R>& v,
                                              const AttentionOutput<R>& fwd, const Tensor<R>& dout,
                                              ContractionPath path) {
  const auto D = backward_dims(cfg, q, k, v, fwd, dout);
  const R sigma = R(score_scale(cfg));
  AttentionGrads<R> g{Tensor<R>(q.shape()), Tensor<R>(k.shape()), Tensor<R>(k.shape())};
  const ContractionOperand<R> qo(q, path), ko(k, path), vo(v, path), doo(dout, path);
  const HeadBlocks qb{D.lq, D.h, D.d}, kb{D.lk, D.g, D.d};
  const std::size_t all_d[] = {D.d}, all_keys[] = {D.lk}, group_queries[] = {D.group * D.lq};
  for (std::size_t b = 0; b < D.batch; ++b) {
    for (std::size_t j = 0; j < D.g; ++j) {
      // The group's P and dS, head i' at rows i'·Lq .. : [G·Lq, Lk].
      Tensor<R> p_group(Shape{D.group * D.lq, D.lk}), ds_group(Shape{D.group * D.lq, D.lk});
      for (std::size_t ip = 0; ip < D.group; ++ip) {
        const std::size_t i = j * D.group + ip;
        const auto w = head_weights<R>(cfg, D, qo, ko, b, i, &fwd.lse[D.li(b, i, 0)], path);
        const auto dp = contraction_at<R>(doo, qb.offset(b, i), qb.rows(), vo, kb.offset(b, j),
                                          kb.transposed(), all_d, path);
        Tensor<R> ds(Shape{D.lq, D.lk});
        for (std::size_t t = 0; t < D.lq; ++t) {
          if (w.lse[t] == -std::numeric_limits<R>::infinity()) continue;
          R dd(0);
          for (std::size_t e = 0; e < D.d; ++e)
            dd += dout[D.qi(b, t, i, e)] * fwd.out[D.qi(b, t, i, e)];
          for (std::size_t s = 0; s < D.lk; ++s) {
            if (!mask_visible(cfg.mask, b, t, s)) continue;
            ds[t * D.lk + s] = w.p[t * D.lk + s] * (dp.value[t * D.lk + s] - dd);
          }
        }
        auto dq =
            contraction_at<R>(ContractionOperand<R>(ds, path), 0, row_major_layout(D.lq, D.lk), ko,
                              kb.offset(b, j), kb.rows(), all_keys, path)
                .value;
        scale_nonzero(dq, sigma);
        for (std::size_t t = 0; t < D.lq; ++t) {
          for (std::size_t e = 0; e < D.d; ++e) g.dq[D.qi(b, t, i, e)] = dq[t * D.d + e];
        }
        std::copy(w.p.values().begin(), w.p.values().end(),
                  p_group.values().begin() + static_cast<std::ptrdiff_t>(ip * D.lq * D.lk));
        std::copy(ds.values().begin(), ds.values().end(),
                  ds_group.values().begin() + static_cast<std::ptrdiff_t>(ip * D.lq * D.lk));
      }
      const Layout group_t = transposed_layout(D.lk, D.group * D.lq);  // [Lk, G·Lq]
      const Layout stacked = row_major_layout(D.group * D.lq, D.d);
      auto dk =
          contraction<R>(ds_group, group_t, stacked_heads(q, D, b, j), stacked, group_queries, path)
              .value;
      scale_nonzero(dk, sigma);
      const auto dv = contraction<R>(p_group, group_t, stacked_heads(dout, D, b, j), stacked,
                                     group_queries, path)
                          .value;
      for (std::size_t s = 0; s < D.lk; ++s) {
        for (std::size_t e = 0; e < D.d; ++e) {
          g.dk[D.ki(b, s, j, e)] = dk[s * D.d + e];
          g.dv[D.ki(b, s, j, e)] = dv[s * D.d + e];
        }
      }
    }
  }
  return g;
}

}  // namespace detail

// ================================================================ the entry points

// out and lse of the dense op (positions 0..L−1). @pre q [batch, Lq, h, d], k, v [batch, Lk, g,
// d] with h = cfg.q_heads, g = cfg.kv_heads, d = cfg.head_dim; cfg.mask's q_len/k_len = Lq/Lk
// (or 0 with kind none and no padding). @throws std::invalid_argument otherwise.
// `path`: the products above (fast: each product on the fast path; automatic, the default: each
// product by its shape, contraction_path.hpp; the loops when an input is not finite or R is
// not at least hp) or the definition's loops (plain).
template <HighPrecision R = hp>
AttentionOutput<R> attention_forward(const AttentionConfig& cfg, const Tensor<R>& q,
                                     const Tensor<R>& k, const Tensor<R>& v,
                                     ContractionPath path = default_contraction_path()) {
  if constexpr (fast_path_holds_in<R>) {
    if (path != ContractionPath::plain && detail::all_finite(q) && detail::all_finite(k) &&
        detail::all_finite(v)) {
      return detail::attention_forward_products<R>(cfg, q, k, v, path);
    }
  }
  return attention_forward_loops<R>(cfg, q, k, v);
}

// dq, dk, dv of L = Σ dout ⊙ out, given the forward's out and lse (FlashAttention 2's D = dout·out
// form; fwd.out enters only through D, fwd.lse through P = exp(s − lse)). @pre as
// attention_forward, dout and fwd.out of q's shape, fwd.lse [batch, h, Lq]. `path` as there.
template <HighPrecision R = hp>
AttentionGrads<R> attention_backward(const AttentionConfig& cfg, const Tensor<R>& q,
                                     const Tensor<R>& k, const Tensor<R>& v,
                                     const AttentionOutput<R>& fwd, const Tensor<R>& dout,
                                     ContractionPath path = default_contraction_path()) {
  if constexpr (fast_path_holds_in<R>) {
    if (path != ContractionPath::plain && detail::all_finite(q) && detail::all_finite(k) &&
        detail::all_finite(v) && detail::all_finite(dout) && detail::all_finite(fwd.out)) {
      return detail::attention_backward_products<R>(cfg, q, k, v, fwd, dout, path);
    }
  }
  return attention_backward_loops<R>(cfg, q, k, v, fwd, dout);
}

// The same from storage-typed tensors (converted exactly).
template <class R = hp, StorageFloat T>
AttentionOutput<R> attention_forward(const AttentionConfig& cfg, const Tensor<T>& q,
                                     const Tensor<T>& k, const Tensor<T>& v,
                                     ContractionPath path = default_contraction_path()) {
  return attention_forward<R>(cfg, to_hp<R>(q), to_hp<R>(k), to_hp<R>(v), path);
}

}  // namespace shardcheck::reference
