// Elementwise a-priori error bounds for an implementation of
// lib/ops/vocab/vocab_cross_entropy.hpp's arithmetic contract, evaluated at the values of the
// definition (vocab_cross_entropy_definition.hpp). The derivation is in docs/vocab.md
// ("Cross-entropy"); each function below is one of its steps, named after it.
//
// The implementation computes every step in A = acc_t<T> (u = u_A, η = smallest subnormal of A),
// with the C library's exp and log, assumed within 1 ulp (relative error ≤ 2u, plus η below the
// normal range: glibc's documented maximum errors for exp, expf, log, logf are ≤ 1 ulp), and
// rounds the results once to T. Bounds (all first-order terms kept exactly; products of error
// terms covered by the final factor 1 + 16u):
//   exp terms   α_v = e_v·((1 + expm1(u·|z_v − m|))·(1 + 2u) − 1) + η       (d_v rounds once)
//   S           E_S = Σ α_v + γ_{V−1}(u)·(S + Σ α_v)                         (V terms, any order)
//   log S       λ = −log(1 − E_S/S);  E_L = λ + 2u·(log S + λ) + η             (S ≥ 1)
//   x·m, x·z    x̂ = x + δ, |δ| ≤ E_x: fl(x̂·m) has error |m|E_x + u(|x m| + |m|E_x) + η (0 when
//               x̂ = x ∈ {0, 1}: exact); the same for z
//   r(x, z) = fl(fl(x̂·m) − fl(x̂·z)):  E_r = E_xm + E_xz + u·(|x(m − z)| + E_xm + E_xz)
//   k           1 − ε exact without class weights (E_k = 0); fl((1 − ε)c_y): E_k = u·|k| + η
//   T = r(k, z_y)
//   w_v         fl(ε/V): E_w = u·ε/V + η; fl(fl(ε/V)·c_v): E_w = 2u·|w_v| + η
//   Q = Σ_v r(w_v, z_v), V terms, any order:  E_Q = Σ E_rv + γ_{V−1}(u)·Σ(|r_v| + E_rv)
//   without class weights: P = L + T (L = log S): E_P = E_L + E_T + u·(|P| + E_L + E_T)
//   with class weights: C_q = Σ_v w_v (V − 1 additions): E_Cq = Σ E_wv + γ_{V−1}(u)·Σ(|w_v| +
//               E_wv); K = k + C_q: E_K = E_k + E_Cq + u·(|K| + ·); K·L by the product rule (x·y
//               with errors E_x, E_y: |x|E_y + |y|E_x + E_x·E_y, then + u(|xy| + ·) + η);
//               P = K·L + T: E_P = E_KL + E_T + u·(|P| + ·)
//   l_t = P + Q         E_l = E_P + E_Q + u·(|l_t| + E_P + E_Q)   (l_t = P without smoothing)
//   overflow    the analysis assumes no intermediate overflows: when |x| + E_x ≥ Ω_A (A's
//               overflow threshold) for any intermediate x above (fl(x·m), fl(x·z), r, T, the
//               partial sums of Q and C_q, bounded by (1 + γ_{V−1})·Σ(|·| + E), K, K·L, P, l_t)
//               the bound is +inf. Without class weights every term is ≥ 0 and ≤ l_t, so that
//               happens only when l_t itself is within its bound of Ω_A; with class weights of
//               mixed sign it can happen for a finite loss (documented in the library's header).
//   none        loss_t = fl(ω_t·l_t): E_t = |ω_t|E_l + u·(|loss_t| + |ω_t|E_l) + η (E_t = E_l
//               without ω)
//   sum, mean   ω'_t = ω_t·2^−e exact unless subnormal (η/2); loss'_t = fl(ω'_t·l_t):
//               E'_t = |ω'_t|E_l + (|l_t| + E_l)·η/2 + u·(|loss'_t| + ·) + η
//   N'          E' = Σ E'_t + γ_{N−1}(u)·Σ(|loss'_t| + E'_t)  (partial sums: the overflow rule)
//   sum         ldexp(N', e): E = 2^e·E' + η
//   D' = Σ fl(ω'_t c_y)   E_D' = γ_N(u)·Σ|ω'_t c_y| + Σ(|c_y| + 1)·η   (D' = N exactly without
//               weights)
//   mean        L = N'/D': E_L = E'/(|D'| − E_D') + |N'|·E_D'/(|D'|(|D'| − E_D')), + u(|L| + E_L)
//               + η; E_D' ≥ |D'| > 0, or the partial sums of D' reaching Ω_A: bound +inf;
//               D = 0 exactly: the mean is 0 (the convention), with bound 0 when every term is
//               0 and +inf when terms of mixed sign cancel (the computed D' need not be 0)
//   gradient    E_p = (α_v + p_v·E_S)/(S − E_S) + u·(p_v + ·) + η;
//               without class weights: c = ε/V (+ 1 − ε), E_c ≤ 2u·|c| + 2η, d = p − c;
//               with: K = k + C_q, E_K as above; K·p (product rule); c = fl(q·c_v) (+ k at the
//               target): E_c = 2u·|q c_v| + η (+ E_k + u(|c| + ·)); d = K·p − c;
//               E_d = E_Kp + E_c + u·(|d| + E_Kp + E_c);
//               b = dloss (exact), or fl(dloss/D') for mean: E_b = |dloss|·E_D'/(|D'|(|D'| −
//               E_D')) + u(|b| + ·) + η; db = fl(d·b): E_db = |b|E_d + |d|E_b + E_d·E_b +
//               u·(|db| + ·) + η; g = fl(db·ω̃) (ω̃ = ω_t, or ω'_t for mean, whose η/2 adds
//               (|db| + E_db)·η/2): E_g = |ω̃|E_db + u·(|g| + |ω̃|E_db) + η; g = db without ω;
//               the overflow rule for b, K, K·p, c, d, db: +inf (without class weights |d| ≤ 1
//               and |db| ≤ |b|, so only b = dloss/D' can reach Ω_A: D' tiny against dloss)
//   to T        + u_T·(|x| + E) + η_T/2  (when T ≠ A)
// plus the reference's own rounding in R: γ_{4V+64}(u_R) times the magnitudes involved.
// ε is assumed exact in A, and 1 − ε exact (true for the dyadic ε the suite draws); the weights
// are values of T (exact in A and R).
#pragma once

