// Scaled dot-product attention (grouped-query heads, masks, key padding), forward and backward,
// in plain loops in the high-precision scalar R: the definition (attention_forward_loops,
// attention_backward_loops). attention_products.hpp evaluates the same formulas with matrix
// products and holds the entry points, attention_forward and attention_backward, which take the
// contraction path. The bound on an implementation's error is attention_bound.hpp; attention.hpp
// includes all three.
//
// Layout BSHD (lib/ops/attention/attention.hpp): q [batch, Lq, h, d], k, v [batch, Lk, g, d], out
// like q, lse [batch, h, Lq]; query head i reads kv head i/(h/g). Per row (b, i, t), over the set
// S of visible keys (n = |S|), σ = score_scale(cfg) (a double, exact in R):
//   s_s = σ·(q·k_s),  M = max s_s,  lse = log Σ exp(s_s),  P_s = exp(s_s − lse),
//   out = Σ P_s v_s;  D = dout·out,  dP_s = dout·v_s,  dS_s = P_s(dP_s − D),
//   dq = σ Σ_s dS_s k_s,  dk_s = σ Σ_(i,t) dS q_t,  dv_s = Σ_(i,t) P dout_t   (dk, dv summed
//   over the h/g query heads of the kv head and the queries that see s).
// An empty row (n = 0): out 0, lse −inf, no gradient contribution.
// lse is evaluated with the max shift, M + log Σ exp(s_s − M), as the implementation does (so the
// bound's analysis, with u = u_R, also bounds R's own error: attention_reference_error).
// Sources: Vaswani et al. 2017; Ainslie et al. 2023 (GQA); Dao 2023 (FlashAttention-2) for lse
// and the backward's D = dout·out form.
#pragma once

#include "ops/attention/attention_config.hpp"
#include "reference/precision.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardcheck::reference {

// The configuration is the library's own data type, shardcheck::AttentionConfig with its
// AttentionMask (lib/ops/attention/attention_config.hpp: fields only, declared once for the
// library, the reference and the suite). What the fields mean is evaluated here independently of
// the library (its visible() and effective_scale() live in op code, which the reference does not
// include), from the definition written in that header.

// Whether query position t sees key position s in sequence b (global positions): not padded
// (s < key_lengths[b] when given) and allowed by the kind: none always; causal bottom-right
// aligned, s ≤ t + (Lk − Lq); explicit_mask when allowed[b, t, s] is 1.
inline bool mask_visible(const AttentionMask& m, std::size_t b, std::size_t t, std::size_t s) {
  if (!m.key_lengths.empty() && s >= m.key_lengths[b]) return false;
  switch (m.kind) {
    case MaskKind::none: return true;
    case MaskKind::causal:
      return m.alignment == CausalAlignment::top_left
                 ? s <= t
                 : s + m.q_len <= t + m.k_len;  // s ≤ t + (Lk − Lq)
    case MaskKind::explicit_mask: return m.allowed[(b * m.q_len + t) * m.k_len + s] != 0;
  }
  return false;
}

// σ, the scale of the scores: cfg.scale, or 1/sqrt(d) when it is 0 (a double, exact in R).
inline double score_scale(const AttentionConfig& cfg) {
  return cfg.scale != 0 ? cfg.scale : 1.0 / std::sqrt(static_cast<double>(cfg.head_dim));
}

template <class R = hp>
struct AttentionOutput {
  Tensor<R> out;  // [batch, Lq, h, d]
  Tensor<R> lse;  // [batch, h, Lq], −inf on empty rows
};

template <class R = hp>
struct AttentionGrads {
  Tensor<R> dq, dk, dv;  // shapes of q, k, v
};

