// Scaled dot-product attention (grouped-query heads, masks, key padding), forward and backward,
// in the high-precision scalar R, and an a-priori elementwise error bound for an implementation
// that follows lib/ops/attention/attention.hpp's arithmetic contract, computed on ANY partition of
// the keys into at most `parts` blocks merged with the softmax merge
// (lib/ops/softmax_merge/softmax_merge.hpp) and any partition of the queries for dk/dv, in any
// summation order.
//
// Layout BSHD (lib/ops/attention/attention.hpp): q [batch, Lq, h, d], k, v [batch, Lk, g, d], out
// like q, lse [batch, h, Lq]; query head i reads kv head i/(h/g). Per row (b, i, t), over the set S
// of visible keys (n = |S|), σ = cfg.effective_scale() (a double, exact in R):
//   s_s = σ·(q·k_s),  M = max s_s,  lse = log Σ exp(s_s),  P_s = exp(s_s − lse),
//   out = Σ P_s v_s;  D = dout·out,  dP_s = dout·v_s,  dS_s = P_s(dP_s − D),
//   dq = σ Σ_s dS_s k_s,  dk_s = σ Σ_(i,t) dS q_t,  dv_s = Σ_(i,t) P dout_t   (dk, dv summed
//   over the h/g query heads of the kv head and the queries that see s).
// An empty row (n = 0): out 0, lse −inf, no gradient contribution; its bounds are 0 (the
// implementation must write exact zeros and −inf).
// The reference evaluates these formulas in R with the same max shift (so the analysis below,
// with u = u_R, also bounds R's own error: attention_reference_error).
//
// ================================================================ the error bound
// Notation: u, η the unit roundoff and smallest subnormal of A = acc_t<T>; u_T, η_T those of T;
// γ_n = n·u/(1 − n·u) (γ_0 = 0); p = parts; eq, ek, ev, edo the given elementwise bounds on the
// implementation's inputs (|q̂ − q| ≤ eq, ...; 0 when the inputs are exact); |x|⁺ = |x| + e_x.
// exp and log of A are assumed within 2u relative (glibc documents < 1 ulp for exp, expf, log,
// logf), and within η absolute below the normal range. Rounding: |fl(z) − z| ≤ u|z| + η/2
// (η/2 only for products and quotients; additions are exact when subnormal, Hauser 1996).
// Every rounded step is written (1 + δ), |δ| ≤ u; n such factors give 1 + θ_n, |θ_n| ≤ γ_n
// (Higham, ASNA 2nd ed., Lemma 3.1), whatever the order of the sums (Higham (3.4)).
//
// (1) Score. σ̂ = fl_A(σ): δσ = |σ̂ − σ| (0 for A = float64: σ is a double). The dot of length
//     d in A, then one multiply by σ̂:
//       E_w   = γ_d·Σ_e |q_e|⁺|k_se|⁺ + d·η + Σ_e (|q_e|ek_se + |k_se|eq_e + eq_e·ek_se)
//       ε_s   = σ⁺·E_w + δσ·|q·k_s| + u·σ⁺·(|q·k_s| + E_w) + η/2,      σ⁺ = |σ| + δσ
//     so |ŝ_s − s_s| ≤ ε_s (first term: the dot's rounding and the input errors; then the
//     rounded scale; then the multiply's rounding).
// (2) Weights. Within a block j the kernel computes p̂_s = fl(exp(fl(ŝ_s − m̂_j))),
//     l̂_j = Σ p̂_s, lse_j = fl(m̂_j + fl(log l̂_j)); the merge computes
//     w_j = fl(exp(fl(lse_j − m))), m = max lse_j, l = Σ w_j. The weight the output puts on v_s
//     (s in block j) is ω̂_s = (w_j/l)·(p̂_s/l̂_j); using exp(lse_j)/l̂_j = exp(m̂_j + λ_j)
//     (λ_j = lse_j's rounding) and dividing by Z = Σ exp(s_k):
//       ω̂_s / P_s = N_s / Σ_k P_k·D_k
//     with, per key k, N_k = e^{ŝ_k − s_k}(1 + α_k)·[e^{λ_j}(1 + α'_j)] and
//     D_k = N_k(1 + θ_k)(1 + θ''_j): α_k the shift's subtraction (relative u on
//     |x_k| = m̂_j − ŝ_k ≤ X_k) and exp (2u); α'_j the merge's subtraction (u on
//     m − lse_j ≤ Y_k) and exp (2u); θ_k the sum l̂_j (γ_{n−1}); θ''_j the sum l (γ_{p−1}).
//     Bounds: m̂_j ≤ M + ε_max and ŝ_k ≥ s_k − ε_k give
//       X_k = M + ε_max − s_k + ε_k,   Lm = log n + γ_n ≥ log l̂_j (p̂ ≤ 1, so l̂_j ≤ n(1 + γ_n)),
//       |lse_j| ≤ LSE = (max|s| + ε_max + Lm(1 + 2u))(1 + u),  |λ_j| ≤ Λ = 2u·Lm + u·LSE,
//       Y_k = X_k + Lm + Λ   (lse_j ≥ m̂_j ≥ ŝ_k since fl(log l̂_j) ≥ 0, and m ≤ M + ε_max + Lm + Λ)
//     so |log N_k| ≤ a_k with (−log(1 − 2u) ≤ 2u(1 + 2u))
//       a_k = ε_k + u·X_k + 2u(1 + 2u)  [+ Λ + u·Y_k + 2u(1 + 2u) when p ≥ 2]
//     and D_k ∈ [1 − d_k, 1 + d_k] with d_k = e^{a_k}(1 + γ_{n−1})(1 + γ_{p−1}) − 1. The
//     denominator is a P-weighted average, so with underflow of the p̂ and w (≤ η each, relative
//     to l̂_j ≥ 1 and l ≥ 1)
//       Δ = Σ_k P_k·d_k + 4(n + p)·η,      ρ_s = e^{a_s}/(1 − Δ) − 1  ≥ |ω̂_s/P_s − 1|
//     (+∞ when Δ ≥ 1). For p = 1 this is the dense kernel: no λ, α', θ''. The P-weighting makes
//     keys with large errors but negligible weight (very negative scores) cost nothing: the
//     cruder form is ρ ≤ exp(2·max ε) − 1 + O(u·(M − min s)).
// (3) Output. acc_j = Σ fl(p̂_s·v̂_s), out_j = fl(acc_j/l̂_j), out = Σ_j fl(fl(w_j/l)·out_j):
//     each term passes through ≤ n + p + 2 roundings (n + 1 when p = 1), g_out = γ_{n+p+2}
//     (γ_{n+1}):
//       E_out = Σ_s [(ρ_s + (1 + ρ_s)·g_out)·P_s·|v_s|⁺ + P_s·ev_s] + 4(n + p + 2)·η·(1 +
//       2·max|v_s|⁺)
//     (the last term: every product, quotient and exp that may underflow, each ≤ η·max|v|⁺ after
//     the later scalings by factors ≤ 1 + small).
//     lse = fl(m + fl(log l)) with m + log l = lse* + log Σ_k P_k D_k exactly, so
//       E_lse = −log(1 − Δ) + 2u·Lm + u·(|lse*| − log(1 − Δ) + 2u·Lm).
// (4) Backward, given the forward's out in T (bound E_oT = E_out + u_T(|out| + E_out) + η_T/2)
//     and lse in A (E_lse), dout with edo:
//       E_D    = γ_d·Σ_e |dout_e|⁺(|out_e| + E_oT) + Σ_e (|dout|·E_oT + |out|·edo + edo·E_oT) + d·η
//       E_dP_s = γ_d·Σ_e |dout_e|⁺|v_se|⁺ + Σ_e (|dout|·ev + |v|·edo + edo·ev) + d·η
//       P̂_s = fl(exp(fl(ŝ_s − lse))): |P̂_s − P_s| ≤ π_s·P_s + η with
//       π_s = exp(ε_s + E_lse + u·(lse* − s_s + ε_s + E_lse))·(1 + 2u) − 1
//       diff = fl(dP − D):  E_diff = E_dP + E_D + u·(|dP − D| + E_dP + E_D)     (cancellation in
//                           dP − D is carried by magnitudes: the rounding is relative to the
//                           computed difference, never to dP or D alone)
//       dS = fl(P̂·diff):   E_dS = (π·P + η)·|dP − D| + (P(1 + π) + η)·E_diff + u·M_dS + η/2,
//                           M_dS = (P(1 + π) + η)(|dP − D| + E_diff),  |dŜ| ≤ M_dS(1 + u) + η/2
//       dq_e = fl(σ̂·Σ_s dS_s·k_se), summed over ≤ p key blocks: n + p roundings per term
//         E_dq = Σ_s [σ⁺(E_dS·|k|⁺ + |dS|·ek) + δσ·|dS|·|k|] + γ_{n+p}·σ⁺·Σ_s |dŜ|·|k|⁺ + (n + 2)η
//       dk_se: the same over the N (head, query) pairs that see s, with q for k: γ_{N+p}
//       dv_se = Σ P̂·dout: E_dv = Σ [(π·P + η)|dout|⁺ + P·edo] + γ_{N+p−1}·Σ (P(1 + π) + η)|dout|⁺
//               + (N + 1)η
// (5) Rounding to T (out, dq, dk, dv; not lse, which stays in A): E + u_T(|x| + E) + η_T/2
//     (nothing when T = A).
// (6) The reference itself and the bound's evaluation. The reference follows the same steps in R,
//     so (1)–(4) with u_R (exp/log of R within 2u_R, no input errors) bound its own error; every
//     term above is a nonnegative, nondecreasing, convex function of u vanishing at u = 0, plus
//     terms independent of u, so R's error is ≤ (u_R/u)·bound ≤ 2^-60·bound. The magnitudes the
//     bound is evaluated from (P, |out|, |dP − D|, ...) are R values within a relative 2^-100 of
//     the exact ones or, for differences, within 2^-100 of the magnitudes already in the error
//     terms next to them. The final bound is raised by the factor 1 + 2^-40, which covers these
//     and the evaluation of the formulas in R.
// Overflow is excluded (scores, sums and products stay far below A's and T's overflow
// thresholds for the value ranges the suites draw); NaN/inf inputs are not bounded.
//
// Tightness: realistic bugs (top-left causal alignment, lse without its max, the wrong GQA head,
// dk without the group sum) change the results by O(|v|) or O(1) in the lse, far above the
// bound (properties/suites/attention/attention_unit_mutant_tests.cpp); the program
// ops_attention_unit_tests prints the measured max |err|/bound per dtype.
#pragma once

