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
//   lse         E_lse = E_L + u·(|lse| + E_L)
//   Without class weights:
//   Z           E_Z = γ_{V−1}(u)·Σ|z_v|
//   w = (1−ε)z_y + q·Z, q = fl(ε/V):  E_a = u·|(1−ε)z_y| + η;
//               E_b = (ε/V)·(E_Z + 2u·(|Z| + E_Z)) + η;  E_w = E_a + E_b + u·(|w| + E_a + E_b)
//   l_t = lse − w       E_l = E_lse + E_w + u·(|l_t| + E_lse + E_w)
//   With class weights (every product and sum one rounding; x·y with errors E_x, E_y:
//   |x|E_y + |y|E_x + E_x·E_y, then + u(|xy| + ·) + η):
//   C           E_C = γ_{V−1}(u)·Σ|c_v|;   Z_c = Σ fl(c_v z_v): E_Zc = γ_V(u)·Σ|c_v z_v| + V·η
//   k = fl((1−ε)c_y)     E_k = u·|k| + η
//   a = lse − z_y        E_a = E_lse + u·(|a| + E_lse);   nll = k·a (product rule)
//   C·lse (product rule); b = C·lse − Z_c: E_b = E_Cl + E_Zc + u·(|b| + E_Cl + E_Zc)
//   q·b                  E_qb = (ε/V)·(E_b + 2u·(|b| + E_b)) + η
//   l_t = nll + q·b      E_l = E_nll + E_qb + u·(|l_t| + E_nll + E_qb)
//   loss_t = fl(ω_t·l_t) E_t = |ω_t|E_l + u·(|loss_t| + |ω_t|E_l) + η   (E_t = E_l without ω)
//   sum         E = Σ E_t + γ_{N−1}(u)·Σ(|loss_t| + E_t)
//   D = Σ fl(ω_t c_y)    E_D = γ_N(u)·Σ|ω_t c_y| + N·η   (0 without weights: D = N exactly)
//   mean        L = sum/D: E_L = E/(|D| − E_D) + |sum|·E_D/(|D|(|D| − E_D)), + u(|L| + E_L) + η
//               (E/N + u·(|L| + E/N) + η without weights); E_D ≥ |D| > 0: bound +inf
//   gradient    E_p = (α_v + p_v·E_S)/(S − E_S) + u·(p_v + ·) + η;
//               without class weights: c = ε/V (+ 1 − ε), E_c ≤ 2u·|c| + 2η, d = p − c;
//               with: K = k + fl(q·C), E_K = E_k + E_qC + u(|K| + E_k + E_qC); K·p (product
//               rule); c = fl(q·c_v) (+ k at the target): E_c = 2u·|q c_v| + η (+ E_k + u(|c| +
//               ·)); d = K·p − c;  E_d = E_Kp + E_c + u·(|d| + E_Kp + E_c);
//               s = base·ω_t (base = dloss, or dloss/D for mean: E_base = |dloss|·E_D/(|D|(|D| −
//               E_D)) + u(|base| + ·) + η); E_s = |ω|E_base + u(|s| + |ω|E_base) + η (with ω)
//               E_g = |s|·E_d + |d|·E_s + E_d·E_s + u·(|g| + ·) + η
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

// The errors of one token's lse: α_v per vocabulary entry, E_S and E_lse.
template <class R>
struct LseErrors {
  std::vector<R> alpha;
  R e_s{0}, e_lse{0};
};

// A token's loss: the bound on the implementation's error (raised by 1 + 16u) and on R's own.
template <class R>
struct TokenLossErrors {
  R implementation{0}, reference{0};
};

