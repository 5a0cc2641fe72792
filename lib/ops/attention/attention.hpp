// Scaled dot-product attention with grouped-query heads: the dense op, and the block kernel
// every partitioned form (head-parallel, context-parallel) runs on its local piece.
//
// Layout (FlashAttention's BSHD): q [batch, Lq, h, d], k and v [batch, Lk, g, d], out
// [batch, Lq, h, d], lse [batch, h, Lq]. h query heads, g key/value heads, g divides h: query
// head i reads kv head i / (h/g) (MHA g = h, GQA 1 < g < h, MQA g = 1).
// Per batch b, query head i (kv head j = i/(h/g)), query position t, over the VISIBLE keys s
// (visible(cfg.mask, b, t, s)):
//   s_ts  = scale·(q_t · k_s)                   scale = 1/sqrt(d) unless given
//   lse_t = log Σ_s exp(s_ts)                   natural log, includes the max
//   out_t = Σ_s exp(s_ts − lse_t)·v_s
// Empty row (no visible key: fully masked, or every key padded): out_t = 0, lse_t = −inf, and
// every gradient it produces is 0, never NaN. (FlashAttention 2 returns lse = +inf for such a
// row, FlashAttention 3 −inf; we follow 3: −inf is the identity of log-sum-exp, so merging it
// with anything leaves the other partial unchanged; docs/attention.md.)
// Backward (FlashAttention 2, Dao 2023, Algorithm 2), given dout and the FORWARD's out and lse:
//   D_t   = Σ_e dout_te·out_te                   (e over the head dim)
//   P_ts  = exp(s_ts − lse_t)
//   dP_ts = dout_t · v_s
//   dS_ts = P_ts·(dP_ts − D_t)
//   dq_t  = scale·Σ_s dS_ts·k_s,   dk_s = scale·Σ_t dS_ts·q_t,   dv_s = Σ_t P_ts·dout_t
// dk and dv of a kv head sum over the h/g query heads that read it.
//
// Arithmetic, A = acc_t<T> (runtime/dtype.hpp): q, k, v, dout convert to A exactly; per row:
//   dot products in A in index order e = 0..d−1, times scale (A(scale) once);
//   m = max over visible s_ts; p_s = exp(s_ts − m) in A (std::exp of A);
//   l = Σ_s p_s in key order; acc_e = Σ_s p_s·v_se in key order; out_e = acc_e / l;
//   lse = m + log(l).
// The block kernel returns out and lse in A (partials to merge stay in A, as ring-flash-attn
// keeps them in float32); attention_forward rounds out once to T. The backward kernel
// accumulates dq, dk, dv in A; attention_backward rounds them once to T. Per row, in A:
//   D = Σ_e dout_e·out_e in index order (out, dout in T converted exactly);
//   per visible key s in key order: the score as in the forward, P = exp(s − lse) (std::exp of
//   A), dP = Σ_e dout_e·v_se in index order, dS = P·(dP − D) (the difference first);
//   dq_e += dS·k_se; dk_se += dS·q_e; dv_se += P·dout_e (loops b, query head, query, key).
// dq and dk are accumulated unscaled and multiplied by A(scale) once per block (dq per row,
// dk at the end); dv has no scale. A row with lse = −inf contributes nothing (P = 0).
// reference/attention/attention.hpp bounds the error of any implementation of this contract, for
// any partition of the keys (forward merged by ops/softmax_merge/softmax_merge.hpp, dq summed) and
// of the queries (dk, dv summed) into at most `parts` blocks, and any summation order.
//
// Sources: Vaswani et al. 2017; Ainslie et al. 2023 (GQA); Shazeer 2019 (MQA); Dao 2023
// (FlashAttention-2) for lse and the backward; FlashAttention ≥ 2.1 for the bottom-right causal
// alignment; docs/attention.md.
#pragma once

#include "ops/attention/attention_config.hpp"
#include "runtime/dtype.hpp"
#include "tensor/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace shardcheck {

// Whether query position t sees key position s in sequence b (global positions): the rule of
// AttentionMask (attention_config.hpp).
inline bool visible(const AttentionMask& m, std::size_t b, std::size_t t, std::size_t s) {
  if (!m.key_lengths.empty() && s >= m.key_lengths[b]) return false;
  switch (m.kind) {
    case MaskKind::none: return true;
    case MaskKind::causal:
      return m.alignment == CausalAlignment::top_left
                 ? s <= t
                 : s + m.q_len <= t + m.k_len;  // s ≤ t + (Lk − Lq), no underflow
    case MaskKind::explicit_mask: return m.allowed[(b * m.q_len + t) * m.k_len + s] != 0;
  }
  return false;
}