#include "reference/bounds.hpp"
#include "reference/precision.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardcheck::reference {

// Mirrors shardcheck::MaskKind, AttentionMask and AttentionConfig (reference/ does not include
// lib/ops): same fields, same meaning, same visibility rule. attention_config_of copies a
// library config field by field.
enum class MaskKind { none, causal, explicit_mask };

struct AttentionMask {
  MaskKind kind = MaskKind::none;
  std::size_t q_len = 0;                 // global Lq
  std::size_t k_len = 0;                 // global Lk
  std::vector<std::size_t> key_lengths;  // per sequence; empty: no padding
  Tensor<std::uint8_t> allowed;          // explicit_mask: [batch, q_len, k_len], 1 = visible
  bool visible(std::size_t b, std::size_t t, std::size_t s) const {
    if (!key_lengths.empty() && s >= key_lengths[b]) return false;
    switch (kind) {
      case MaskKind::none: return true;
      case MaskKind::causal: return s + q_len <= t + k_len;  // bottom-right aligned
      case MaskKind::explicit_mask: return allowed[(b * q_len + t) * k_len + s] != 0;
    }
    return false;
  }
};

struct AttentionConfig {
  std::size_t q_heads = 1;
  std::size_t kv_heads = 1;
  std::size_t head_dim = 1;
  double scale = 0;  // 0: 1/sqrt(d)
  AttentionMask mask;
  double effective_scale() const {
    return scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
  }
};

