// An a-priori elementwise error bound for an implementation that follows
// lib/ops/attention/attention.hpp's arithmetic contract, computed on ANY partition of the keys
// into at most `parts` blocks merged with the softmax merge
// (lib/ops/softmax_merge/softmax_merge.hpp) and any partition of the queries for dk/dv, in any
// summation order; evaluated at the values of the definition (attention_products.hpp). Each step
// (1)–(6) below is a function of detail::AttentionModel named after it, evaluated by loops over
// the keys and the head dim (the plain path); step (7) evaluates the same formulas with their
// sums as contractions (attention_bound_products.hpp, the fast path); docs/attention.md has the
// same in prose.
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
//     so (1)–(4) with u_R (exp/log of R within 2u_R, no input errors) bound its own error, or
//     with 16·u_R when its products are fast contractions (attention_products.hpp: up to n + 15
//     roundings per sum, and gamma_n(16u) ≥ gamma_(n+15)(u)); every term above is a
//     nonnegative, nondecreasing, convex function of u vanishing at u = 0, plus terms
//     independent of u, so R's error is ≤ (16·u_R/u)·bound ≤ 2^-56·bound. The magnitudes the
//     bound is evaluated from (P, |out|, |dP − D|, ...) are R values within a relative 2^-100 of
//     the exact ones or, for differences, within 2^-100 of the magnitudes already in the error
//     terms next to them. The final bound is raised by the factor 1 + 2^-40, which covers these
//     and the evaluation of the formulas in R.
// (7) Evaluation on the fast path (attention_bound_products.hpp; the loops below are the plain
//     path, the 113-bit cross-check, taken for ContractionPath::plain and for inputs or input
//     errors that are not all finite). Every length-d, length-Lk and length-N sum of (1)–(4)
//     is a sum Σ_c a_c·b_c of NONNEGATIVE terms (magnitudes |x|⁺, error bounds, and weights
//     made of them: Σ_e |q_e|⁺|k_se|⁺, Σ_s W_s·|v_s|⁺ with W_s = (ρ_s + (1 + ρ_s)g_out)·P_s, ...;
//     the input-error sums as Σ(|q|·ek + eq·|k|⁺), never as a difference), evaluated for a whole
//     head as one contraction of matrices (magnitude_sum, contraction/magnitude_sum.hpp) whose
//     operands are rounded UP to doubles (≥ the R values, at most 2^-52 relative above) and
//     whose value is then raised by 1 + 2·γ_K(u_R) (K the contracted length): a contraction is
//     within γ_{K−1}(u_R)·Σ|a·b| of the exact sum on either path (contract.hpp,
//     fast_contraction.hpp), and Σ|a·b| = Σ a·b for nonnegative operands, so each raised sum
//     is ≥ the exact one (exact ≤ value/(1 − γ_K) ≤ value·(1 + 2γ_K)). Every formula of
//     (1)–(5) is nondecreasing in these sums, so the fast bound is ≥ the exact formula's value
//     at the same R magnitudes, and at most (1 + 2^-52)²(1 + 3γ_K(u_R)) above it. A row's or a
//     key's γ factor (γ_{n+p}, γ_{N_s+p}) scales its whole sum, so it is folded into the sum's
//     weights; the (n + 2)η-type terms are added per element. Masked keys get exactly zero
//     weights (0·x = 0 exactly in the contractions: every operand is finite for finite inputs,
//     so 0·inf cannot occur), which is the loops' skipping them; an unbounded row (Δ ≥ 1) gets
//     zero weights and +inf results as in the loops. The values the formulas are evaluated at
//     (S = Q·Kᵀ, dP = dout·Vᵀ) come from the same contractions as the reference's values
//     (attention_products.hpp): within 2^-100 of the loops' as in (6). max|v_s|⁺ is taken in
//     doubles rounded up. So the fast and plain bounds differ by a relative 2^-50 or less, the
//     fast one never below the exact formula; the raise of (6) covers both.
// Overflow is excluded (scores, sums and products stay far below A's and T's overflow
// thresholds for the value ranges the suites draw); NaN/inf inputs are not bounded.
//
// ================================================================ the exp2 contract
// FlashAttention-2/3 and Triton kernels form the weights in base 2 (SoftmaxExp::base2): with
// c = fl(σ̂·log2 e) precomputed (scale_log2), the raw dot r̂_s = fl(q·k_s) (unscaled), the block's
// raw max m_j = max r̂_s and m₂ = fl(m_j·c), each weight is p̂_s = fl(exp2(fl(r̂_s·c − m₂))) with
// the argument formed by ONE fma (one rounding), the lse kept in base 2, lse₂ = fl(m₂ +
// fl(log2 l̂_j)), and converted once, lse_j = fl(lse₂·fl(ln 2)); the backward recomputes
// P̂_s = fl(exp2(fl(r̂_s·c − fl(lse·fl(log2 e))))). The merge of blocks (p ≥ 2), the output and the
// rest of the backward are steps (2)–(5) as above. exp2 and log2 of A are assumed within 4u
// relative (2 ulp: the CUDA C++ Programming Guide's maximum for exp2f; glibc's are within 1 ulp)
// and exp2 within μ = 2^emin (the smallest normal: results flushed to zero) below the normal range.
// The scale must be positive (the kernels take the raw max as the scaled one's). In natural units
// (ln 2·log2 = log):
//   (1') δc = log2(e)·(δσ + 2u·σ⁺)·(1 + u) ≥ |c − σ·log2 e| (σ̂'s rounding, then log2 e's and
//        the product's, u each), and t_s = ln2·r̂_s·c, the score the kernel exponentiates:
//          |t_s − s_s| ≤ ε_s = (|σ| + ln2·δc)·E_w + ln2·δc·|q·k_s|
//        (ln2·r̂c − σr = ln2·c·(r̂ − r) + r·(ln2·c − σ)). The second term grows with |s·scale|,
//        not with the distance to the max: a rounded scale_log2 is a softmax at a slightly
//        different temperature, whose weights move by ln2·δc·|r_s − r_k|, and whose lse moves by
//        ln2·δc·|r| itself. (The default's ε_s carries δσ·|q·k| + u·σ⁺·|q·k| for the same reason.)
//   (2') T = max|s| + ε_max ≥ |t_s|, |ln2·m₂ − t_max,j| ≤ u·T, so the argument's exact value
//        z_s = r̂_s·c − m₂ has ln2·|z_s| ≤ X_k + u·T (X_k as in (2), with these ε), and its
//        rounding is relative to z_s (the fma), not to r̂_s·c: ln2·u·|z_s|. With c4 =
//        −log(1 − 4u) ≤ 4u(1 + 4u) for exp2's error, per key
//          a_k = ε_k + u·(X_k + u·T) + c4
//        and, as in (2), ln2·m₂ + log l̂_j = log Σ exp(s_k)·D'_k with D' ∈ [1 − d, 1 + d]: the
//        common −ln2·m₂ of a block cancels exactly against the ln2·m₂ of its lse. p̂ ≤ exp(2uT)·(1 +
//        4u) (z ≤ u·T), so Lm = log n + γ_n + 2u·T + c4 ≥ log l̂_j, and the conversion's
//        operands are at most LSE = (T(1 + u) + Lm(1 + 4u))(1 + u) in natural units:
//          Λ = 4u·Lm (log2) + u·LSE (the sum) + 3u·LSE (ln 2's rounding and the product) ≥ |λ_j|.
//        For p ≥ 2 the merge adds Λ + u·Y_k + 2u(1 + 2u) to a_k as in (2), with Y_k = X_k + Lm +
//        2Λ + 3u·T + c4 ≥ m − lse_j (lse_j ≥ ln2·m₂ + log l̂_j − Λ and log l̂_j ≥ −2u·T − c4 from
//        the max key's own weight). Δ as in (2) with μ for every underflow of a p̂ or w.
//   (3') E_out as in (3) with these a_k (and μ for η). E_lse for p ≥ 2 is (3)'s (the final lse is
//        the merge's, in natural units); for p = 1 it is the kernel's converted lse: with L =
//        |lse*| − log(1 − Δ) + 4u·Lm ≥ |ln2·lse₂|,
//          E_lse = −log(1 − Δ) + 4u·Lm + u·L + 3u(1 + u)·L.
//   (4') The backward's P̂: ℓ₂ = fl(lse·fl(log2 e)) is within 3u·|lse|·log2 e of lse·log2 e, so
//          π_s = exp(ε_s + E_lse + 3u·Q + u·(lse* − s_s + ε_s + E_lse + 3u·Q))·(1 + 4u) − 1,
//        Q = |lse*| + E_lse, and P̂'s underflow is μ; the rest of (4) is unchanged.
// The exp2 bound exceeds the default's by little (both carry the rounded scale times |s|; exp2's
// 4u against exp's 2u, the lse's conversion), so the compare default (docs/attention.md) takes
// the elementwise larger of the two.
//
// ================================================================ the online softmax
// (AttentionBoundOptions::online) FlashAttention's forward within each part: the keys in key
// blocks of any size, a running max m_b (the exact max of the computed scores so far), p̂_s =
// fl(exp(fl(ŝ_s − m_b))) for s in block b, and at every later block b' the running l and acc
// rescaled by r̂ = fl(exp(fl(m_{b'−1} − m_{b'}))) (one product each, rounded); out = fl(acc/l),
// lse = fl(m + fl(log l)). Key s's weight is p̂_s·Π_{b'>b} r̂_{b'} against the exact
// exp(ŝ_s − m_b)·Π exp(m_{b'−1} − m_{b'}) = exp(ŝ_s − m), m the final max: the product of the exact
// factors telescopes. Each rescale adds, in the exponent, its subtraction's rounding u·(m_{b'} −
// m_{b'−1}) and its exp's 2u; the subtractions telescope to u·(m − m_b) ≤ u·X_s. So with R the
// most rescales after a key (n − 1 for blocks of one key, the worst block size):
//   (2o)  a_k += u·X_k + 2u(1 + 2u)·R;  exp2 (r̂ = exp2(fl(fl(m_{b'−1} − m_{b'})·scale_log2))):
//         a_k += 2u(1 + 2u)·X_k + 4u(1 + 4u)·R + 2u·T (two roundings of the argument; the
//         rounded scale_log2 multiplies the same telescoped difference as p̂'s argument, so it
//         adds no term beyond the contract's; but each block's weights are taken against its own
//         m₂ = fl(m_b·scale_log2), whose rounding (ln2·|e_b| ≤ u·T, (2')) cancels only against
//         the final lse's m₂ when b is the last block: ln2·|e_b − e_final| ≤ 2u·T, when R ≥ 1)
//   (2o') each rescale is one more rounding of every term already in l and acc: the sums'
//         γ_{n−1} becomes γ_{n−1+R}, g_out gains R
//   (2o'') l̂'s terms carry the rescales' exp errors too: Lm = log n + γ_{n+R} + 2u(1 + 2u)·R;
//         exp2: Lm = log n + γ_{n+R} + 2u·T + 4u(1 + 4u) + 2u·T + 4u(1 + 4u)·R (the m₂ drift)
//   (3o)  underflow of r̂ and of the rescaled sums: 4·n·R·η more in Δ and in E_out's floor.
// With key blocks of at least B positions (AttentionBoundOptions::key_block; a part's first and
// last may be shorter) a part of at most Lk positions has at most floor(Lk/B) + 2 blocks, so R ≤
// min(n − 1, floor(Lk/B) + 1).
// The backward recomputes P̂ from the final lse (FlashAttention-2's), unchanged.
//   (3o') out = fl(acc·fl(1/l)) (FlashAttention-2, PyTorch's CPU kernel) rounds once more than
//         fl(acc/l): under online g_out gains 1 more.
// What FlashAttention-2's CUDA code does beside the exp2 contract's form, also bounded:
//   (2'u) PyTorch's copy unfuses the argument (UNFUSE_FMA): fl(fl(r̂·c) − m₂), the product's
//         rounding ln2·u·|r̂c| ≤ u·T more: a_k += u(1 + u)·T, Lm too; (4'u) the backward's P̂
//         likewise, u(1 + u)·(|s_s| + ε_s) in π_s's exponent.
//   (3'n) its lse is fl(fl(m·σ̂) + __logf(l̂)) in natural units: against ln2·m₂ + log l̂ it is off
//         by D = m·(σ̂ − ln2·c) + ln2·(m·c − m₂), |D| ≤ T·(δσ + ln2·δc)/(σ − ln2·δc) + u·T, the
//         product's u·T·κ (κ = (σ + δσ)/(σ − ln2·δc)), __logf's 6u·L'm + 8u (2^-21.41 absolute on
//         [0.5, 2], 3 ulp elsewhere; L'm = Lm + 3u·T + c4) and the sum's u·|A + B|. E_lse (p = 1)
//         and Λ (p ≥ 2) take the larger of this and the base-2 form's, or the declared one
//         (AttentionBoundOptions::exp2_lse).
//
// Tightness: realistic bugs (top-left causal alignment, lse without its max, the wrong GQA head,
// dk without the group sum) change the results by O(|v|) or O(1) in the lse, far above the
// bound; properties/suites/attention/attention_unit_tests.cpp prints the measured max |err|/bound
// per dtype.
#pragma once