// cfg.scale, or 1.0/std::sqrt(double(cfg.head_dim)) when cfg.scale is 0 (computed in double,
// then converted once to A by the kernels).
double effective_scale(const AttentionConfig& cfg);

// Checks q/k/v shapes against cfg (heads, head dim, batch), the local head counts (q's heads
// = (h/g)·k's heads, at most h and g), the positions (one per row, inside the mask's range),
// the explicit mask's shape [batch, q_len, k_len] and key_lengths (one per sequence, ≤ k_len);
// @throws UsageError naming the shapes and what to pass. Every entry point calls it.
template <class T>
void check_attention_shapes(const AttentionConfig& cfg, const Tensor<T>& q, const Tensor<T>& k,
                            const Tensor<T>& v, std::span<const std::size_t> q_positions,
                            std::span<const std::size_t> k_positions);

// ---- the block kernel: local queries against local keys, global mask by positions ----

template <class T>
struct AttentionPartial {
  Tensor<acc_t<T>> out;  // [batch, Lq_local, h_local, d], 0 on empty rows
  Tensor<acc_t<T>> lse;  // [batch, h_local, Lq_local], −inf on empty rows
};

// Forward of q [batch, Lq_local, h_local, d] against k, v [batch, Lk_local, g_local, d], where
// query row t is at global position q_positions[t] and key row s at k_positions[s]; h_local and
// g_local are the local head counts (h_local / g_local = h / g, the GQA group size, read from
// cfg). Visibility is visible(cfg.mask, b, q_positions[t], k_positions[s]).
template <class T>
AttentionPartial<T> attention_block_forward(const AttentionConfig& cfg, const Tensor<T>& q,
                                            const Tensor<T>& k, const Tensor<T>& v,
                                            std::span<const std::size_t> q_positions,
                                            std::span<const std::size_t> k_positions);

template <class T>
struct AttentionBlockGrads {
  Tensor<acc_t<T>> dq;  // [batch, Lq_local, h_local, d]
  Tensor<acc_t<T>> dk;  // [batch, Lk_local, g_local, d]
  Tensor<acc_t<T>> dv;  // [batch, Lk_local, g_local, d]
};

// Backward of one block given the GLOBAL (merged) out [batch, Lq_local, h_local, d] in T and
// lse [batch, h_local, Lq_local] in A, and dout in T. Summing the blocks' results over any
// partition of the keys gives the full gradient (dq), and over any partition of the queries the
// full dk, dv: this is what the context-parallel ring relies on.
template <class T>
AttentionBlockGrads<T> attention_block_backward(const AttentionConfig& cfg, const Tensor<T>& q,
                                                const Tensor<T>& k, const Tensor<T>& v,
                                                const Tensor<T>& out, const Tensor<acc_t<T>>& lse,
                                                const Tensor<T>& dout,
                                                std::span<const std::size_t> q_positions,
                                                std::span<const std::size_t> k_positions);

// ---- the dense op: positions 0..L−1, every head (q has cfg.q_heads heads, k and v
// ---- cfg.kv_heads); cfg.mask's q_len/k_len are Lq/Lk (or 0 with kind none, no padding) ----

template <class T>
struct AttentionOutput {
  Tensor<T> out;         // [batch, Lq, h, d], rounded once from A
  Tensor<acc_t<T>> lse;  // [batch, h, Lq]
};

template <class T>
AttentionOutput<T> attention_forward(const AttentionConfig& cfg, const Tensor<T>& q,
                                     const Tensor<T>& k, const Tensor<T>& v);

template <class T>
struct AttentionGrads {
  Tensor<T> dq, dk, dv;  // shapes of q, k, v; rounded once from A
};

template <class T>
AttentionGrads<T> attention_backward(const AttentionConfig& cfg, const Tensor<T>& q,
                                     const Tensor<T>& k, const Tensor<T>& v,
                                     const AttentionOutput<T>& fwd, const Tensor<T>& dout);

// 0, 1, ..., n−1: the positions of an unpartitioned sequence.
std::vector<std::size_t> iota_positions(std::size_t n);

}  // namespace shardcheck
