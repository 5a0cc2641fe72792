// What the attention suite expects of a case: the exact value of every output in high
// precision with its elementwise a-priori bound (reference/attention/attention.hpp for the
// attention core; the projections' dot products and the cross-rank sums composed around it here).
//
// Sequence-sharded results (out, lse, dq, dk, dv of the core; y, dx of the layer) are given in
// "cp order": the positions of cp rank 0, then of cp rank 1, ... (cp_positions), so that the
// ranks' pieces are a Shard of the sequence dimension with explicit sizes, whatever the layout
// (zigzag included). Without CP the order is the sequence's.
//
// Core: reference::attention_forward / attention_backward on the global q, k, v, dout, bounds
// from reference::attention_bounds with parts = cp (the ring merges at most cp partials per row
// and sums dq over at most cp key blocks and dk, dv over at most cp query blocks; the all-gather
// variant sums dk, dv over cp ranks), plus the reference's own error
// (reference::attention_reference_error).
//
// Layer, per tp rank r with heads a_r (lib/ops/attention/head_parallel_attention.hpp), every
// operand a value with an error bound (|implementation − exact| ≤ e), arithmetic of
// lib/ops/linear/linear.hpp:
//   q, k, v  = T(x·W_rᵀ) + b_r        dot of `hidden` terms in A, rounded to T, bias added in T
//   out_r, lse_r                     the attention reference on the rank's heads, with the
//                                    projections' errors as input errors (attention_bounds)
//   y        = Σ_r T(out_r·Wo_rᵀ) + bo   partials rounded to T, summed in T over tp, bias in T
//   do_r     = T(dy·Wo_r)             exact inputs
//   dq, dk, dv                       the attention reference's backward with do_r's error
//   dx       = Σ_r T([dq|dk|dv]·[Wq;Wk;Wv]_r)
//   dW_r     = Σ_c T(Σ_{t in cp rank c} dZ_tᵀ·Z_t)  per cp rank's tokens, summed in T over cp
//              (and for a replicated kv head over the tp/g ranks that share it)
//   db       = Σ_c T(Σ_{t in c} dZ_t)
// Products:  |Σ âb̂ − Σ ab| ≤ Σ(e_a|b| + |a|e_b + e_a e_b) + γ_k(u_A)·Σ(|a| + e_a)(|b| + e_b) +
// k·η_A Rounding:  e ← e + u_T(|v| + e) + η_T/2 (not when T = A);  sums in T of n partials:
//            Σ e_i + γ_{n−1}(u_T)·Σ(|v_i| + e_i).
// The high-precision evaluation's own error (≤ 2^-100 relative to the magnitudes) is covered by
// scaling every composed bound by 1 + 2^-40: each nonzero bound contains a γ·Σ|terms| term
// ≥ 2^-53·Σ|terms|.
#pragma once

#include "engine/expected.hpp"
#include "suites/attention/attention_case.hpp"

#include <vector>

namespace shardcheck::check {

struct AttentionExpected {
  // core (cp order)
  ExpectedTensor out, lse, dq, dk, dv;
  // layer: y, dx in cp order; weight gradients dense (rows/columns in head order), except
  // dwk/dbk/dwv/dbv with g < tp: one kv head after another (one shard per sharing group)
  ExpectedTensor y, dx, dwq, dbq, dwk, dbk, dwv, dbv, dwo, dbo;
};

template <class T>
AttentionExpected expected(const AttentionCase& c, const AttentionData<T>& d);

// The cp order: every cp rank's positions, rank after rank.
std::vector<std::size_t> cp_order(const AttentionCase& c);
// The same for the query positions (cp_order under self-attention).
std::vector<std::size_t> cp_query_order(const AttentionCase& c);

}  // namespace shardcheck::check