#include "reference/attention/attention_products.hpp"
#include "reference/bounds.hpp"
#include "reference/precision.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardcheck::reference {

// How the kernel forms the softmax's weights: natural exp of the scaled score's shift (steps
// (1)–(2), lib/ops/attention) or exp2 of an fma'd pre-scaled argument (the exp2 contract above).
enum class SoftmaxExp : unsigned char { natural, base2 };

// The exp2 contract's lse: kept in base 2 and converted (fl(fl(m₂ + log2 l)·fl(ln 2)), Triton's
// form) or taken in natural units (fl(fl(m·σ̂) + logf(l)), FlashAttention-2's CUDA code), or
// either (the larger bound).
enum class Exp2Lse : unsigned char { base2, natural, either };

// Options of the bound.
template <class R = hp>
struct AttentionBoundOptions {
  SoftmaxExp exp = SoftmaxExp::natural;
  Exp2Lse exp2_lse = Exp2Lse::either;  // under SoftmaxExp::base2
  // The most blocks the keys (forward merge, dq) and the queries (dk, dv) are split into.
  std::size_t parts = 1;
  // The forward's sums within each part follow the online softmax (FlashAttention): the keys in
  // key blocks of any size, a running max, the running sums rescaled by exp(m_old − m_new) (exp2
  // of (m_old − m_new)·scale_log2 under the exp2 contract) at every block: "online" below.
  bool online = false;
  // With online: every key block but a part's first and last holds at least this many key
  // positions (masked ones included), as a kernel of fixed block size (FlashAttention-2's
  // kBlockN, Triton's BLOCK_N) does. A row then sees at most floor(Lk/key_block) + 1 rescales
  // (a part's keys are at most Lk positions: at most floor(Lk/key_block) + 2 blocks), and never
  // more than n − 1. 1 (the default): any block size.
  std::size_t key_block = 1;
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

// The error model of the header's steps (1)–(5) for one arithmetic.
template <class R>
struct ErrorModel {
  R u{0}, eta{0};      // A
  R u_t{0}, eta_t{0};  // T
  bool round_t = false;
  R scale_error{0};       // δσ
  bool exp2 = false;      // the exp2 contract
  R scale_log2_error{0};  // δc (exp2)
  R mu{0};                // exp2's absolute error below the normal range (μ of A)
  std::size_t parts = 1;
  Exp2Lse exp2_lse = Exp2Lse::either;  // AttentionBoundOptions::exp2_lse
  bool online = false;                 // AttentionBoundOptions::online
  std::size_t key_block = 1;           // AttentionBoundOptions::key_block
  const Tensor<R>* eq = nullptr;
  const Tensor<R>* ek = nullptr;
  const Tensor<R>* ev = nullptr;
  const Tensor<R>* edo = nullptr;
};

// (1) The score errors of one row: |ŝ_s − s_s| ≤ ε_s per visible key, their max and max |s|.
template <class R>
struct ScoreErrors {
  std::vector<R> eps;
  R eps_max{0}, abs_s_max{0};
};

// (2) The weights' errors of one row: Lm, a_k per visible key and Δ.
template <class R>
struct WeightErrors {
  R lm{0};
  R big_t{0};               // T = max|s| + ε_max (the exp2 contract's natural-unit lse, (3'n))
  std::vector<R> a, exp_a;  // a_k and e^{a_k}
  R delta{0};
};

// (4) One visible key's dS = fl(P̂·fl(dP − D)): P and π (P̂'s relative error), the bound on P̂,
// E_dS, the exact dS and the bound on |dŜ|.
template <class R>
struct ScoreGradientErrors {
  R p{0}, pi{0}, p_hat{0}, e_ds{0}, ds{0}, ds_hat{0};
};

// The header's steps for one arithmetic, row by row: add_rows() runs (1)–(4) on every query row
// and the sums over rows of dk and dv (the plain path), finish() (5) and (6). The protected
// members are the formulas per row and per (row, key), which AttentionProductsModel (step (7))
// evaluates from contractions instead of the loops.
template <class R>
class AttentionModel {
 public:
  AttentionModel(const AttentionConfig& cfg, const Tensor<R>& q, const Tensor<R>& k,
                 const Tensor<R>& v, const Tensor<R>& dout, const ErrorModel<R>& em,
                 ContractionPath path)
      : cfg_(cfg),
        q_(q),
        k_(k),
        v_(v),
        dout_(dout),
        em_(em),
        D_(attention_dims(cfg, q, k, v, &dout)),
        backward_(!dout.empty()),
        u_(em.u),
        eta_(em.eta),
        dsig_(em.scale_error),
        exp2_(em.exp2),
        floor_(em.exp2 ? em.mu : em.eta),
        p_(em.parts == 0 ? 1 : em.parts),
        online_(em.online),
        key_block_(em.key_block == 0 ? 1 : em.key_block),
        gd_(gamma<R>(D_.d, u_)),
        path_(path),
        fwd_(reference::attention_forward<R>(cfg, q, k, v, path)),
        sig_hat_([&] {
          using std::abs;
          return R(abs(R(score_scale(cfg))) + em.scale_error);
        }()),
        sig_([&] {
          using std::abs;
          return R(abs(R(score_scale(cfg))));
        }()),
        ln2_([] {
          using std::log;
          return R(log(R(2)));
        }()) {
    using std::abs;
    B_.out_acc = Tensor<R>(q.shape());
    B_.out = Tensor<R>(q.shape());
    B_.lse = Tensor<R>(Shape{D_.batch, D_.h, D_.lq});
    if (backward_) {
      B_.dq_acc = Tensor<R>(q.shape());
      for (auto* t : {&dk_err_, &dk_mag_, &dv_err_, &dv_mag_}) *t = Tensor<R>(k.shape());
      kv_count_.assign(D_.batch * D_.lk * D_.g, 0);
    }
  }