#include "reference/bounds.hpp"
#include "reference/precision.hpp"
#include "reference/vocab/vocab_cross_entropy_definition.hpp"

#include <cstddef>
#include <limits>
#include <span>
#include <utility>
#include <vector>

namespace shardcheck::reference::detail {

// The errors of one token's lse: α_v per vocabulary entry, E_S, E_L (of log S) and E_lse.
template <class R>
struct LseErrors {
  std::vector<R> alpha;
  R e_s{0}, e_log{0}, e_lse{0};
};

// A token's l_t: the bound on the implementation's error (+inf when an intermediate may
// overflow; raised by 1 + 16u with the token weight's step) and on R's own.
template <class R>
struct TokenLossErrors {
  R implementation{0}, reference{0};
};

// The factors every gradient element of a token shares: E_k, K and E_K, the upstream factor b
// (dloss, or dloss/D' for mean) and E_b, the token weight ω̃ (ω_t, ω'_t for mean, 1 without)
// and s = b·ω̃ (R's own error scales with it).
template <class R>
struct GradientRowErrors {
  R e_k{0}, k_factor{0}, e_k_factor{0}, base{0}, e_base{0}, omega{1}, scale{0};
  bool omega_rounded = false;  // ω'_t = ldexp(ω_t, −e): within η/2
};

// The steps above for one arithmetic (storage T, accumulator A), one call's options and its D.
template <class R>
class CrossEntropyErrors {
 public:
  CrossEntropyErrors(const Arithmetic& arith, const CeSpec<R>& spec, const LossDenominator<R>& d)
      : spec_(spec),
        den_(d),
        u_(unit_roundoff<R>(arith.accumulate)),
        eta_(smallest_subnormal<R>(arith.accumulate)),
        u_t_(unit_roundoff<R>(arith.storage)),
        eta_t_(smallest_subnormal<R>(arith.storage)),
        u_r_(unit_roundoff_of<R>()),
        omega_a_(overflow_threshold<R>(arith.accumulate)),
        same_(arith.accumulate == arith.storage),
        g_ref_(gamma<R>(4 * spec.V + 64, u_r_)),
        slack_(1 + 16 * u_),
        g_v_(spec.V >= 1 ? gamma<R>(spec.V - 1, u_) : R(0)) {
    using std::abs;
    for (std::size_t v = 0; v < spec.V; ++v) c_abs_ += abs(spec.cls(v));
    e_den_ = denominator_error();
    // D's sign and non-zeroness are not certain when its error reaches |D'|, and D' itself may
    // have overflowed when its partial sums can reach Ω_A: the bound is then infinite (never
    // with the suite's non-negative dyadic weights).
    const std::size_t n = den_.count;
    unbounded_ = !d.zero() && (e_den_ >= abs(d.scaled()) ||
                               (d.scaled_magnitude() + e_den_) * (1 + gamma<R>(n, u_)) >= omega_a_);
    if (spec.by_class() && spec.eps > 0) {
      R mag(0), e(0);
      for (std::size_t v = 0; v < spec.V; ++v) {
        const R w = spec.q * spec.cls(v);
        const R e_w = smoothing_weight_error(w);
        e += e_w;
        mag += abs(w) + e_w;
      }
      e_qc_ = e + g_v_ * mag;
      qc_overflows_ = mag * (1 + g_v_) >= omega_a_;
    }
  }

