// The softmax merge: combining attention partials computed over disjoint parts of the keys.
//
// A partial over key part j holds, per row (a (batch, head, query) triple), lse_j = log Σ_{s∈j}
// exp(s_s) and out_j = Σ_{s∈j} exp(s_s − lse_j)·v_s (ops/attention/attention.hpp). Over all parts:
//   lse = log Σ_j exp(lse_j),       out = Σ_j exp(lse_j − lse)·out_j
// Evaluated with a guarded max shift (FlashAttention's split-KV combine):
//   m = max_j lse_j;  if m = −inf (every part empty) the row is empty: out = 0, lse = −inf;
//   w_j = exp(lse_j − m) (0 for an empty part, since exp(−inf) = 0; at most 1, so no overflow
//   however large the gaps); l = Σ_j w_j (≥ 1); lse = m + log(l); out_e = Σ_j (w_j/l)·out_je.
// Conventions (docs/attention.md), which the two-way online forms in ring-flash-attention
// (sigmoid / logsigmoid) and Transformer Engine (max + log1p(exp(min − max))) do not keep:
//   - an empty partial (lse −inf) contributes nothing, whatever its out holds (even NaN);
//   - all parts empty, or no parts at all: out 0 (+0.0), lse −inf, never NaN;
//   - lse = +inf in a partial (an overflowed score) gives out NaN and lse +inf for that row:
//     the input is already invalid and this is not hidden;
//   - NaN in a non-empty partial's lse gives out NaN and lse NaN for the row (NaN before +inf);
//   - NaN in a non-empty partial's out propagates to that element of the row; ±inf there gives
//     ±inf, or NaN when its weight w_j/l underflows to 0 or opposite infinities meet (a finite
//     attention output never holds inf: such a partial is already invalid).
// No NaN is ever produced from partials whose lse are finite or −inf and whose non-empty outs
// are finite; huge gaps between the lse (1e30, or −max against +max) never overflow: the
// difference lse_j − m may round to −inf, and then w_j = 0.
//
// Arithmetic, exactly this sequence in A (float64 or float32; the attention kernel's partials
// are in acc_t<T>), per row, the parts in index order, empty parts skipped entirely:
//   m = max_j lse_j (exact);  d_j = lse_j − m (one subtraction);  w_j = std::exp(d_j);
//   l = ((w_0 + w_1) + w_2) + ...;  lse = m + std::log(l);  c_j = w_j / l (one division);
//   out_e = ((c_0·out_0e + c_1·out_1e) + c_2·out_2e) + ...   (each product and sum rounded,
//   no fused multiply-add needed; the bound of reference/softmax_merge/softmax_merge.hpp allows
//   one).
//   Then, where out_e overflowed to ±inf though every part's out_je is finite: out_e = ±M with
//   M = max_j |out_je| over the non-empty parts. The exact out_e is a convex combination of the
//   out_je (the exact c_j are ≥ 0 and sum to 1), so it lies in [−M, M]; the sum overflowed only
//   by rounding, and the projection onto [−M, M] moves the computed value toward the exact one,
//   so the error bound still holds. Without it a ring's running out could overflow by rounding
//   (FLT_MAX·c_0 + FLT_MAX·c_1 with c_0 + c_1 = 1) and the next step's 0·inf make it NaN,
//   where the exact merge is finite (found by the nightly, fuzz/corpus/softmax_merge/
//   regression-ring-overflow-then-zero-weight-nan).
// merge_into (the two-way step a ring applies) is exactly this with the two parts
// (accumulator, new part), in that order. reference/softmax_merge/softmax_merge.hpp bounds the
// error of all of it, of nested merges and of chains; docs/attention.md "The softmax merge" in
// prose.
//
// Shapes. Row layout: out [rows, width], lse [rows]. Attention layout
// (ops/attention/attention.hpp): out [batch, L, h, d] and lse [batch, h, L]; the row (b, t, i) is
// out[b, t, i, :] with lse[b, i, t]. Every partial of one merge has the same shape; UsageError
// otherwise, naming both shapes. Zero-sized dimensions are allowed (nothing to merge).
//
// Sources: Milakov & Gimelshein 2018 (online softmax); Dao 2023 (FlashAttention-2 split-KV
// combine); docs/softmax_merge.md.
#pragma once

#include "tensor/tensor.hpp"

#include <cstddef>
#include <span>

namespace shardcheck {

// Partials in either layout (row layout: out [rows, width], lse [rows]; attention layout: out
// [batch, L, h, d], lse [batch, h, L]). The functions below say which layout they take.
template <class A>
struct SoftmaxPartial {
  Tensor<A> out;
  Tensor<A> lse;
};

// ---- row layout ----

// The identity of the merge: out [rows, width] of +0.0, lse [rows] of −inf (an empty partial).
template <class A>
SoftmaxPartial<A> empty_softmax_partial(std::size_t rows, std::size_t width);

// Merges one or more partials of the same shape [rows, width] / [rows].
// @throws UsageError when there are no partials (use the overload with rows and width), a
// partial is not 2-D/1-D or the shapes differ.
template <class A>
SoftmaxPartial<A> softmax_merge(std::span<const SoftmaxPartial<A>> parts);

// The same with the shape given, so that zero partials are allowed (the result is then
// empty_softmax_partial(rows, width)). @throws UsageError when a partial's shape is not
// out [rows, width], lse [rows].
template <class A>
SoftmaxPartial<A> softmax_merge(std::span<const SoftmaxPartial<A>> parts, std::size_t rows,
                                std::size_t width);

// acc ← merge(acc, part): the two-way form (one ring step). Same conventions and arithmetic as
// softmax_merge of {acc, part}; part may be acc itself. @throws UsageError when the shapes
// differ or are not out [rows, width], lse [rows].
template <class A>
void merge_into(SoftmaxPartial<A>& acc, const SoftmaxPartial<A>& part);

// ---- attention layout: out [batch, L, h, d], lse [batch, h, L] ----

// Merges one or more partials of attention layout. @throws UsageError when there are none, a
// partial's out is not 4-D or its lse is not [batch, h, L] of its out, or the shapes differ.
template <class A>
SoftmaxPartial<A> softmax_merge_attention(std::span<const SoftmaxPartial<A>> parts);

// (acc_out, acc_lse) ← merge((acc_out, acc_lse), (out, lse)). To start a ring from nothing,
// pass acc_out of zeros and acc_lse of −inf (the identity). @throws UsageError naming the four
// shapes when acc_out and out differ, or an lse is not [batch, h, L] of its out.
template <class A>
void merge_attention_into(Tensor<A>& acc_out, Tensor<A>& acc_lse, const Tensor<A>& out,
                          const Tensor<A>& lse);

}  // namespace shardcheck