  // The plain evaluation: (1)–(4) row by row in loops over the keys and the head dim.
  void add_rows() {
    for (std::size_t b = 0; b < D_.batch; ++b) {
      for (std::size_t i = 0; i < D_.h; ++i) {
        for (std::size_t t = 0; t < D_.lq; ++t) add_row(b, i, t);
      }
    }
    if (backward_) gradient_sums();
  }

  AttentionBounds<R> finish(const R& raise) {
    // (5) rounding to T, (6) the raise. The T rounding needs the exact values.
    for (auto& x : B_.out_acc.values()) x *= raise;
    for (auto& x : B_.out.values()) x *= raise;
    for (auto& x : B_.lse.values()) x *= raise;
    if (backward_) {
      AttentionGrads<R> g;
      if (em_.round_t) g = reference::attention_backward<R>(cfg_, q_, k_, v_, fwd_, dout_, path_);
      B_.dq = Tensor<R>(q_.shape());
      B_.dk = Tensor<R>(k_.shape());
      B_.dv = Tensor<R>(k_.shape());
      for (std::size_t x = 0; x < B_.dq.size(); ++x) {
        B_.dq_acc[x] *= raise;
        B_.dq[x] = B_.dq_acc[x] == 0 ? R(0) : to_storage(value_of(g.dq, x), B_.dq_acc[x]);
      }
      for (std::size_t x = 0; x < B_.dk.size(); ++x) {
        B_.dk_acc[x] *= raise;
        B_.dv_acc[x] *= raise;
        B_.dk[x] = B_.dk_acc[x] == 0 ? R(0) : to_storage(value_of(g.dk, x), B_.dk_acc[x]);
        B_.dv[x] = B_.dv_acc[x] == 0 ? R(0) : to_storage(value_of(g.dv, x), B_.dv_acc[x]);
      }
    }
    return std::move(B_);
  }