  // ---- the token's lse ----

  LseErrors<R> lse_errors(const Tensor<R>& z, std::size_t t, const TokenLogSumExp<R>& s) const {
    LseErrors<R> r;
    r.alpha.resize(spec_.V);
    R sum_alpha(0);
    for (std::size_t v = 0; v < spec_.V; ++v) {
      r.alpha[v] = exp_error(s.e[v], z(t, v) - s.m);
      sum_alpha += r.alpha[v];
    }
    r.e_s = normalizer_error(sum_alpha, s.s);
    r.e_log = log_error(r.e_s, s.s, s.log_s);
    r.e_lse = add_error(s.lse, r.e_log);
    return r;
  }

  // α_v of e_v = exp(d), d = z_v − m (exact in R: both are values of T).
  R exp_error(const R& e, const R& d) const {
    using std::abs;
    using std::exp;
    return e * ((exp(u_ * abs(d))) * (1 + 2 * u_) - 1) + eta_;
  }
  // E_S of S = Σ e_v.
  R normalizer_error(const R& sum_alpha, const R& s) const {
    return sum_alpha + g_v_ * (s + sum_alpha);
  }
  // E_L of log S.
  R log_error(const R& e_s, const R& s, const R& log_s) const {
    using std::log;
    const R rho = e_s / s;
    const R lam = -log(1 - rho);
    return lam + 2 * u_ * (log_s + lam) + eta_;
  }

  // ---- the token's loss l_t = (K·L + T) + Q ----

  TokenLossErrors<R> token_loss_errors(const Tensor<R>& z, std::size_t t,
                                       const TokenLogSumExp<R>& s, const TokenLoss<R>& l,
                                       const LseErrors<R>& le) const {
    using std::abs;
    const std::size_t V = spec_.V;
    bool over = false;
    auto watch = [&](const R& x, const R& e) {
      if (abs(x) + e >= omega_a_) over = true;
    };
    const R& m = s.m;
    // k, T = r(k, z_y)
    const R e_k = spec_.by_class() ? R(u_ * abs(l.k) + eta_) : R(0);
    const R e_t = gap_error(l.k, e_k, m, l.z_y, l.t, watch);
    // Q = Σ_v r(w_v, z_v)
    R e_q(0), mag_q(0), mag_ref = abs(l.k) * (abs(m) + abs(l.z_y));
    if (spec_.eps > 0) {
      R sum_e(0);
      for (std::size_t v = 0; v < V; ++v) {
        const R w = spec_.q * spec_.cls(v);
        const R gap = w * (m - z(t, v));
        const R e_r = gap_error(w, smoothing_weight_error(w), m, z(t, v), gap, watch);
        sum_e += e_r;
        mag_q += abs(gap) + e_r;
        mag_ref += abs(w) * (abs(m) + abs(z(t, v)));
      }
      e_q = sum_e + g_v_ * mag_q;
      if (mag_q * (1 + g_v_) >= omega_a_) over = true;
    }
    // K·L (L exactly log S's computed value without class weights)
    R e_kl = le.e_log;
    if (spec_.by_class()) {
      if (qc_overflows_) over = true;
      const R e_kk = add_error(l.K, e_k, e_qc_);
      watch(l.K, e_kk);
      e_kl = product_error(l.K, e_kk, s.log_s, le.e_log, l.kl);
      watch(l.kl, e_kl);
    }
    const R e_p = add_error(l.p, e_kl, e_t);
    watch(l.p, e_p);
    const R e_l = spec_.eps > 0 ? add_error(l.l, e_p, e_q) : e_p;
    watch(l.l, e_l);
    TokenLossErrors<R> r;
    r.implementation = over ? std::numeric_limits<R>::infinity() : e_l;  // slack: by the caller
    r.reference = g_ref_ * ((abs(l.K) + 1) * (abs(s.log_s) + 1) + mag_ref + 1);
    return r;
  }

