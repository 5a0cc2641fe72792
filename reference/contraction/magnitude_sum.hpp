// Upper bounds of sums of products of NONNEGATIVE matrices, as one contraction (contract.hpp):
// what an a-priori bound evaluates where its formula has Σ_c a[i,c]·b[c,j] with a, b ≥ 0
// (magnitudes, error bounds, weights of them), e.g. Σ_e |q_e|⁺|k_se|⁺ for every (t, s) of an
// attention head (attention/attention_bound.hpp, step (7)).
//
//   magnitude_sum(terms, path) ≥ Σ_terms Σ_c a[i,c]·b[c,j]   for every (i, j)
//
// The terms' operands are read through Layouts (any strides, any offset into their tensors) and
// copied, concatenated along the contracted axis, into A [m, K] and B [K, n] (K = Σ k_terms),
// each element ROUNDED UP to a double (the least double ≥ it: exact for values that are
// doubles already, such as |x| of storage-typed inputs; at most 2^-52 relative above the others,
// which makes every operand double-sliced, 3 slices or fewer, instead of R-sliced). A ≥ a and
// B ≥ b elementwise, so Σ A·B ≥ Σ a·b. The contraction of A·B (one part of length K, by `path`)
// is within gamma_{K−1}(u_R)·Σ|A·B| of Σ A·B (contract.hpp, for either path), and Σ|A·B| = Σ A·B
// since A, B ≥ 0; so Σ A·B ≤ value/(1 − gamma_K) ≤ value·(1 + 2·gamma_K) (gamma_K ≤ 1/2), and
// the result is value·(1 + 2·gamma_K(u_R)): an upper bound, at most (1 + 2^-52)(1 + 3·gamma_K)
// above the exact sum (the last product's rounding in R aside, which the callers' own margins
// for their evaluation in R cover). An exact 0 stays 0: a row of a that is 0 wherever b is
// nonzero (masked keys, with zero weights) gives exactly 0, as loops that skip them do.
// @pre every operand value finite and ≥ 0 (a value above the largest double rounds up to +inf,
// and inf·0 would be NaN: callers keep non-finite data on their loops); all terms share m and n.
#pragma once

#include "reference/contraction/contract.hpp"
#include "reference/format.hpp"
#include "reference/precision.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

namespace shardcheck::reference {

// A matrix read from a row-major buffer through a Layout, from element `offset` of its tensor
// (one head's block of a BSHD tensor, say).
template <class R>
struct MatrixRef {
  const Tensor<R>* tensor = nullptr;
  std::size_t offset = 0;
  Layout layout;

  const R& operator()(std::size_t i, std::size_t c) const {
    return tensor->data()[static_cast<std::ptrdiff_t>(offset) +
                          static_cast<std::ptrdiff_t>(i) * layout.row_stride +
                          static_cast<std::ptrdiff_t>(c) * layout.col_stride];
  }
};

// One product a [m, k]·b [k, n] of a magnitude sum.
template <class R>
struct MagnitudeTerm {
  MatrixRef<R> a, b;
};

// The least double ≥ x, as an R value (x ≥ 0 finite).
template <class R>
R double_at_least(const R& x) {
  auto d = static_cast<double>(x);
  if (R(d) < x) d = std::nextafter(d, std::numeric_limits<double>::infinity());
  return R(d);
}

// Σ_terms a·b for nonnegative operands, raised to an upper bound (see above): [m, n].
// @throws std::invalid_argument when the terms' shapes disagree.
template <class R>
Tensor<R> magnitude_sum(std::span<const MagnitudeTerm<R>> terms, std::size_t m, std::size_t n,
                        ContractionPath path) {
  std::size_t big_k = 0;
  for (const auto& t : terms) {
    if (t.a.layout.rows != m || t.b.layout.cols != n || t.a.layout.cols != t.b.layout.rows) {
      throw std::invalid_argument("reference::magnitude_sum: the terms must be [m, k]·[k, n]");
    }
    big_k += t.a.layout.cols;
  }
  if (big_k == 0 || m == 0 || n == 0) return Tensor<R>(Shape{m, n});
  Tensor<R> a(Shape{m, big_k}), b(Shape{big_k, n});
  std::size_t c0 = 0;
  for (const auto& t : terms) {
    const std::size_t k = t.a.layout.cols;
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t c = 0; c < k; ++c) a[i * big_k + c0 + c] = double_at_least(t.a(i, c));
    }
    for (std::size_t c = 0; c < k; ++c) {
      for (std::size_t j = 0; j < n; ++j) b[(c0 + c) * n + j] = double_at_least(t.b(c, j));
    }
    c0 += k;
  }
  const std::size_t parts[] = {big_k};
  auto r = contraction<R>(a, row_major_layout(m, big_k), b, row_major_layout(big_k, n), parts, path)
               .value;
  const R raise = 1 + 2 * gamma<R>(big_k, unit_roundoff_of<R>());
  for (R& x : r.values()) x *= raise;
  return r;
}

}  // namespace shardcheck::reference