 protected:
  static R at_or_zero(const Tensor<R>* t, std::size_t i) {
    return t == nullptr || t->empty() ? R(0) : (*t)[i];
  }
  static R gamma0(std::size_t n, const R& u) { return n == 0 ? R(0) : gamma<R>(n, u); }
  // Online softmax: the most rescales a row of n visible keys sees: n − 1 after its first (key
  // blocks of one key, the worst block size), at most floor(Lk/key_block) + 1 with blocks of at
  // least key_block positions; 0 without it.
  std::size_t rescales(std::size_t n) const {
    if (!online_ || n == 0) return 0;
    return std::min(n - 1, D_.lk / key_block_ + 1);
  }
  // A value of the definition's result, 0 when it was not needed (T = A: nothing rounds).
  static R value_of(const Tensor<R>& t, std::size_t x) { return t.empty() ? R(0) : t[x]; }

  // (5) E + u_T(|x| + E) + η_T/2, nothing when T = A.
  R to_storage(const R& x, const R& e) const {
    using std::abs;
    return em_.round_t ? R(e + em_.u_t * (abs(x) + e) + em_.eta_t / 2) : e;
  }

  void add_row(std::size_t b, std::size_t i, std::size_t t) {
    if (!row_softmax(cfg_, D_, q_, k_, b, i, t, row_)) return;  // empty row: exact, bound 0
    const auto se = score_errors(b, i, t);
    const auto we = weight_errors(se);
    if (!(we.delta < 1)) {
      unbounded_row(b, i, t);
      unbounded_keys(b, i);
      return;
    }
    output_errors(we, b, i, t);
    const R e_lse = lse_error(we);
    B_.lse[D_.li(b, i, t)] = e_lse;
    if (backward_) gradient_errors(se, e_lse, b, i, t);
  }