  // The bound of loss_t = fl(ω_t·l_t) (reduction none), from l_t's errors.
  R unreduced_loss_error(std::size_t t, const TokenLoss<R>& l, const TokenLossErrors<R>& e) const {
    using std::abs;
    const R om = spec_.tok(t);
    const R e_impl =
        spec_.by_token() ? token_weight_error(om, e.implementation, l.loss) : e.implementation;
    return e_impl * slack_ + (abs(om) + 1) * e.reference;
  }

  // loss'_t = fl(ω'_t·l_t) (sum and mean, ω'_t = ω_t·2^−e) and its bound, from l_t's errors.
  std::pair<R, R> scaled_loss(std::size_t t, const TokenLoss<R>& l,
                              const TokenLossErrors<R>& e) const {
    using std::abs;
    const R om = den_.scale * spec_.tok(t);
    const R value = om * l.l;
    const R e_impl =
        spec_.by_token() ? scaled_weight_error(om, e.implementation, value, l.l) : e.implementation;
    return {value, e_impl * slack_ + (abs(om) + 1) * e.reference};
  }

  // ---- the reduction ----

  // E' of N' = Σ_t loss'_t, from each token's E'_t (+inf when a partial sum may overflow).
  R sum_error(std::span<const R> token_loss, std::span<const R> e_tok) const {
    using std::abs;
    R e_sum(0), mag(0);
    for (std::size_t t = 0; t < token_loss.size(); ++t) {
      e_sum += e_tok[t];
      mag += abs(token_loss[t]) + e_tok[t];
    }
    const std::size_t n = den_.count;
    const R g = n >= 2 ? gamma<R>(n - 1, u_) : R(0);
    if (mag * (1 + g) >= omega_a_) return std::numeric_limits<R>::infinity();
    return e_sum + g * mag;
  }
  // The reduced loss's bound, rounded to T, from N' (the scaled sum) and its error E'.
  R reduced_loss_error(const R& scaled_sum, const R& e, const R& loss) const {
    if (!spec_.mean()) return to_storage(loss, e / den_.scale + eta_);
    if (den_.cancels() || unbounded_) return to_storage(loss, std::numeric_limits<R>::infinity());
    if (den_.zero()) return 0;
    return to_storage(loss, quotient_error(scaled_sum, e, loss) * slack_);
  }

  // ---- the gradient ----

  // E_base of the upstream factor (dloss/D' for mean, with R's own error of D'), the same for
  // every token.
  R upstream_error(const Tensor<R>& dloss) const {
    using std::abs;
    if (!spec_.mean()) return 0;
    if (den_.cancels() || unbounded_) return std::numeric_limits<R>::infinity();
    if (den_.zero()) return 0;
    const R base = dloss[0] / den_.scaled();
    return quotient_error(dloss[0], R(0), base) +
           gamma<R>(den_.count + 4, u_r_) * abs(base) *
               (den_.scaled_magnitude() / abs(den_.scaled()) + 1);
  }