// The factors every gradient element of a token shares: E_k, K and E_K, s and E_s.
template <class R>
struct GradientRowErrors {
  R e_k{0}, k_factor{0}, e_k_factor{0}, scale{0}, e_scale{0};
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
        same_(arith.accumulate == arith.storage),
        g_ref_(gamma<R>(4 * spec.V + 64, u_r_)),
        slack_(1 + 16 * u_),
        g_v_(spec.V >= 1 ? gamma<R>(spec.V - 1, u_) : R(0)) {
    using std::abs;
    for (std::size_t v = 0; v < spec.V; ++v) c_abs_ += abs(spec.cls(v));
    e_c_total_ = spec.by_class() ? R(g_v_ * c_abs_) : R(0);
    e_den_ = denominator_error();
    // D's sign and non-zeroness are not certain when its error reaches |D|: the bound is then
    // infinite (never with the suite's non-negative dyadic weights).
    unbounded_ = !d.zero() && e_den_ >= abs(d.value);
    e_qc_ = spec.by_class() && spec.eps > 0 ? smoothing_error(spec.c_total, e_c_total_) : R(0);
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
    r.e_lse = add_error(s.lse, log_error(r.e_s, s.s, s.log_s));
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

  // ---- the token's loss ----

  TokenLossErrors<R> token_loss_errors(const Tensor<R>& z, std::size_t t,
                                       const TokenLogSumExp<R>& s, const TokenLoss<R>& l,
                                       const R& e_lse) const {
    using std::abs;
    const R om = spec_.tok(t);
    const auto [e_l, magnitude] = spec_.by_class() ? class_weighted_loss_error(z, t, s, l, e_lse)
                                                   : smoothed_loss_error(z, t, s, l, e_lse);
    TokenLossErrors<R> r;
    r.implementation = (spec_.by_token() ? token_weight_error(om, e_l, l.loss) : e_l) * slack_;
    r.reference = g_ref_ * (abs(om) + 1) * magnitude;
    return r;
  }

  // ---- the reduction ----

  // E of Σ_t loss_t, from each token's E_t.
  R sum_error(std::span<const R> token_loss, std::span<const R> e_tok) const {
    using std::abs;
    R e_sum(0), mag(0);
    for (std::size_t t = 0; t < token_loss.size(); ++t) {
      e_sum += e_tok[t];
      mag += abs(token_loss[t]) + e_tok[t];
    }
    const std::size_t n = den_.count;
    return e_sum + (n >= 2 ? R(gamma<R>(n - 1, u_) * mag) : R(0));
  }
  // The reduced loss's bound, rounded to T, from the sum and its error E.
  R reduced_loss_error(const R& sum, const R& e, const R& loss) const {
    if (!spec_.mean()) return to_storage(loss, e);
    if (den_.zero()) return 0;
    if (unbounded_) return to_storage(loss, std::numeric_limits<R>::infinity());
    return to_storage(loss, quotient_error(sum, e, loss) * slack_);
  }

  // ---- the gradient ----

  // E_base of the upstream factor (dloss/D for mean, with R's own error of D), the same for
  // every token.
  R upstream_error(const Tensor<R>& dloss) const {
    using std::abs;
    if (!spec_.mean() || den_.zero()) return 0;
    if (unbounded_) return std::numeric_limits<R>::infinity();
    const R base = dloss[0] / den_.value;
    return quotient_error(dloss[0], R(0), base) +
           gamma<R>(den_.count + 4, u_r_) * abs(base) * (den_.magnitude / abs(den_.value) + 1);
  }

  GradientRowErrors<R> gradient_row_errors(std::size_t t, const TokenLoss<R>& l, const R& k_factor,
                                           const R& scale, const R& e_base) const {
    using std::abs;
    GradientRowErrors<R> r;
    r.e_k = u_ * abs(l.k) + eta_;
    r.k_factor = k_factor;
    r.e_k_factor = spec_.eps > 0 ? add_error(k_factor, r.e_k, e_qc_) : r.e_k;
    r.scale = scale;
    r.e_scale = spec_.by_token() ? token_weight_error(spec_.tok(t), e_base, scale) : e_base;
    return r;
  }

  // The bound of gradient element (t, v), rounded to T.
  R gradient_error(const TokenLogSumExp<R>& s, const LseErrors<R>& le,
                   const GradientRowErrors<R>& row, std::size_t v, bool target,
                   const GradientTerm<R>& g) const {
    using std::abs;
    if (spec_.mean() && den_.zero()) return 0;
    if (spec_.mean() && unbounded_) return std::numeric_limits<R>::infinity();
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
    const R e_prod = abs(row.scale) * e_d + abs(g.d) * row.e_scale + e_d * row.e_scale;
    const R e_g = (e_prod + u_ * (abs(g.g) + e_prod) + eta_) * slack_ +
                  g_ref_ * (abs(g.kp) + abs(g.c) + 1) * (abs(row.scale) + 1);
    return to_storage(g.g, e_g);
  }

  // Rounded once from A to T.
  R to_storage(const R& x, const R& e) const {
    using std::abs;
    return same_ ? e : R(e + u_t_ * (abs(x) + e) + eta_t_ / 2);
  }

 private:
  // E_D of D = Σ fl(ω_t c_y): N − 1 additions in A (exact without weights).
  R denominator_error() const {
    const std::size_t n = den_.count;
    return spec_.weighted() && n >= 1 ? R(gamma<R>(n, u_) * den_.magnitude + R(n) * eta_) : R(0);
  }

  // E_l of l_t = lse − ((1 − ε)z_y + q·Z), and the magnitude R's own error scales with.
  std::pair<R, R> smoothed_loss_error(const Tensor<R>& z, std::size_t t, const TokenLogSumExp<R>& s,
                                      const TokenLoss<R>& l, const R& e_lse) const {
    using std::abs;
    R z_abs(0);
    for (std::size_t v = 0; v < spec_.V; ++v) z_abs += abs(z(t, v));
    const R e_a = u_ * abs(l.a) + eta_;
    const R e_z = g_v_ * z_abs;
    const R e_b = spec_.eps > 0 ? smoothing_error(l.z_sum, e_z) : R(0);
    const R e_w = add_error(l.w, e_a, e_b);
    return {add_error(l.l, e_lse, e_w), abs(s.m) + abs(s.log_s) + abs(l.a) + abs(l.b) + z_abs + 1};
  }

  // E_l of l_t = k·(lse − z_y) + q·(C·lse − Z_c), and the magnitude R's own error scales with.
  std::pair<R, R> class_weighted_loss_error(const Tensor<R>& z, std::size_t t,
                                            const TokenLogSumExp<R>& s, const TokenLoss<R>& l,
                                            const R& e_lse) const {
    using std::abs;
    const std::size_t V = spec_.V;
    R zc_abs(0);
    for (std::size_t v = 0; v < V; ++v) zc_abs += abs(spec_.cls(v) * z(t, v));
    const R e_k = u_ * abs(l.k) + eta_;
    const R e_a = add_error(l.a, e_lse);
    const R e_nll = product_error(l.k, e_k, l.a, e_a, l.nll);
    R e_l = e_nll;
    if (spec_.eps > 0) {
      const R e_zc = gamma<R>(V, u_) * zc_abs + R(V) * eta_;
      const R e_cl = product_error(spec_.c_total, e_c_total_, s.lse, e_lse, l.cl);
      const R e_b = add_error(l.b, e_cl, e_zc);
      e_l = add_error(l.l, e_nll, smoothing_error(l.b, e_b));
    }
    const R& q = spec_.q;
    return {e_l, (abs(l.k) + q * c_abs_ + 1) * (abs(s.m) + abs(s.log_s) + 1) +
                     abs(l.k) * abs(l.z_y) + q * zc_abs + 1};
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
  // fl(fl(ε/V)·x) for x with error e.
  R smoothing_error(const R& x, const R& e) const {
    using std::abs;
    return spec_.q * (e + 2 * u_ * (abs(x) + e)) + eta_;
  }
  // fl(ω·x) for an exact weight ω and x with error e.
  R token_weight_error(const R& om, const R& e, const R& product) const {
    using std::abs;
    return abs(om) * e + u_ * (abs(product) + abs(om) * e) + eta_;
  }
  // fl(x/D) for x with error e_x: |x̂/D̂ − x/D| ≤ e_x/(|D| − E_D) + |x|·E_D/(|D|(|D| − E_D)),
  // then one rounding.
  R quotient_error(const R& x, const R& e_x, const R& quotient) const {
    using std::abs;
    const R ad = abs(den_.value);
    const R e_q = e_x / (ad - e_den_) + abs(x) * e_den_ / (ad * (ad - e_den_));
    return e_q + u_ * (abs(quotient) + e_q) + eta_;
  }

  const CeSpec<R>& spec_;
  LossDenominator<R> den_;
  R u_, eta_, u_t_, eta_t_, u_r_;
  bool same_;
  R g_ref_;  // R's own rounding: γ_{4V+64}(u_R)
  R slack_;  // 1 + 16u, for the products of error terms
  R g_v_;    // γ_{V−1}(u)
  R c_abs_{0}, e_c_total_{0}, e_den_{0}, e_qc_{0};
  bool unbounded_ = false;
};

}  // namespace shardcheck::reference::detail