namespace detail {

struct AttentionDims {
  std::size_t batch, lq, lk, h, g, d, group;
  std::size_t qi(std::size_t b, std::size_t t, std::size_t i, std::size_t e) const {
    return ((b * lq + t) * h + i) * d + e;
  }
  std::size_t ki(std::size_t b, std::size_t s, std::size_t j, std::size_t e) const {
    return ((b * lk + s) * g + j) * d + e;
  }
  std::size_t li(std::size_t b, std::size_t i, std::size_t t) const { return (b * h + i) * lq + t; }
};

template <class R>
AttentionDims attention_dims(const AttentionConfig& cfg, const Tensor<R>& q, const Tensor<R>& k,
                             const Tensor<R>& v, const Tensor<R>* dout) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("reference::attention: q " + format_shape(q.shape()) + ", k " +
                                format_shape(k.shape()) + ", v " + format_shape(v.shape()) + ": " +
                                why);
  };
  if (q.ndim() != 4 || k.ndim() != 4 || v.ndim() != 4) fail("q, k, v must be 4-D (BSHD)");
  if (cfg.kv_heads == 0 || cfg.q_heads % cfg.kv_heads != 0) fail("kv_heads must divide q_heads");
  if (q.dim(2) != cfg.q_heads || k.dim(2) != cfg.kv_heads) fail("head counts differ from cfg");
  if (q.dim(3) != cfg.head_dim || k.dim(3) != cfg.head_dim) fail("head_dim differs from cfg");
  if (k.shape() != v.shape() || q.dim(0) != k.dim(0)) fail("k, v must be [batch, Lk, g, d]");
  if (dout != nullptr && !dout->empty() && dout->shape() != q.shape())
    fail("dout must be q's shape");
  const auto& m = cfg.mask;
  const bool unset = m.q_len == 0 && m.k_len == 0;
  if (!(unset && m.kind == MaskKind::none && m.key_lengths.empty()) &&
      (m.q_len != q.dim(1) || m.k_len != k.dim(1))) {
    fail("the dense reference needs cfg.mask.q_len = Lq and k_len = Lk");
  }
  if (!m.key_lengths.empty() && m.key_lengths.size() != q.dim(0))
    fail("one key length per sequence");
  if (m.kind == MaskKind::explicit_mask &&
      m.allowed.shape() != Shape({q.dim(0), q.dim(1), k.dim(1)})) {
    fail("the explicit mask must be [batch, Lq, Lk]");
  }
  return {q.dim(0), q.dim(1), k.dim(1), q.dim(2), k.dim(2), q.dim(3), q.dim(2) / k.dim(2)};
}

// Exact (in R) visible keys and softmax of one row: returns false for an empty row.
template <class R>
struct RowSoftmax {
  std::vector<std::size_t> keys;  // visible keys, in order
  std::vector<R> score, p;        // per visible key: s, P
  std::vector<R> qk;              // q·k (unscaled)
  R max{0}, lse{0};
};

// The row's softmax from its visible keys and their q·k (row.keys, row.qk set): s = σ·(q·k),
// M = max s, lse = M + log Σ exp(s − M), P = exp(s − lse), the sum in key order.
template <class R>
void finish_row_softmax(const R& sigma, RowSoftmax<R>& row) {
  using std::exp;
  using std::log;
  row.score.clear();
  row.p.clear();
  for (const R& qk : row.qk) row.score.push_back(sigma * qk);
  row.max = row.score[0];
  for (const R& s : row.score) row.max = s > row.max ? s : row.max;
  R l(0);
  for (const R& s : row.score) l += exp(s - row.max);
  row.lse = row.max + log(l);
  for (const R& s : row.score) row.p.push_back(exp(s - row.lse));
}

template <class R>
bool row_softmax(const AttentionConfig& cfg, const AttentionDims& D, const Tensor<R>& q,
                 const Tensor<R>& k, std::size_t b, std::size_t i, std::size_t t,
                 RowSoftmax<R>& row) {
  const std::size_t j = i / D.group;
  row.keys.clear();
  row.qk.clear();
  for (std::size_t s = 0; s < D.lk; ++s) {
    if (!mask_visible(cfg.mask, b, t, s)) continue;
    R dot(0);
    for (std::size_t e = 0; e < D.d; ++e) dot += q[D.qi(b, t, i, e)] * k[D.ki(b, s, j, e)];
    row.keys.push_back(s);
    row.qk.push_back(dot);
  }
  if (row.keys.empty()) return false;
  finish_row_softmax(R(score_scale(cfg)), row);
  return true;
}

}  // namespace detail

// ================================================================ the reference, in loops