  // base: the upstream factor (dloss, or dloss/D for mean); scale = base·ω_t; e_base: the error
  // of the computed factor b (dloss: 0; fl(dloss/D') for mean, b = base·2^e).
  GradientRowErrors<R> gradient_row_errors(std::size_t t, const TokenLoss<R>& l, const R& k_factor,
                                           const R& base, const R& scale, const R& e_base) const {
    using std::abs;
    GradientRowErrors<R> r;
    r.e_k = u_ * abs(l.k) + eta_;
    r.k_factor = k_factor;
    r.e_k_factor = spec_.eps > 0 ? add_error(k_factor, r.e_k, e_qc_) : r.e_k;
    const bool mean = spec_.mean();
    r.base = mean ? R(base / den_.scale) : base;
    r.e_base = e_base;
    r.omega = spec_.by_token() ? (mean ? R(den_.scale * spec_.tok(t)) : spec_.tok(t)) : R(1);
    r.omega_rounded = spec_.by_token() && mean;
    r.scale = scale;
    return r;
  }

  // The bound of gradient element (t, v), rounded to T: d, then db = fl(d·b), then g = fl(db·ω̃)
  // (g = db without token weights).
  R gradient_error(const TokenLogSumExp<R>& s, const LseErrors<R>& le,
                   const GradientRowErrors<R>& row, std::size_t v, bool target,
                   const GradientTerm<R>& g) const {
    using std::abs;
    if (spec_.mean() && (den_.cancels() || unbounded_)) return std::numeric_limits<R>::infinity();
    if (spec_.mean() && den_.zero()) return 0;
    const R e_p = probability_error(s, le, v, g.p);
    R e_kp = e_p, e_c(0);
    if (!spec_.by_class()) {
      e_c = 2 * u_ * abs(g.c) + 2 * eta_;
    } else {
      e_kp = product_error(row.k_factor, row.e_k_factor, g.p, e_p, g.kp);
      const R e_cv = 2 * u_ * abs(g.cv) + eta_;
      e_c = target ? add_error(g.c, e_cv, row.e_k) : e_cv;
    }
    const R e_d_raw = e_kp + e_c;
    const R e_d = e_d_raw + u_ * (abs(g.d) + e_d_raw);
    const R db = g.d * row.base;
    const R e_db = product_error(g.d, e_d, row.base, row.e_base, db);
    // The overflow rule: an intermediate that may have overflowed leaves nothing to bound.
    const std::pair<R, R> steps[] = {{row.base, row.e_base},
                                     {row.k_factor, row.e_k_factor},
                                     {g.kp, e_kp},
                                     {g.c, e_c},
                                     {g.d, e_d},
                                     {db, e_db}};
    for (const auto& [x, e] : steps) {
      if (abs(x) + e >= omega_a_) return std::numeric_limits<R>::infinity();
    }
    R e_impl = e_db;
    if (spec_.by_token()) {
      e_impl = row.omega_rounded ? scaled_weight_error(row.omega, e_db, g.g, db)
                                 : token_weight_error(row.omega, e_db, g.g);
    }
    const R e_g = e_impl * slack_ + g_ref_ * (abs(g.kp) + abs(g.c) + 1) * (abs(row.scale) + 1);
    return to_storage(g.g, e_g);
  }

  // mean whose D' may compute as 0 (E_D' ≥ |D'|, or terms of mixed sign cancel to D = 0): the
  // library's D' = 0 convention (loss 0, gradient 0) may apply, so the result is not determined
  // by the reference's value, finite or not (every bound of it is +inf).
  bool denominator_uncertain() const { return spec_.mean() && (den_.cancels() || unbounded_); }

  // Rounded once from A to T.
  R to_storage(const R& x, const R& e) const {
    using std::abs;
    return same_ ? e : R(e + u_t_ * (abs(x) + e) + eta_t_ / 2);
  }

 private:
  // E_D' of D' = Σ fl(ω'_t c_y): N − 1 additions in A (exact without weights); each ω'_t
  // rounded at most η/2 (subnormal), each product at most u relative plus η.
  R denominator_error() const {
    const std::size_t n = den_.count;
    return spec_.weighted() && n >= 1
               ? R(gamma<R>(n, u_) * den_.scaled_magnitude() + (den_.class_magnitude + R(n)) * eta_)
               : R(0);
  }

