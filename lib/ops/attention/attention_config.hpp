// The attention's configuration: the data types the library (attention.hpp and its partitioned
// forms), the reference (reference/attention/) and the suite (properties/suites/attention/)
// share, declared once. Data only: enums and structs of fields, no member functions and no op
// logic. What a field means is written below; the rule that evaluates it (which keys a query
// sees, the effective scale) is written twice on purpose: visible() and effective_scale() in
// attention.hpp for the library, reference::mask_visible() and reference::score_scale() in
// reference/attention/attention_definition.hpp for the oracle (cmake/check_layering.cmake).
#pragma once

#include "runtime/enum_names.hpp"
#include "tensor/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardcheck {

// ---- the mask: defined on GLOBAL positions, so every piece of a partitioned computation
// ---- evaluates the same mask (a context-parallel step passes its chunks' global positions)

enum class MaskKind {
  none,    // every key visible
  causal,  // t sees s iff s ≤ t + (Lk − Lq) (bottom-right) or s ≤ t (top-left): CausalAlignment
  explicit_mask  // any boolean mask [batch, Lq, Lk] (1 = visible)
};
SHARDCHECK_ENUM_NAMES(MaskKind, "none", "causal", "explicit_mask");

// Where a causal mask's diagonal sits when Lq ≠ Lk (the two conventions in use; equal when
// Lq = Lk):
//   bottom_right  the last query sees every key: s ≤ t + (Lk − Lq). FlashAttention ≥ 2.1's
//                 causal=True, and what decode (Lq = 1 against a KV cache) and chunked prefill
//                 (a chunk of Lq new tokens after Lk − Lq cached ones) need.
//   top_left      query t sees keys 0..t: s ≤ t. PyTorch's
//                 scaled_dot_product_attention(is_causal=True) and FlashAttention < 2.1 (the
//                 change in 2.1 is the classic silent bug of code ported across it).
enum class CausalAlignment { bottom_right, top_left };
SHARDCHECK_ENUM_NAMES(CausalAlignment, "bottom_right", "top_left");

// Query position t sees key position s in sequence b (global positions) iff s is not padded
// (key_lengths empty, or s < key_lengths[b]) and the kind allows it: none always, causal when
// s ≤ t + (k_len − q_len) (bottom_right) or s ≤ t (top_left), explicit_mask when
// allowed[b, t, s] ≠ 0.
// q_len and k_len are the GLOBAL lengths. They must be set (and every query / key position
// must lie in [0, q_len) / [0, k_len)) whenever the mask depends on positions: causal and
// explicit_mask need both, key padding needs k_len. With kind none and no padding they may be
// left 0 (positions are then not range-checked). The dense op (positions 0..L−1) needs them
// equal to its Lq and Lk, or both 0 with kind none and no padding.
struct AttentionMask {
  MaskKind kind = MaskKind::none;
  std::size_t q_len = 0;  // global Lq
  std::size_t k_len = 0;  // global Lk
  // Key padding, per sequence: keys s ≥ key_lengths[b] are invisible. Empty: no padding.
  // Combines with every kind. Else one entry per sequence of the batch, each ≤ k_len.
  std::vector<std::size_t> key_lengths;
  // explicit_mask only: [batch, q_len, k_len], 1 = visible.
  Tensor<std::uint8_t> allowed;
  CausalAlignment alignment = CausalAlignment::bottom_right;  // causal only
};

struct AttentionConfig {
  std::size_t q_heads = 1;   // h
  std::size_t kv_heads = 1;  // g, divides h
  std::size_t head_dim = 1;  // d
  double scale = 0;          // 0: 1/sqrt(d); must be finite
  AttentionMask mask;
};

}  // namespace shardcheck
