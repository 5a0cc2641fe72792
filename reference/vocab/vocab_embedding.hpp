// The dense embedding, forward and backward, in the high-precision scalar R, with elementwise
// a-priori bounds for lib/ops/vocab/vocab_embedding.hpp's arithmetic contract. Shapes as there:
//   ids [tokens], W [V, h]      y[t, :] = W[ids[t], :]
//   dy [tokens, h]              dW[v, :] = Σ_{t : ids[t] = v, v ≠ padding_idx} dy[t, :]
// Bounds (docs/vocab.md, "Embedding"):
//   y   0. Each output element is one stored value plus exact zeros from the ranks that do not
//       own the id (x + 0 = x exactly in IEEE arithmetic; −0 + 0 = +0 compares equal). So any
//       difference at all, in any dtype, is a bug.
//   dW  a plain sum of k_v = #{t : ids[t] = v} values of T accumulated in A = acc_t<T> and
//       rounded once to T: bounds.hpp's element_bound with one part of length k_v and
//       Operands::unit, i.e. gamma_{k−1}(u_A)·Σ|dy| + one rounding to T. 0 when k_v ≤ 1 and
//       T = A (a sum of one term is exact); for 16-bit T and k_v = 1 the bound is u_T·|dy|,
//       conservative (the conversion is exact).
// A padded table (lib/ops/vocab/vocab_embedding.hpp, "Padded vocabulary": V_pad rows, the first
// V real) is the embedding of its V real rows: the caller passes W's first V rows and V, so no
// padding row is ever read; the padding rows of dW are exactly 0 with bound 0 (no id reaches
// them: properties/suites/vocab/vocab_expected.cpp appends them). The bound of dW does not
// depend on V (only on k_v, each row's id count).
#pragma once

#include "reference/bounds.hpp"
#include "reference/precision.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

namespace shardcheck::reference {

template <class R = hp>
struct EmbeddingBackward {
  Tensor<R> dw;     // [V, h]
  Tensor<R> bound;  // [V, h]
};

namespace detail {
inline void require_ids(std::span<const std::int64_t> ids, std::size_t vocab) {
  for (std::size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || static_cast<std::uint64_t>(ids[t]) >= vocab) {
      throw std::invalid_argument("reference::embedding: id " + std::to_string(ids[t]) +
                                  " at token " + std::to_string(t) + " outside [0, " +
                                  std::to_string(vocab) + ")");
    }
  }
}
// padding_idx as the library takes it (lib/ops/vocab/vocab_embedding.hpp): a global row id in
// [0, V). A negative one (PyTorch's nn.Embedding counts padding_idx = -1 from the end) is refused,
// as the library refuses it: the caller translates it to V - 1 first, so both sides mean one row.
inline void require_padding(std::optional<std::int64_t> pad, std::size_t vocab) {
  if (pad && (*pad < 0 || static_cast<std::uint64_t>(*pad) >= vocab)) {
    throw std::invalid_argument("reference::embedding_backward: padding_idx " +
                                std::to_string(*pad) +
                                " is outside the vocabulary [0, V = " + std::to_string(vocab) +
                                "); pass a global row id in [0, V) (V - 1 for PyTorch's -1), or "
                                "no padding_idx");
  }
}
}  // namespace detail

// y = W[ids], the library's embedding(ids, w) (exact; its bound is 0 everywhere).
template <HighPrecision R = hp>
Tensor<R> embedding(std::span<const std::int64_t> ids, const Tensor<R>& w) {
  detail::require_ids(ids, w.dim(0));
  const std::size_t h = w.dim(1);
  Tensor<R> y({ids.size(), h});
  for (std::size_t t = 0; t < ids.size(); ++t) {
    for (std::size_t j = 0; j < h; ++j) y(t, j) = w(static_cast<std::size_t>(ids[t]), j);
  }
  return y;
}

// dW and its bound: the library's embedding_backward(ids, dy, vocab, padding_idx), with `arith`
// (storage T, accumulator acc_t<T>) last.
// @throws std::invalid_argument for an id outside [0, V) or a padding_idx outside [0, V).
template <HighPrecision R = hp>
EmbeddingBackward<R> embedding_backward(std::span<const std::int64_t> ids, const Tensor<R>& dy,
                                        std::size_t vocab, std::optional<std::int64_t> padding_idx,
                                        const Arithmetic& arith) {
  using std::abs;
  detail::require_ids(ids, vocab);
  detail::require_padding(padding_idx, vocab);
  if (dy.ndim() != 2 || dy.dim(0) != ids.size()) {
    throw std::invalid_argument("reference::embedding_backward: dy must be [tokens, h]");
  }
  const std::size_t h = dy.dim(1);
  EmbeddingBackward<R> g{Tensor<R>({vocab, h}), Tensor<R>({vocab, h})};
  std::vector<PartTerms<R>> terms(vocab * h);
  for (std::size_t t = 0; t < ids.size(); ++t) {
    if (padding_idx && ids[t] == *padding_idx) continue;
    const auto v = static_cast<std::size_t>(ids[t]);
    for (std::size_t j = 0; j < h; ++j) {
      auto& pt = terms[v * h + j];
      pt.partial += dy(t, j);
      pt.abs_sum += abs(dy(t, j));
      ++pt.length;
    }
  }
  for (std::size_t e = 0; e < terms.size(); ++e) {
    g.dw[e] = terms[e].partial;
    const auto b = element_bound<R>(std::span<const PartTerms<R>>(&terms[e], 1), nullptr, arith,
                                    Operands::unit);
    g.bound[e] = b.bound;
  }
  return g;
}

}  // namespace shardcheck::reference
