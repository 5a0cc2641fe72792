// Dense cross-entropy over the vocabulary (PyTorch F.cross_entropy semantics, with PyTorch's
// per-class `weight` and per-token weights), forward and backward, in the high-precision scalar
// R, with elementwise a-priori error bounds for lib/ops/vocab/vocab_cross_entropy.hpp's arithmetic
// contract. The derivation is in docs/vocab.md ("Cross-entropy"); each term below names its step.
//
// Per token t (not ignored), target y, ε = label smoothing, V the global vocabulary size, c_v the
// class weights and ω_t the token weights (1 when not given; values of T, exact in A and in R):
//   m = max z;  S = Σ_v exp(z_v − m);  lse = log S + m;  Z = Σ_v z_v;  Z_c = Σ_v c_v·z_v;
//   C = Σ_v c_v
//   loss_t = ω_t·((1 − ε)·c_y·(lse − z_y) + (ε/V)·(C·lse − Z_c))
//          = ω_t·(lse − (1 − ε)·z_y − (ε/V)·Z)                       without class weights
//   ∂loss_t/∂z_v = ω_t·(K·exp(z_v − m)/S − (ε/V)·c_v − (v = y)·(1 − ε)·c_y),
//   K = (1 − ε)·c_y + (ε/V)·C
// Reductions: none (loss [tokens]); sum (Σ_t loss_t); mean (sum / D, D = Σ_{t non-ignored}
// ω_t·c_{y_t}, = N without weights; 0, with gradient 0, when D = 0, the library's documented
// convention where PyTorch gives NaN). Ignored tokens: loss 0, gradient 0, bound 0 (the
// implementation writes exact zeros).
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

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardcheck::reference {

enum class CeReduction { none, sum, mean };

template <class R = hp>
struct CrossEntropyOptions {
  std::optional<std::int64_t> ignore_index = -100;
  R label_smoothing{0};
  CeReduction reduction = CeReduction::mean;
  std::vector<R> class_weight;  // PyTorch's per-class `weight`: empty (none) or [V]
  std::vector<R> token_weight;  // per-token weights ω_t: empty (none) or [tokens]
};

template <class R = hp>
struct CrossEntropyResult {
  Tensor<R> loss, loss_bound;  // [tokens] (none) or [1]
  Tensor<R> grad, grad_bound;  // [tokens, V]: the gradient for the upstream dloss
  // Per token (for the finite-difference checks): the loss in R and a bound on R's own error.
  std::vector<R> token_loss, token_loss_error;
  std::size_t count = 0;  // N
  R weight_sum{0};        // D = Σ_{t non-ignored} ω_t·c_{y_t} (N without weights)
};

// logits [tokens, V]; dloss [tokens] (none) or [1]. `arith`: the implementation's storage T and
// accumulator (arithmetic_of<T>()).
template <HighPrecision R = hp>
CrossEntropyResult<R> cross_entropy(const Tensor<R>& logits, std::span<const std::int64_t> targets,
                                    const Tensor<R>& dloss, const CrossEntropyOptions<R>& opt,
                                    const Arithmetic& arith) {
  using std::abs;
  using std::exp;
  using std::log;
  if (logits.ndim() != 2 || targets.size() != logits.dim(0)) {
    throw std::invalid_argument(
        "reference::cross_entropy: logits must be [tokens, V] with one "
        "target per token");
  }
  const std::size_t tokens = logits.dim(0), V = logits.dim(1);
  const bool none = opt.reduction == CeReduction::none;
  if (dloss.size() != (none ? tokens : 1)) {
    throw std::invalid_argument(
        "reference::cross_entropy: dloss must be [tokens] for none, [1] "
        "otherwise");
  }
  const Format ac = arith.accumulate, st = arith.storage;
  const bool same = ac == st;
  const R u = unit_roundoff<R>(ac), eta = smallest_subnormal<R>(ac);
  const R u_t = unit_roundoff<R>(st), eta_t = smallest_subnormal<R>(st);
  const R u_r = unit_roundoff_of<R>();
  const R g_ref = gamma<R>(4 * V + 64, u_r);
  const R slack = 1 + 16 * u;
  const R eps = opt.label_smoothing;
  const R q = eps / R(V);
  const R gV = V >= 1 ? gamma<R>(V - 1, u) : R(0);
  auto to_t = [&](const R& x, const R& e) {
    return same ? e : R(e + u_t * (abs(x) + e) + eta_t / 2);
  };
  auto is_ignored = [&](std::int64_t y) { return opt.ignore_index && y == *opt.ignore_index; };

  const bool by_class = !opt.class_weight.empty(), by_token = !opt.token_weight.empty();
  if ((by_class && opt.class_weight.size() != V) ||
      (by_token && opt.token_weight.size() != tokens)) {
    throw std::invalid_argument(
        "reference::cross_entropy: class_weight must be empty or [V], token_weight empty or "
        "[tokens]");
  }
  auto cw = [&](std::size_t v) { return by_class ? opt.class_weight[v] : R(1); };
  auto tw = [&](std::size_t t) { return by_token ? opt.token_weight[t] : R(1); };
  // C = Σ_v c_v (values of T, exact in A; V − 1 additions in A).
  R c_total(0), c_abs(0);
  for (std::size_t v = 0; v < V; ++v) {
    c_total += cw(v);
    c_abs += abs(cw(v));
  }
  const R e_c_total = by_class ? R(gV * c_abs) : R(0);

  CrossEntropyResult<R> res;
  res.token_loss.assign(tokens, R(0));
  res.token_loss_error.assign(tokens, R(0));
  std::vector<R> e_tok(tokens, R(0));
  std::size_t n = 0;
  // D = Σ_t ω_t·c_{y_t} over non-ignored tokens: N without weights (exact); with weights each
  // term fl(ω_t·c_y) (one rounding, η below the normal range) and n − 1 additions in A.
  R dsum(0), dsum_abs(0);
  for (std::size_t t = 0; t < tokens; ++t) {
    if (is_ignored(targets[t])) continue;
    ++n;
    const auto y = static_cast<std::size_t>(targets[t]);
    if (targets[t] < 0 || y >= V) continue;  // reported below
    dsum += tw(t) * cw(y);
    dsum_abs += abs(tw(t) * cw(y));
  }
  const bool weighted = by_class || by_token;
  if (!weighted) dsum = dsum_abs = R(n);
  const R e_dsum = weighted && n >= 1 ? R(gamma<R>(n, u) * dsum_abs + R(n) * eta) : R(0);
  res.count = n;
  res.weight_sum = dsum;
  // The implementation returns 0 (loss and gradient) under mean when its computed D is 0: that
  // happens exactly when every term is 0 (dsum_abs = 0); when the error of D reaches |D| its
  // sign and non-zeroness are not certain and the bound is infinite (never with the suite's
  // non-negative dyadic weights).
  const bool zero_denominator = dsum_abs == 0;
  const bool unbounded_denominator = !zero_denominator && e_dsum >= abs(dsum);
  const R inf = std::numeric_limits<R>::infinity();

  // The upstream scale per token: s_t and its computed error E_s.
  R common(0), common_err(0);
  if (!none) {
    common = dloss[0];
    if (opt.reduction == CeReduction::mean) {
      if (zero_denominator) {
        common = 0;
      } else if (unbounded_denominator) {
        common = common / dsum;
        common_err = inf;
      } else {
        // fl(dloss/D̂): |dloss|·|1/D̂ − 1/D| ≤ |dloss|·E_D/(|D|(|D| − E_D)), then one rounding;
        // plus R's own error of D (n additions in R).
        const R ad = abs(dsum);
        const R e_inv = abs(common) * e_dsum / (ad * (ad - e_dsum));
        common = common / dsum;
        common_err = e_inv + u * (abs(common) + e_inv) + eta +
                     gamma<R>(n + 4, u_r) * abs(common) * (dsum_abs / ad + 1);
      }
    }
  }
  // K = (1 − ε)·c_y + fl(ε/V)·C (class weights): the error of fl(q·C).
  const R e_qc =
      by_class && eps > 0 ? R(q * (e_c_total + 2 * u * (abs(c_total) + e_c_total)) + eta) : R(0);
  res.grad = Tensor<R>({tokens, V});
  res.grad_bound = Tensor<R>({tokens, V});
  for (std::size_t t = 0; t < tokens; ++t) {
    const std::int64_t y = targets[t];
    if (is_ignored(y)) continue;
    if (y < 0 || static_cast<std::uint64_t>(y) >= V) {
      throw std::invalid_argument("reference::cross_entropy: target " + std::to_string(y) +
                                  " outside [0, V)");
    }
    const R om = tw(t);
    const R cy = cw(static_cast<std::size_t>(y));
    R m = logits(t, 0);
    for (std::size_t v = 1; v < V; ++v) m = logits(t, v) > m ? logits(t, v) : m;
    R s(0), sum_alpha(0), z_sum(0), z_abs(0), zc_sum(0), zc_abs(0);
    std::vector<R> e(V), alpha(V);
    for (std::size_t v = 0; v < V; ++v) {
      const R d = logits(t, v) - m;  // exact in R: both are values of T
      e[v] = exp(d);
      alpha[v] = e[v] * ((exp(u * abs(d))) * (1 + 2 * u) - 1) + eta;
      s += e[v];
      sum_alpha += alpha[v];
      z_sum += logits(t, v);
      z_abs += abs(logits(t, v));
      zc_sum += cw(v) * logits(t, v);
      zc_abs += abs(cw(v) * logits(t, v));
    }
    const R e_s = sum_alpha + gV * (s + sum_alpha);
    const R rho = e_s / s;
    const R lam = -log(1 - rho);
    const R log_s = log(s);
    const R e_l = lam + 2 * u * (log_s + lam) + eta;
    const R lse = log_s + m;
    const R e_lse = e_l + u * (abs(lse) + e_l);
    const R zy = logits(t, static_cast<std::size_t>(y));
    R l(0), e_inner(0), r_mag(0);
    // With class weights: k = fl((1 − ε)·c_y), the gradient's K and its error.
    const R ky = (1 - eps) * cy;
    const R e_ky = u * abs(ky) + eta;
    const R kk = ky + (eps > 0 ? R(q * c_total) : R(0));
    const R e_kk = eps > 0 ? R(e_ky + e_qc + u * (abs(kk) + e_ky + e_qc)) : e_ky;
    if (!by_class) {
      const R a = (1 - eps) * zy;
      const R e_a = u * abs(a) + eta;
      const R e_z = gV * z_abs;
      const R b = q * z_sum;
      const R e_b = eps > 0 ? R(q * (e_z + 2 * u * (abs(z_sum) + e_z)) + eta) : R(0);
      const R w = a + b;
      const R e_w = e_a + e_b + u * (abs(w) + e_a + e_b);
      l = lse - w;
      e_inner = e_lse + e_w + u * (abs(l) + e_lse + e_w);
      r_mag = abs(m) + abs(log_s) + abs(a) + abs(b) + z_abs + 1;
    } else {
      // a = fl(lse − z_y); nll = fl(k·a); Z = Σ fl(c_v·z_v) (V products, V − 1 additions);
      // fl(C·lse); b = fl(C·lse − Z); fl(fl(ε/V)·b); l = fl(nll + that).
      const R a = lse - zy;
      const R e_a = e_lse + u * (abs(a) + e_lse);
      const R nll = ky * a;
      R e_nll = abs(ky) * e_a + abs(a) * e_ky + e_a * e_ky;
      e_nll += u * (abs(nll) + e_nll) + eta;
      l = nll;
      e_inner = e_nll;
      if (eps > 0) {
        const R e_zc = gamma<R>(V, u) * zc_abs + R(V) * eta;
        const R cl = c_total * lse;
        R e_cl = abs(c_total) * e_lse + abs(lse) * e_c_total + e_c_total * e_lse;
        e_cl += u * (abs(cl) + e_cl) + eta;
        const R b = cl - zc_sum;
        const R e_b = e_cl + e_zc + u * (abs(b) + e_cl + e_zc);
        const R sm = q * b;
        const R e_sm = q * (e_b + 2 * u * (abs(b) + e_b)) + eta;
        l = nll + sm;
        e_inner = e_nll + e_sm + u * (abs(l) + e_nll + e_sm);
      }
      r_mag = (abs(ky) + q * c_abs + 1) * (abs(m) + abs(log_s) + 1) + abs(ky) * abs(zy) +
              q * zc_abs + 1;
    }
    // Token weight: fl(ω_t·l).
    const R loss = om * l;
    const R e_loss =
        (by_token ? R(abs(om) * e_inner + u * (abs(loss) + abs(om) * e_inner) + eta) : e_inner) *
        slack;
    res.token_loss[t] = loss;
    res.token_loss_error[t] = g_ref * (abs(om) + 1) * r_mag;
    e_tok[t] = e_loss + res.token_loss_error[t];

    const R base = none ? R(dloss[t]) : common;
    const R e_base = none ? R(0) : common_err;
    const R st_scale = base * om;
    const R e_scale =
        by_token ? R(abs(om) * e_base + u * (abs(st_scale) + abs(om) * e_base) + eta) : e_base;
    for (std::size_t v = 0; v < V; ++v) {
      const R p = e[v] / s;
      const bool tgt = static_cast<std::int64_t>(v) == y;
      const R pe = (alpha[v] + p * e_s) / (s - e_s);
      const R e_p = pe + u * (p + pe) + eta;
      R c(0), e_c(0), kp(p), e_kp(e_p);
      if (!by_class) {
        c = tgt ? R(1 - eps + q) : q;
        e_c = 2 * u * abs(c) + 2 * eta;
      } else {
        // K·p (one rounding); c = fl(fl(ε/V)·c_v) [+ k at the target, one rounding].
        kp = kk * p;
        e_kp = abs(kk) * e_p + p * e_kk + e_kk * e_p;
        e_kp += u * (abs(kp) + e_kp) + eta;
        const R cv = q * cw(v);
        const R e_cv = 2 * u * abs(cv) + eta;
        c = tgt ? R(cv + ky) : cv;
        e_c = tgt ? R(e_cv + e_ky + u * (abs(c) + e_cv + e_ky)) : e_cv;
      }
      const R e_d_raw = e_kp + e_c;
      const R d = kp - c;
      const R e_d = e_d_raw + u * (abs(d) + e_d_raw);
      const R gv = d * st_scale;
      const R e_prod = abs(st_scale) * e_d + abs(d) * e_scale + e_d * e_scale;
      const R e_g = (e_prod + u * (abs(gv) + e_prod) + eta) * slack +
                    g_ref * (abs(kp) + abs(c) + 1) * (abs(st_scale) + 1);
      const bool mean = opt.reduction == CeReduction::mean;
      res.grad(t, v) = mean && zero_denominator ? R(0) : gv;
      res.grad_bound(t, v) = mean && zero_denominator        ? R(0)
                             : mean && unbounded_denominator ? inf
                                                             : to_t(gv, e_g);
    }
  }
  if (none) {
    res.loss = Tensor<R>({tokens});
    res.loss_bound = Tensor<R>({tokens});
    for (std::size_t t = 0; t < tokens; ++t) {
      res.loss[t] = res.token_loss[t];
      res.loss_bound[t] = is_ignored(targets[t]) ? R(0) : to_t(res.token_loss[t], e_tok[t]);
    }
    return res;
  }
  R total(0), e_sum(0), mag(0);
  for (std::size_t t = 0; t < tokens; ++t) {
    total += res.token_loss[t];
    e_sum += e_tok[t];
    mag += abs(res.token_loss[t]) + e_tok[t];
  }
  R e = e_sum + (n >= 2 ? R(gamma<R>(n - 1, u) * mag) : R(0));
  if (opt.reduction == CeReduction::mean) {
    if (zero_denominator) {
      total = 0;
      e = 0;
    } else if (unbounded_denominator) {
      total = total / dsum;
      e = inf;
    } else {
      // fl(T̂/D̂): |T̂/D̂ − T/D| ≤ E_T/(|D| − E_D) + |T|·E_D/(|D|(|D| − E_D)); one rounding.
      // Without weights E_D = 0 and D = N: E_T/N.
      const R ad = abs(dsum);
      const R e_q = e / (ad - e_dsum) + abs(total) * e_dsum / (ad * (ad - e_dsum));
      total = total / dsum;
      e = (e_q + u * (abs(total) + e_q) + eta) * slack;
    }
  }
  res.loss = Tensor<R>({1});
  res.loss_bound = Tensor<R>({1});
  res.loss[0] = total;
  res.loss_bound[0] =
      (opt.reduction == CeReduction::mean && zero_denominator) ? R(0) : to_t(total, e);
  return res;
}

}  // namespace shardcheck::reference