  // (1) The row's ε_s, by loops over the head dim.
  ScoreErrors<R> score_errors(std::size_t b, std::size_t i, std::size_t t) const {
    using std::abs;
    const std::size_t j = i / D_.group, n = row_.keys.size();
    ScoreErrors<R> r;
    r.eps.assign(n, R(0));
    for (std::size_t x = 0; x < n; ++x) {
      const std::size_t s = row_.keys[x];
      R absqk(0), inerr(0);
      for (std::size_t e = 0; e < D_.d; ++e) {
        const std::size_t a = D_.qi(b, t, i, e), c = D_.ki(b, s, j, e);
        const R eqa = at_or_zero(em_.eq, a), ekc = at_or_zero(em_.ek, c);
        absqk += (abs(q_[a]) + eqa) * (abs(k_[c]) + ekc);
        inerr += abs(q_[a]) * ekc + abs(k_[c]) * eqa + eqa * ekc;
      }
      r.eps[x] = score_error(absqk, inerr, abs(row_.qk[x]));
    }
    finish_score_errors(r);
    return r;
  }

  // (1) ε_s = σ⁺·E_w + δσ·|q·k_s| + u·σ⁺·(|q·k_s| + E_w) + η/2, E_w = γ_d·mag + d·η + inerr the
  // dot's error, from mag = Σ_e |q_e|⁺|k_se|⁺ and inerr = Σ_e (|q_e|ek_se + |k_se|eq_e +
  // eq_e·ek_se).
  R score_error(const R& mag, const R& inerr, const R& qk) const {
    const R u = u_, eta = eta_;
    const R ew = gd_ * mag + R(D_.d) * eta + inerr;
    if (exp2_) {  // (1') ε_s = (|σ| + ln2·δc)·E_w + ln2·δc·|q·k_s|
      const R ln2dc = ln2_ * em_.scale_log2_error;
      return (sig_ + ln2dc) * ew + ln2dc * qk;
    }
    return sig_hat_ * ew + dsig_ * qk + u * sig_hat_ * (qk + ew) + eta / 2;
  }

  // (1) max ε_s and max |s| over the row.
  void finish_score_errors(ScoreErrors<R>& r) const {
    using std::abs;
    for (std::size_t x = 0; x < r.eps.size(); ++x) {
      r.eps_max = r.eps[x] > r.eps_max ? r.eps[x] : r.eps_max;
      r.abs_s_max = abs(row_.score[x]) > r.abs_s_max ? R(abs(row_.score[x])) : r.abs_s_max;
    }
  }

  // (2) a_k = ε_k + u·X_k + 2u(1 + 2u) [+ Λ + u·Y_k + 2u(1 + 2u) when p ≥ 2];
  // Δ = Σ_k P_k·d_k + 4(n + p)·η, d_k = e^{a_k}(1 + γ_{n−1})(1 + γ_{p−1}) − 1.
  WeightErrors<R> weight_errors(const ScoreErrors<R>& se) const {
    if (exp2_) return weight_errors_exp2(se);
    using std::log;
    const std::size_t n = row_.keys.size();
    const R u = u_, c2 = 2 * u * (1 + 2 * u);
    WeightErrors<R> r;
    r.lm = log(R(n)) + gamma<R>(n + rescales(n), u) + c2 * R(rescales(n));  // (2o'')
    const R lse_mag = (se.abs_s_max + se.eps_max + r.lm * (1 + 2 * u)) * (1 + u);
    const R lam = 2 * u * r.lm + u * lse_mag;
    weight_terms(se, r, [&](const R& eps, const R& X) {
      R a = eps + u * X + c2;
      if (online_) a += u * X + c2 * R(rescales(n));  // online: the rescales' subtractions, exps
      if (p_ >= 2) a += lam + u * (X + r.lm + lam) + c2;
      return a;
    });
    return r;
  }

  // (2') The exp2 contract: a_k = ε_k + u·(X_k + u·T) + c4 [+ Λ + u·Y_k + 2u(1 + 2u) when
  // p ≥ 2], Lm = log n + γ_n + 2u·T + c4, Λ = 4u·Lm + 4u·LSE, Δ with μ.
  WeightErrors<R> weight_errors_exp2(const ScoreErrors<R>& se) const {
    using std::log;
    const std::size_t n = row_.keys.size();
    const R u = u_, c2 = 2 * u * (1 + 2 * u), c4 = 4 * u * (1 + 4 * u);
    const R big_t = se.abs_s_max + se.eps_max;
    WeightErrors<R> r;
    // online (2o''): the blocks' m₂ roundings that do not cancel, the rescales' exp2 errors
    const R m2_drift = rescales(n) > 0 ? 2 * u * big_t : R(0);
    // (2'u) the argument's product rounded on its own (no fma): u·|t_s| ≤ u·T more
    const R unfused = u * (1 + u) * big_t;
    r.big_t = big_t;
    r.lm = log(R(n)) + gamma<R>(n + rescales(n), u) + 2 * u * big_t + c4 + m2_drift +
           c4 * R(rescales(n)) + unfused;
    const R lse_mag = (big_t * (1 + u) + r.lm * (1 + 4 * u)) * (1 + u);
    const R lam = lse_form_error(R(4 * u * (r.lm + lse_mag)), r.lm, big_t, R(0));
    weight_terms(se, r, [&](const R& eps, const R& X) {
      R a = eps + u * (X + u * big_t) + c4 + unfused;
      if (online_) a += 2 * u * (1 + 2 * u) * X + c4 * R(rescales(n)) + m2_drift;  // (2o)
      if (p_ >= 2) a += lam + u * (X + r.lm + 2 * lam + 3 * u * big_t + c4) + c2;
      return a;
    });
    return r;
  }