// out and lse of the dense op (positions 0..L−1), row by row. attention_products.hpp has the
// entry point, attention_forward, with its preconditions.
template <HighPrecision R = hp>
AttentionOutput<R> attention_forward_loops(const AttentionConfig& cfg, const Tensor<R>& q,
                                           const Tensor<R>& k, const Tensor<R>& v) {
  const auto D = detail::attention_dims<R>(cfg, q, k, v, nullptr);
  AttentionOutput<R> r{Tensor<R>(q.shape()), Tensor<R>(Shape{D.batch, D.h, D.lq})};
  detail::RowSoftmax<R> row;
  for (std::size_t b = 0; b < D.batch; ++b) {
    for (std::size_t i = 0; i < D.h; ++i) {
      const std::size_t j = i / D.group;
      for (std::size_t t = 0; t < D.lq; ++t) {
        if (!detail::row_softmax(cfg, D, q, k, b, i, t, row)) {
          r.lse[D.li(b, i, t)] = -std::numeric_limits<R>::infinity();
          continue;
        }
        r.lse[D.li(b, i, t)] = row.lse;
        for (std::size_t e = 0; e < D.d; ++e) {
          R acc(0);
          for (std::size_t x = 0; x < row.keys.size(); ++x)
            acc += row.p[x] * v[D.ki(b, row.keys[x], j, e)];
          r.out[D.qi(b, t, i, e)] = acc;
        }
      }
    }
  }
  return r;
}

namespace detail {
// attention_backward's shapes: dout and fwd.out q's, fwd.lse [batch, h, Lq].
template <class R>
AttentionDims backward_dims(const AttentionConfig& cfg, const Tensor<R>& q, const Tensor<R>& k,
                            const Tensor<R>& v, const AttentionOutput<R>& fwd,
                            const Tensor<R>& dout) {
  const auto D = attention_dims<R>(cfg, q, k, v, &dout);
  if (dout.shape() != q.shape() || fwd.out.shape() != q.shape() ||
      fwd.lse.shape() != Shape({D.batch, D.h, D.lq})) {
    throw std::invalid_argument(
        "reference::attention_backward: dout and fwd.out must be q's shape, fwd.lse [batch, h, "
        "Lq]");
  }
  return D;
}
}  // namespace detail

// dq, dk, dv of L = Σ dout ⊙ out, given the forward's out and lse (FlashAttention 2's D = dout·out
// form; fwd.out enters only through D, fwd.lse through P = exp(s − lse)), row by row.
template <HighPrecision R = hp>
AttentionGrads<R> attention_backward_loops(const AttentionConfig& cfg, const Tensor<R>& q,
                                           const Tensor<R>& k, const Tensor<R>& v,
                                           const AttentionOutput<R>& fwd, const Tensor<R>& dout) {
  using std::exp;
  const auto D = detail::backward_dims(cfg, q, k, v, fwd, dout);
  const R sigma = R(score_scale(cfg));
  AttentionGrads<R> g{Tensor<R>(q.shape()), Tensor<R>(k.shape()), Tensor<R>(k.shape())};
  for (std::size_t b = 0; b < D.batch; ++b) {
    for (std::size_t i = 0; i < D.h; ++i) {
      const std::size_t j = i / D.group;
      for (std::size_t t = 0; t < D.lq; ++t) {
        const R lse = fwd.lse[D.li(b, i, t)];
        if (lse == -std::numeric_limits<R>::infinity()) continue;
        R dd(0);
        for (std::size_t e = 0; e < D.d; ++e)
          dd += dout[D.qi(b, t, i, e)] * fwd.out[D.qi(b, t, i, e)];
        for (std::size_t s = 0; s < D.lk; ++s) {
          if (!mask_visible(cfg.mask, b, t, s)) continue;
          R dot(0), dp(0);
          for (std::size_t e = 0; e < D.d; ++e) {
            dot += q[D.qi(b, t, i, e)] * k[D.ki(b, s, j, e)];
            dp += dout[D.qi(b, t, i, e)] * v[D.ki(b, s, j, e)];
          }
          const R P = exp(sigma * dot - lse);
          const R dS = P * (dp - dd);
          for (std::size_t e = 0; e < D.d; ++e) {
            g.dq[D.qi(b, t, i, e)] += sigma * dS * k[D.ki(b, s, j, e)];
            g.dk[D.ki(b, s, j, e)] += sigma * dS * q[D.qi(b, t, i, e)];
            g.dv[D.ki(b, s, j, e)] += P * dout[D.qi(b, t, i, e)];
          }
        }
      }
    }
  }
  return g;
}

}  // namespace shardcheck::reference