// A copy of a library config (shardcheck::AttentionConfig, or anything with the same fields).
template <class LibConfig>
AttentionConfig attention_config_of(const LibConfig& c) {
  AttentionConfig r;
  r.q_heads = c.q_heads;
  r.kv_heads = c.kv_heads;
  r.head_dim = c.head_dim;
  r.scale = c.scale;
  r.mask.kind = static_cast<MaskKind>(static_cast<int>(c.mask.kind));
  r.mask.q_len = c.mask.q_len;
  r.mask.k_len = c.mask.k_len;
  r.mask.key_lengths = c.mask.key_lengths;
  r.mask.allowed = c.mask.allowed;
  return r;
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

// Options of the bound.
template <class R = hp>
struct AttentionBoundOptions {
  // The most blocks the keys (forward merge, dq) and the queries (dk, dv) are split into.
  std::size_t parts = 1;
  // Elementwise bounds on the implementation's inputs: |q̂ − q| ≤ q_error, ... (shapes of q, k,
  // v, dout). Empty: exact inputs.
  Tensor<R> q_error, k_error, v_error, dout_error;
};

// Elementwise bounds on |implementation − reference|.
template <class R = hp>
struct AttentionBounds {
  Tensor<R> out, lse;                // out rounded to T; lse in A
  Tensor<R> dq, dk, dv;              // rounded to T (empty without dout)
  Tensor<R> out_acc;                 // out before its rounding to T (a merged partial, in A)
  Tensor<R> dq_acc, dk_acc, dv_acc;  // the gradients before their rounding to T
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
      m.allowed.shape() != Shape{q.dim(0), q.dim(1), k.dim(1)}) {
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

template <class R>
bool row_softmax(const AttentionConfig& cfg, const AttentionDims& D, const Tensor<R>& q,
                 const Tensor<R>& k, std::size_t b, std::size_t i, std::size_t t,
                 RowSoftmax<R>& row) {
  using std::exp;
  using std::log;
  const R sigma = R(cfg.effective_scale());
  const std::size_t j = i / D.group;
  row.keys.clear();
  row.score.clear();
  row.p.clear();
  row.qk.clear();
  for (std::size_t s = 0; s < D.lk; ++s) {
    if (!cfg.mask.visible(b, t, s)) continue;
    R dot(0);
    for (std::size_t e = 0; e < D.d; ++e) dot += q[D.qi(b, t, i, e)] * k[D.ki(b, s, j, e)];
    row.keys.push_back(s);
    row.qk.push_back(dot);
    row.score.push_back(sigma * dot);
  }
  if (row.keys.empty()) return false;
  row.max = row.score[0];
  for (const R& s : row.score) row.max = s > row.max ? s : row.max;
  R l(0);
  for (const R& s : row.score) l += exp(s - row.max);
  row.lse = row.max + log(l);
  for (const R& s : row.score) row.p.push_back(exp(s - row.lse));
  return true;
}

// The error model of the header's steps (1)–(5) for one arithmetic.
template <class R>
struct ErrorModel {
  R u{0}, eta{0};      // A
  R u_t{0}, eta_t{0};  // T
  bool round_t = false;
  R scale_error{0};  // δσ
  std::size_t parts = 1;
  const Tensor<R>* eq = nullptr;
  const Tensor<R>* ek = nullptr;
  const Tensor<R>* ev = nullptr;
  const Tensor<R>* edo = nullptr;
};

template <class R>
R at_or_zero(const Tensor<R>* t, std::size_t i) {
  return t == nullptr || t->empty() ? R(0) : (*t)[i];
}

template <class R>
R gamma0(std::size_t n, const R& u) {
  return n == 0 ? R(0) : gamma<R>(n, u);
}

template <class R>
AttentionBounds<R> attention_model(const AttentionConfig& cfg, const Tensor<R>& q,
                                   const Tensor<R>& k, const Tensor<R>& v, const Tensor<R>& dout,
                                   const ErrorModel<R>& em, const R& raise) {
  using std::abs;
  using std::exp;
  using std::log;
  const AttentionDims D = attention_dims(cfg, q, k, v, &dout);
  const bool backward = !dout.empty();
  const R u = em.u, eta = em.eta;
  const R inf = std::numeric_limits<R>::infinity();
  const R sigma = R(cfg.effective_scale());
  const R ds = em.scale_error;
  const R sig_hat = abs(sigma) + ds;
  const std::size_t p = em.parts == 0 ? 1 : em.parts;
  const R gd = gamma<R>(D.d, u);
  const R c2 = 2 * u * (1 + 2 * u);
  auto to_t = [&](const R& x, const R& e) {
    return em.round_t ? R(e + em.u_t * (abs(x) + e) + em.eta_t / 2) : e;
  };

  AttentionBounds<R> B;
  B.out_acc = Tensor<R>(q.shape());
  B.out = Tensor<R>(q.shape());
  B.lse = Tensor<R>(Shape{D.batch, D.h, D.lq});
  Tensor<R> dq_val, dk_err, dk_mag, dk_val, dv_err, dv_mag, dv_val;
  std::vector<std::size_t> kv_count;
  if (backward) {
    B.dq_acc = Tensor<R>(q.shape());
    dq_val = Tensor<R>(q.shape());
    for (auto* t : {&dk_err, &dk_mag, &dk_val, &dv_err, &dv_mag, &dv_val})
      *t = Tensor<R>(k.shape());
    kv_count.assign(D.batch * D.lk * D.g, 0);
  }
  RowSoftmax<R> row;
  std::vector<R> eps, E_oT(D.d), o(D.d);
  for (std::size_t b = 0; b < D.batch; ++b) {
    for (std::size_t i = 0; i < D.h; ++i) {
      const std::size_t j = i / D.group;
      for (std::size_t t = 0; t < D.lq; ++t) {
        if (!row_softmax(cfg, D, q, k, b, i, t, row)) continue;  // empty row: exact, bound 0
        const std::size_t n = row.keys.size();
        // (1) score errors
        eps.assign(n, R(0));
        R eps_max(0), abs_s_max(0);
        for (std::size_t x = 0; x < n; ++x) {
          const std::size_t s = row.keys[x];
          R absqk(0), inerr(0);
          for (std::size_t e = 0; e < D.d; ++e) {
            const std::size_t a = D.qi(b, t, i, e), c = D.ki(b, s, j, e);
            const R eqa = at_or_zero(em.eq, a), ekc = at_or_zero(em.ek, c);
            absqk += (abs(q[a]) + eqa) * (abs(k[c]) + ekc);
            inerr += abs(q[a]) * ekc + abs(k[c]) * eqa + eqa * ekc;
          }
          const R ew = gd * absqk + R(D.d) * eta + inerr;
          eps[x] =
              sig_hat * ew + ds * abs(row.qk[x]) + u * sig_hat * (abs(row.qk[x]) + ew) + eta / 2;
          eps_max = eps[x] > eps_max ? eps[x] : eps_max;
          abs_s_max = abs(row.score[x]) > abs_s_max ? R(abs(row.score[x])) : abs_s_max;
        }
        // (2) weights
        const R lm = log(R(n)) + gamma<R>(n, u);
        const R lse_mag = (abs_s_max + eps_max + lm * (1 + 2 * u)) * (1 + u);
        const R lam = 2 * u * lm + u * lse_mag;
        std::vector<R> a(n);
        R delta = 4 * R(n + p) * eta;
        const R gsum = (1 + gamma0<R>(n - 1, u)) * (1 + gamma0<R>(p - 1, u));
        for (std::size_t x = 0; x < n; ++x) {
          const R X = row.max + eps_max - row.score[x] + eps[x];
          a[x] = eps[x] + u * X + c2;
          if (p >= 2) a[x] += lam + u * (X + lm + lam) + c2;
          delta += row.p[x] * (exp(a[x]) * gsum - 1);
        }
        const std::size_t lrow = D.li(b, i, t);
        if (!(delta < 1)) {
          B.lse[lrow] = inf;
          for (std::size_t e = 0; e < D.d; ++e) {
            B.out_acc[D.qi(b, t, i, e)] = inf;
            B.out[D.qi(b, t, i, e)] = inf;
          }
          if (backward) {
            for (std::size_t e = 0; e < D.d; ++e) B.dq_acc[D.qi(b, t, i, e)] = inf;
            for (std::size_t s : row.keys) {
              for (std::size_t e = 0; e < D.d; ++e) {
                dk_err[D.ki(b, s, j, e)] = inf;
                dv_err[D.ki(b, s, j, e)] = inf;
              }
              ++kv_count[(b * D.lk + s) * D.g + j];
            }
          }
          continue;
        }
        // (3) output and lse
        const R g_out = p == 1 ? gamma<R>(n + 1, u) : gamma<R>(n + p + 2, u);
        for (std::size_t e = 0; e < D.d; ++e) {
          R err(0), val(0), vmax(0);
          for (std::size_t x = 0; x < n; ++x) {
            const std::size_t c = D.ki(b, row.keys[x], j, e);
            const R evc = at_or_zero(em.ev, c);
            const R vm = abs(v[c]) + evc;
            const R rho = exp(a[x]) / (1 - delta) - 1;
            err += (rho + (1 + rho) * g_out) * row.p[x] * vm + row.p[x] * evc;
            val += row.p[x] * v[c];
            vmax = vm > vmax ? vm : vmax;
          }
          err += 4 * R(n + p + 2) * eta * (1 + 2 * vmax);
          const std::size_t oi = D.qi(b, t, i, e);
          B.out_acc[oi] = err;
          B.out[oi] = to_t(val, err);
          o[e] = val;
          // The out the backward receives is the forward's, rounded to T.
          E_oT[e] = B.out[oi];
        }
        const R lnd = -log(1 - delta);
        const R e_lse = lnd + 2 * u * lm + u * (abs(row.lse) + lnd + 2 * u * lm);
        B.lse[lrow] = e_lse;
        if (!backward) continue;
        // (4) backward
        R e_d(0), dval(0);
        {
          R mag(0), in(0);
          for (std::size_t e = 0; e < D.d; ++e) {
            const std::size_t oi = D.qi(b, t, i, e);
            const R ed = at_or_zero(em.edo, oi);
            mag += (abs(dout[oi]) + ed) * (abs(o[e]) + E_oT[e]);
            in += abs(dout[oi]) * E_oT[e] + abs(o[e]) * ed + ed * E_oT[e];
            dval += dout[oi] * o[e];
          }
          e_d = gd * mag + in + R(D.d) * eta;
        }
        std::vector<R> dq_err(D.d, R(0)), dq_mag(D.d, R(0));
        for (std::size_t x = 0; x < n; ++x) {
          const std::size_t s = row.keys[x];
          R dp(0), mag(0), in(0);
          for (std::size_t e = 0; e < D.d; ++e) {
            const std::size_t oi = D.qi(b, t, i, e), c = D.ki(b, s, j, e);
            const R ed = at_or_zero(em.edo, oi), evc = at_or_zero(em.ev, c);
            dp += dout[oi] * v[c];
            mag += (abs(dout[oi]) + ed) * (abs(v[c]) + evc);
            in += abs(dout[oi]) * evc + abs(v[c]) * ed + ed * evc;
          }
          const R e_dp = gd * mag + in + R(D.d) * eta;
          const R P = row.p[x];
          const R pi =
              exp(eps[x] + e_lse + u * (row.lse - row.score[x] + eps[x] + e_lse)) * (1 + 2 * u) - 1;
          const R diff = dp - dval;
          const R e_diff = e_dp + e_d + u * (abs(diff) + e_dp + e_d);
          const R p_hat = P * (1 + pi) + eta;
          const R m_ds = p_hat * (abs(diff) + e_diff);
          const R e_ds = (pi * P + eta) * abs(diff) + p_hat * e_diff + u * m_ds + eta / 2;
          const R ds_exact = P * diff;
          const R ds_hat = m_ds * (1 + u) + eta / 2;
          for (std::size_t e = 0; e < D.d; ++e) {
            const std::size_t oi = D.qi(b, t, i, e), c = D.ki(b, s, j, e);
            const R ekc = at_or_zero(em.ek, c), eqa = at_or_zero(em.eq, oi);
            const R edo = at_or_zero(em.edo, oi);
            dq_err[e] += sig_hat * (e_ds * (abs(k[c]) + ekc) + abs(ds_exact) * ekc) +
                         ds * abs(ds_exact) * abs(k[c]);
            dq_mag[e] += sig_hat * ds_hat * (abs(k[c]) + ekc);
            dq_val[oi] += sigma * ds_exact * k[c];
            dk_err[c] += sig_hat * (e_ds * (abs(q[oi]) + eqa) + abs(ds_exact) * eqa) +
                         ds * abs(ds_exact) * abs(q[oi]);
            dk_mag[c] += sig_hat * ds_hat * (abs(q[oi]) + eqa);
            dk_val[c] += sigma * ds_exact * q[oi];
            dv_err[c] += (pi * P + eta) * (abs(dout[oi]) + edo) + P * edo;
            dv_mag[c] += p_hat * (abs(dout[oi]) + edo);
            dv_val[c] += P * dout[oi];
          }
          ++kv_count[(b * D.lk + s) * D.g + j];
        }
        const R g_dq = gamma<R>(n + p, u);
        for (std::size_t e = 0; e < D.d; ++e) {
          B.dq_acc[D.qi(b, t, i, e)] = dq_err[e] + g_dq * dq_mag[e] + R(n + 2) * eta;
        }
      }
    }
  }
  if (backward) {
    B.dk_acc = Tensor<R>(k.shape());
    B.dv_acc = Tensor<R>(k.shape());
    for (std::size_t b = 0; b < D.batch; ++b) {
      for (std::size_t s = 0; s < D.lk; ++s) {
        for (std::size_t j = 0; j < D.g; ++j) {
          const std::size_t cnt = kv_count[(b * D.lk + s) * D.g + j];
          if (cnt == 0) continue;
          for (std::size_t e = 0; e < D.d; ++e) {
            const std::size_t c = D.ki(b, s, j, e);
            B.dk_acc[c] = dk_err[c] + gamma<R>(cnt + p, u) * dk_mag[c] + R(cnt + 2) * eta;
            B.dv_acc[c] = dv_err[c] + gamma<R>(cnt + p - 1, u) * dv_mag[c] + R(cnt + 1) * eta;
          }
        }
      }
    }
  }
  // (5) rounding to T, (6) the raise. The T rounding needs the exact values.
  for (auto& x : B.out_acc.values()) x *= raise;
  for (auto& x : B.out.values()) x *= raise;
  for (auto& x : B.lse.values()) x *= raise;
  if (backward) {
    B.dq = Tensor<R>(q.shape());
    B.dk = Tensor<R>(k.shape());
    B.dv = Tensor<R>(k.shape());
    for (std::size_t x = 0; x < B.dq.size(); ++x) {
      B.dq_acc[x] *= raise;
      B.dq[x] = B.dq_acc[x] == 0 ? R(0) : to_t(dq_val[x], B.dq_acc[x]);
    }
    for (std::size_t x = 0; x < B.dk.size(); ++x) {
      B.dk_acc[x] *= raise;
      B.dv_acc[x] *= raise;
      B.dk[x] = B.dk_acc[x] == 0 ? R(0) : to_t(dk_val[x], B.dk_acc[x]);
      B.dv[x] = B.dv_acc[x] == 0 ? R(0) : to_t(dv_val[x], B.dv_acc[x]);
    }
  }
  return B;
}

}  // namespace detail

// ================================================================ the reference

// out and lse of the dense op (positions 0..L−1). @pre q [batch, Lq, h, d], k, v [batch, Lk, g,
// d] with h = cfg.q_heads, g = cfg.kv_heads, d = cfg.head_dim; cfg.mask's q_len/k_len = Lq/Lk
// (or 0 with kind none and no padding). @throws std::invalid_argument otherwise.
template <HighPrecision R = hp>
AttentionOutput<R> attention_forward(const AttentionConfig& cfg, const Tensor<R>& q,
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

// dq, dk, dv of L = Σ dout ⊙ out, given the forward's out and lse (FlashAttention 2's D = dout·out
// form; fwd.out enters only through D, fwd.lse through P = exp(s − lse)).
template <HighPrecision R = hp>
AttentionGrads<R> attention_backward(const AttentionConfig& cfg, const Tensor<R>& q,
                                     const Tensor<R>& k, const Tensor<R>& v,
                                     const AttentionOutput<R>& fwd, const Tensor<R>& dout) {
  using std::exp;
  const auto D = detail::attention_dims<R>(cfg, q, k, v, &dout);
  if (dout.shape() != q.shape() || fwd.out.shape() != q.shape() ||
      fwd.lse.shape() != Shape{D.batch, D.h, D.lq}) {
    throw std::invalid_argument(
        "reference::attention_backward: dout and fwd.out must be q's shape, fwd.lse [batch, h, "
        "Lq]");
  }
  const R sigma = R(cfg.effective_scale());
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
          if (!cfg.mask.visible(b, t, s)) continue;
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

// The same from storage-typed tensors (converted exactly).
template <class R = hp, StorageFloat T>
AttentionOutput<R> attention_forward(const AttentionConfig& cfg, const Tensor<T>& q,
                                     const Tensor<T>& k, const Tensor<T>& v) {
  return attention_forward<R>(cfg, to_hp<R>(q), to_hp<R>(k), to_hp<R>(v));
}

// ================================================================ the bounds

// Elementwise bounds on |implementation − reference| for every result, for an implementation of
// lib/ops/attention/attention.hpp's contract in `arith` (storage T, accumulator A), with the keys
// (and the queries, for dk/dv) split into at most opt.parts blocks, and inputs within opt's error
// bounds of q, k, v, dout. dout empty: forward bounds only. Derivation: this header's comment.
// @pre shapes as attention_forward; error tensors empty or of their input's shape.
template <HighPrecision R = hp>
AttentionBounds<R> attention_bounds(const AttentionConfig& cfg, const Tensor<R>& q,
                                    const Tensor<R>& k, const Tensor<R>& v, const Tensor<R>& dout,
                                    const Arithmetic& arith,
                                    const AttentionBoundOptions<R>& opt = {}) {
  using std::abs;
  auto check = [](const Tensor<R>& e, const Tensor<R>& x, const char* name) {
    if (!e.empty() && e.shape() != x.shape()) {
      throw std::invalid_argument(std::string("reference::attention_bounds: ") + name +
                                  " must be empty or of its input's shape");
    }
  };
  check(opt.q_error, q, "q_error");
  check(opt.k_error, k, "k_error");
  check(opt.v_error, v, "v_error");
  if (!dout.empty()) check(opt.dout_error, dout, "dout_error");
  detail::ErrorModel<R> em;
  em.u = unit_roundoff<R>(arith.accumulate);
  em.eta = smallest_subnormal<R>(arith.accumulate);
  em.u_t = unit_roundoff<R>(arith.storage);
  em.eta_t = smallest_subnormal<R>(arith.storage);
  em.round_t = !(arith.storage == arith.accumulate);
  const R sigma = R(cfg.effective_scale());
  if (arith.accumulate == float64_format) {
    em.scale_error = 0;  // σ is a double
  } else if (arith.accumulate == float32_format) {
    em.scale_error = abs(to_hp<R>(round_to<float>(sigma)) - sigma);
  } else {
    em.scale_error = em.u * abs(sigma) + em.eta / 2;
  }
  em.parts = opt.parts;
  em.eq = &opt.q_error;
  em.ek = &opt.k_error;
  em.ev = &opt.v_error;
  em.edo = &opt.dout_error;
  return detail::attention_model<R>(cfg, q, k, v, dout, em, R(1) + pow2<R>(-40));
}

// Bounds on the REFERENCE's own error |reference − exact| (its steps (1)–(4) with u = u_R, no
// input errors, nothing rounded to a storage type; exp and log of R assumed within 2u_R), for
// the finite-difference checks. Doubled: the magnitudes are themselves R values.
template <HighPrecision R = hp>
AttentionBounds<R> attention_reference_error(const AttentionConfig& cfg, const Tensor<R>& q,
                                             const Tensor<R>& k, const Tensor<R>& v,
                                             const Tensor<R>& dout) {
  detail::ErrorModel<R> em;
  em.u = unit_roundoff_of<R>();
  return detail::attention_model<R>(cfg, q, k, v, dout, em, R(2));
}

}  // namespace shardcheck::reference