  // The sum both contracts share: with each key's a_k = a_of(ε_k, X_k), X_k = m + ε_max − s_k +
  // ε_k, it sets r.a, r.exp_a = e^{a_k} and Δ = Σ_k P_k·d_k + 4(n + p)·η (μ under exp2),
  // d_k = e^{a_k}(1 + γ_{n−1})(1 + γ_{p−1}) − 1.
  template <class A>
  void weight_terms(const ScoreErrors<R>& se, WeightErrors<R>& r, A a_of) const {
    using std::exp;
    const std::size_t n = row_.keys.size();
    r.a.resize(n);
    r.exp_a.resize(n);
    r.delta = 4 * R(n + p_ + n * rescales(n)) * floor_;
    const R gsum = (1 + gamma0(n - 1 + rescales(n), u_)) * (1 + gamma0(p_ - 1, u_));
    for (std::size_t x = 0; x < n; ++x) {
      const R X = row_.max + se.eps_max - row_.score[x] + se.eps[x];
      r.a[x] = a_of(se.eps[x], X);
      r.exp_a[x] = exp(r.a[x]);
      r.delta += row_.p[x] * (r.exp_a[x] * gsum - 1);
    }
  }

  // Δ ≥ 1: the weights are not bounded; neither is anything of the row (out, lse, dq here).
  void unbounded_row(std::size_t b, std::size_t i, std::size_t t) {
    const R inf = std::numeric_limits<R>::infinity();
    B_.lse[D_.li(b, i, t)] = inf;
    for (std::size_t e = 0; e < D_.d; ++e) {
      B_.out_acc[D_.qi(b, t, i, e)] = inf;
      B_.out[D_.qi(b, t, i, e)] = inf;
      if (backward_) B_.dq_acc[D_.qi(b, t, i, e)] = inf;
    }
  }

  // The plain evaluation's part of an unbounded row: nor are dk and dv of the keys it sees.
  void unbounded_keys(std::size_t b, std::size_t i) {
    if (!backward_) return;
    const R inf = std::numeric_limits<R>::infinity();
    const std::size_t j = i / D_.group;
    for (std::size_t s : row_.keys) {
      for (std::size_t e = 0; e < D_.d; ++e) {
        dk_err_[D_.ki(b, s, j, e)] = inf;
        dv_err_[D_.ki(b, s, j, e)] = inf;
      }
      ++kv_count_[(b * D_.lk + s) * D_.g + j];
    }
  }

  // (3) E_out = Σ_s [(ρ_s + (1 + ρ_s)·g_out)·P_s·|v_s|⁺ + P_s·ev_s] + 4(n + p + 2)·η·(1 +
  // 2·max|v_s|⁺), ρ_s = e^{a_s}/(1 − Δ) − 1; in A (out_acc) and rounded to T (out).
  void output_errors(const WeightErrors<R>& we, std::size_t b, std::size_t i, std::size_t t) {
    using std::abs;
    const std::size_t j = i / D_.group, n = row_.keys.size();
    const auto w = output_weights(we);
    for (std::size_t e = 0; e < D_.d; ++e) {
      R err(0), vmax(0);
      for (std::size_t x = 0; x < n; ++x) {
        const std::size_t c = D_.ki(b, row_.keys[x], j, e);
        const R evc = at_or_zero(em_.ev, c);
        const R vm = abs(v_[c]) + evc;
        err += w[x] * vm + row_.p[x] * evc;
        vmax = vm > vmax ? vm : vmax;
      }
      set_output(D_.qi(b, t, i, e), err + output_floor(n, vmax));
    }
  }

  // (3) The weight of |v_s|⁺ in E_out per visible key: (ρ_s + (1 + ρ_s)·g_out)·P_s,
  // g_out = γ_{n+p+2} (γ_{n+1} when p = 1).
  std::vector<R> output_weights(const WeightErrors<R>& we) const {
    const std::size_t n = row_.keys.size();
    // online (3o'): out = fl(acc·fl(1/l)) (FlashAttention-2, PyTorch's CPU kernel) rounds once more
    const std::size_t k = rescales(n) + (online_ ? 1 : 0);
    const R g_out = p_ == 1 ? gamma<R>(n + 1 + k, u_) : gamma<R>(n + p_ + 2 + k, u_);
    std::vector<R> w(n);
    for (std::size_t x = 0; x < n; ++x) {
      const R rho = we.exp_a[x] / (1 - we.delta) - 1;
      w[x] = (rho + (1 + rho) * g_out) * row_.p[x];
    }
    return w;
  }

  // (3) The underflow term of E_out, 4(n + p + 2)·η·(1 + 2·max|v_s|⁺).
  R output_floor(std::size_t n, const R& vmax) const {
    return 4 * R(n + p_ + 2 + n * rescales(n)) * floor_ * (1 + 2 * vmax);
  }

  // E_out of element oi, in A and rounded to T.
  void set_output(std::size_t oi, const R& err) {
    B_.out_acc[oi] = err;
    B_.out[oi] = to_storage(fwd_.out[oi], err);
  }