  // E_w of w_v: fl(ε/V) (without class weights) or fl(fl(ε/V)·c_v).
  R smoothing_weight_error(const R& w) const {
    using std::abs;
    return spec_.by_class() ? R(2 * u_ * abs(w) + eta_) : R(u_ * spec_.q + eta_);
  }

  // E_r of r(x, z) = fl(fl(x̂·m) − fl(x̂·z)) for x̂ within e_x of x; gap = x·(m − z). Reports
  // each intermediate to watch (the overflow rule).
  template <class Watch>
  R gap_error(const R& x, const R& e_x, const R& m, const R& z, const R& gap, Watch& watch) const {
    using std::abs;
    const bool exact = e_x == 0 && (x == 0 || x == 1);
    auto scaled = [&](const R& y) {
      R e = exact ? R(0) : R(abs(y) * e_x + u_ * (abs(x * y) + abs(y) * e_x) + eta_);
      watch(x * y, e);
      return e;
    };
    const R e_m = scaled(m), e_z = scaled(z);
    R e = add_error(gap, e_m, e_z);
    watch(gap, e);
    return e;
  }

  // E_p of p_v = e_v/S.
  R probability_error(const TokenLogSumExp<R>& s, const LseErrors<R>& le, std::size_t v,
                      const R& p) const {
    const R pe = (le.alpha[v] + p * le.e_s) / (s.s - le.e_s);
    return pe + u_ * (p + pe) + eta_;
  }

  // x = fl(a + b) (or of a and an exact operand) with errors e_a, e_b.
  R add_error(const R& x, const R& e_a) const {
    using std::abs;
    return e_a + u_ * (abs(x) + e_a);
  }
  R add_error(const R& x, const R& e_a, const R& e_b) const {
    using std::abs;
    return e_a + e_b + u_ * (abs(x) + e_a + e_b);
  }
  // xy = fl(x·y) with errors e_x, e_y (the product rule, then one rounding).
  R product_error(const R& x, const R& e_x, const R& y, const R& e_y, const R& xy) const {
    using std::abs;
    R e = abs(x) * e_y + abs(y) * e_x + e_x * e_y;
    e += u_ * (abs(xy) + e) + eta_;
    return e;
  }
  // fl(ω·x̂) for an exact token weight ω and x with error e.
  R token_weight_error(const R& om, const R& e, const R& product) const {
    using std::abs;
    return abs(om) * e + u_ * (abs(product) + abs(om) * e) + eta_;
  }
  // fl(ω̂'·x̂) for ω̂' = ldexp(ω_t, −e), within η/2 of ω' = ω_t·2^−e (exact unless subnormal),
  // and x with error e_x: (|x| + e_x)·η/2 more than token_weight_error.
  R scaled_weight_error(const R& om, const R& e_x, const R& product, const R& x) const {
    using std::abs;
    const R err = abs(om) * e_x + (abs(x) + e_x) * eta_ / 2;
    return err + u_ * (abs(product) + err) + eta_;
  }
  // fl(x/D') for x with error e_x: |x̂/D̂' − x/D'| ≤ e_x/(|D'| − E_D') + |x|·E_D'/(|D'|(|D'| −
  // E_D')), then one rounding.
  R quotient_error(const R& x, const R& e_x, const R& quotient) const {
    using std::abs;
    const R ad = abs(den_.scaled());
    const R e_q = e_x / (ad - e_den_) + abs(x) * e_den_ / (ad * (ad - e_den_));
    return e_q + u_ * (abs(quotient) + e_q) + eta_;
  }

  const CeSpec<R>& spec_;
  LossDenominator<R> den_;
  R u_, eta_, u_t_, eta_t_, u_r_, omega_a_;
  bool same_;
  R g_ref_;  // R's own rounding: γ_{4V+64}(u_R)
  R slack_;  // 1 + 16u, for the products of error terms
  R g_v_;    // γ_{V−1}(u)
  R c_abs_{0}, e_den_{0}, e_qc_{0};
  bool unbounded_ = false, qc_overflows_ = false;
};

}  // namespace shardcheck::reference::detail