  // (3'n) The exp2 contract's lse in natural units, FlashAttention-2's fl(fl(m·σ̂) + fl(log l̂)),
  // against ln2·m₂ + log l̂ (the form Λ and E_lse compare with): D = |m|·(δσ + ln2·δc) + u·T with
  // |m| ≤ T/(σ − ln2·δc) (the weights' scale_log2 against the lse's σ̂, and m₂'s rounding), the
  // product's u·T·κ (κ = (σ + δσ)/(σ − ln2·δc) ≥ |σ̂/(ln2·c)|), the log's 6u·L'm + 8u (CUDA's
  // __logf: 2^-21.41 absolute on [0.5, 2], 3 ulp elsewhere; L'm = Lm + 3u·T + c4 ≥ |log l̂|) and
  // the sum's u·|A + B|, |A + B| ≤ `mag` + D + T·κ(1 + u) + the log's. `mag`: what |lse| adds
  // (0 for a part's Λ, whose LSE the T·κ term carries).
  R natural_lse_error(const R& lm, const R& big_t, const R& mag) const {
    const R u = u_, c4 = 4 * u * (1 + 4 * u);
    const R den = sig_ - ln2_ * em_.scale_log2_error;
    if (!(den > 0)) return std::numeric_limits<R>::infinity();  // a scale below its own error
    const R kappa = sig_hat_ / den;
    const R d = big_t * (dsig_ + ln2_ * em_.scale_log2_error) / den + u * big_t;
    const R lmp = lm + 3 * u * big_t + c4;
    const R log_err = 6 * u * lmp + 8 * u;
    const R operands = mag + d + big_t * kappa * (1 + u) + lmp * (1 + 6 * u) + 8 * u;
    return d + u * big_t * kappa + log_err + u * (1 + u) * operands;
  }

  // The declared lse form's error (ErrorModel::exp2_lse): `base2` as computed, (3'n) plus `lnd`,
  // or the larger.
  R lse_form_error(const R& base2, const R& lm, const R& big_t, const R& mag,
                   const R& lnd = R(0)) const {
    if (em_.exp2_lse == Exp2Lse::base2) return base2;
    R natural = lnd + natural_lse_error(lm, big_t, mag);
    if (em_.exp2_lse == Exp2Lse::natural) return natural;
    return std::max(base2, natural);
  }

  // (3) E_lse = −log(1 − Δ) + 2u·Lm + u·(|lse*| − log(1 − Δ) + 2u·Lm).
  R lse_error(const WeightErrors<R>& we) const {
    using std::abs;
    using std::log;
    const R lnd = -log(1 - we.delta);
    if (exp2_ && p_ == 1) {  // (3') the kernel's lse, converted from base 2, or (3'n) natural
      const R l = abs(row_.lse) + lnd + 4 * u_ * we.lm;
      const R base2 = lnd + 4 * u_ * we.lm + u_ * l + 3 * u_ * (1 + u_) * l;
      return lse_form_error(base2, we.lm, we.big_t, abs(row_.lse) + lnd, lnd);
    }
    return lnd + 2 * u_ * we.lm + u_ * (abs(row_.lse) + lnd + 2 * u_ * we.lm);
  }

  // (4) The row's gradient errors: E_D, then per visible key dS and its terms of dq, dk, dv.
  void gradient_errors(const ScoreErrors<R>& se, const R& e_lse, std::size_t b, std::size_t i,
                       std::size_t t) {
    const std::size_t n = row_.keys.size();
    const R dval = output_dot(b, i, t);
    const R e_d = output_dot_error(b, i, t);
    std::vector<R> dq_err(D_.d, R(0)), dq_mag(D_.d, R(0));
    for (std::size_t x = 0; x < n; ++x) {
      const auto g = score_gradient_errors(se, e_lse, e_d, dval, x, b, i, t);
      add_gradient_errors(g, x, b, i, t, dq_err, dq_mag);
    }
    const R g_dq = gamma<R>(n + p_, u_);
    for (std::size_t e = 0; e < D_.d; ++e) {
      B_.dq_acc[D_.qi(b, t, i, e)] = dq_err[e] + g_dq * dq_mag[e] + R(n + 2) * eta_;
    }
  }

  // D = dout·out, at the definition's out.
  R output_dot(std::size_t b, std::size_t i, std::size_t t) const {
    R dval(0);
    for (std::size_t e = 0; e < D_.d; ++e) {
      const std::size_t oi = D_.qi(b, t, i, e);
      dval += dout_[oi] * fwd_.out[oi];
    }
    return dval;
  }

  // (4) E_D, with the forward's out in T (its bound E_oT: out's step (3) bound rounded to T).
  R output_dot_error(std::size_t b, std::size_t i, std::size_t t) const {
    using std::abs;
    R mag(0), in(0);
    for (std::size_t e = 0; e < D_.d; ++e) {
      const std::size_t oi = D_.qi(b, t, i, e);
      const R ed = at_or_zero(em_.edo, oi), o = fwd_.out[oi], e_ot = B_.out[oi];
      mag += (abs(dout_[oi]) + ed) * (abs(o) + e_ot);
      in += abs(dout_[oi]) * e_ot + abs(o) * ed + ed * e_ot;
    }
    return gd_ * mag + in + R(D_.d) * eta_;
  }

  // (4) E_dP of visible key x by a loop over the head dim, then its score_gradient.
  ScoreGradientErrors<R> score_gradient_errors(const ScoreErrors<R>& se, const R& e_lse,
                                               const R& e_d, const R& dval, std::size_t x,
                                               std::size_t b, std::size_t i, std::size_t t) const {
    using std::abs;
    const std::size_t j = i / D_.group, s = row_.keys[x];
    R dp(0), mag(0), in(0);
    for (std::size_t e = 0; e < D_.d; ++e) {
      const std::size_t oi = D_.qi(b, t, i, e), c = D_.ki(b, s, j, e);
      const R ed = at_or_zero(em_.edo, oi), evc = at_or_zero(em_.ev, c);
      dp += dout_[oi] * v_[c];
      mag += (abs(dout_[oi]) + ed) * (abs(v_[c]) + evc);
      in += abs(dout_[oi]) * evc + abs(v_[c]) * ed + ed * evc;
    }
    return score_gradient(se.eps[x], e_lse, e_d, dval, x, dp, mag, in);
  }

  // (4) π, E_diff and E_dS of visible key x, from dP = dout·v_s, mag = Σ_e |dout_e|⁺|v_se|⁺ and
  // in = Σ_e (|dout|·ev + |v|·edo + edo·ev): E_dP = γ_d·mag + in + d·η.
  ScoreGradientErrors<R> score_gradient(const R& eps, const R& e_lse, const R& e_d, const R& dval,
                                        std::size_t x, const R& dp, const R& mag,
                                        const R& in) const {
    using std::abs;
    using std::exp;
    const R u = u_, eta = eta_;
    const R e_dp = gd_ * mag + in + R(D_.d) * eta;
    ScoreGradientErrors<R> g;
    g.p = row_.p[x];
    if (exp2_) {  // (4') P̂ = fl(exp2(fl(r̂·c − fl(lse·fl(log2 e)))))
      const R conv = 3 * u * (abs(row_.lse) + e_lse);
      const R unfused = u * (1 + u) * (abs(row_.score[x]) + eps);  // (4'u) no fma
      g.pi = exp(eps + e_lse + conv + unfused +
                 u * (row_.lse - row_.score[x] + eps + e_lse + conv + unfused)) *
                 (1 + 4 * u) -
             1;
    } else {
      g.pi = exp(eps + e_lse + u * (row_.lse - row_.score[x] + eps + e_lse)) * (1 + 2 * u) - 1;
    }
    const R diff = dp - dval;
    const R e_diff = e_dp + e_d + u * (abs(diff) + e_dp + e_d);
    g.p_hat = g.p * (1 + g.pi) + floor_;
    const R m_ds = g.p_hat * (abs(diff) + e_diff);
    g.e_ds = (g.pi * g.p + floor_) * abs(diff) + g.p_hat * e_diff + u * m_ds + eta / 2;
    g.ds = g.p * diff;
    g.ds_hat = m_ds * (1 + u) + eta / 2;
    return g;
  }

  // (4) Key x's terms of E_dq (this row's), E_dk and E_dv (summed over rows), and of the
  // magnitudes their γ factors multiply.
  void add_gradient_errors(const ScoreGradientErrors<R>& g, std::size_t x, std::size_t b,
                           std::size_t i, std::size_t t, std::vector<R>& dq_err,
                           std::vector<R>& dq_mag) {
    using std::abs;
    const std::size_t j = i / D_.group, s = row_.keys[x];
    for (std::size_t e = 0; e < D_.d; ++e) {
      const std::size_t oi = D_.qi(b, t, i, e), c = D_.ki(b, s, j, e);
      const R ekc = at_or_zero(em_.ek, c), eqa = at_or_zero(em_.eq, oi);
      const R edo = at_or_zero(em_.edo, oi);
      dq_err[e] += sig_hat_ * (g.e_ds * (abs(k_[c]) + ekc) + abs(g.ds) * ekc) +
                   dsig_ * abs(g.ds) * abs(k_[c]);
      dq_mag[e] += sig_hat_ * g.ds_hat * (abs(k_[c]) + ekc);
      dk_err_[c] += sig_hat_ * (g.e_ds * (abs(q_[oi]) + eqa) + abs(g.ds) * eqa) +
                    dsig_ * abs(g.ds) * abs(q_[oi]);
      dk_mag_[c] += sig_hat_ * g.ds_hat * (abs(q_[oi]) + eqa);
      dv_err_[c] += (g.pi * g.p + floor_) * (abs(dout_[oi]) + edo) + g.p * edo;
      dv_mag_[c] += g.p_hat * (abs(dout_[oi]) + edo);
    }
    ++kv_count_[(b * D_.lk + s) * D_.g + j];
  }

  // (4) dk and dv over the N (head, query) pairs that see each key: γ_{N+p}, γ_{N+p−1}.
  void gradient_sums() {
    B_.dk_acc = Tensor<R>(k_.shape());
    B_.dv_acc = Tensor<R>(k_.shape());
    for (std::size_t b = 0; b < D_.batch; ++b) {
      for (std::size_t s = 0; s < D_.lk; ++s) {
        for (std::size_t j = 0; j < D_.g; ++j) {
          const std::size_t cnt = kv_count_[(b * D_.lk + s) * D_.g + j];
          if (cnt == 0) continue;
          for (std::size_t e = 0; e < D_.d; ++e) {
            const std::size_t c = D_.ki(b, s, j, e);
            B_.dk_acc[c] = dk_err_[c] + gamma<R>(cnt + p_, u_) * dk_mag_[c] + R(cnt + 2) * eta_;
            B_.dv_acc[c] = dv_err_[c] + gamma<R>(cnt + p_ - 1, u_) * dv_mag_[c] + R(cnt + 1) * eta_;
          }
        }
      }
    }
  }

  const AttentionConfig& cfg_;
  const Tensor<R>& q_;
  const Tensor<R>& k_;
  const Tensor<R>& v_;
  const Tensor<R>& dout_;
  const ErrorModel<R>& em_;
  const AttentionDims D_;
  const bool backward_;
  const R u_, eta_;
  const R dsig_;         // δσ
  const bool exp2_;      // the exp2 contract
  const R floor_;        // an exp's (or exp2's) absolute error below the normal range: η (μ)
  const std::size_t p_;  // parts
  const bool online_;    // the online softmax: rescales(n) of them per row (see rescales)
  const std::size_t key_block_;  // the online softmax's smallest key block (1: any)
  const R gd_;                   // γ_d
  const ContractionPath path_;   // the reference's values' path (and the evaluation's, step (7))
  const AttentionOutput<R> fwd_;
  const R sig_hat_;  // σ⁺ = |σ| + δσ
  const R sig_;      // |σ|
  const R ln2_;      // ln 2
  AttentionBounds<R> B_;
  Tensor<R> dk_err_, dk_mag_, dv_err_, dv_mag_;  // dk, dv: sums over the rows that see a key
  std::vector<std::size_t> kv_count_;
  RowSoftmax<R> row_;  // the current row
};

}  // namespace detail
}  // namespace shardcheck::reference
