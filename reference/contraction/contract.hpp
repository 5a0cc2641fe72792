// One matrix product of the reference, a [m, k]·b [k, n] with the contracted axis k split into
// parts, by either path of contraction_path.hpp: what the reference ops (linear/linear.hpp,
// mlp/mlp.hpp) call instead of looping over contract_parts themselves.
//   value [m, n]   Σ_r partial_r (no bias: the caller sets Contraction::bias and calls
//                  finish_values to add one)
//   terms          terms[r·m·n + i·n + j] is part r of element (i, j), as dot.hpp defines it
// The operands are row-major buffers read through a Layout (strides), so x·Wᵀ, dy·W and dyᵀ·x
// need no copies.
//   automatic  fast or plain per product, by its shape (contraction_path.hpp's resolve_path)
//   plain  contract_parts per element in R, i outer, j inner: the reference's 113-bit loops
//   fast   fast_contraction.hpp, when R is at least as precise and wide as hp (the fast path's
//          accuracy argument needs products of doubles exact in R and no overflow in its
//          scalings): an operand whose values are all exactly doubles (always so for
//          storage-typed inputs) is sliced as doubles, any other (an activation, a softmax
//          probability or a gradient computed in R) as R values; lines with values outside
//          double's exponent range, ±inf or NaN take contract_parts inside the fast path
// Either way each term's partial is within gamma_{k_r−1}(u_R)·Σ|a·b| of the exact value and
// abs_sum_r ≥ Σ|a·b|·(1 − gamma_{k_r−1}(u_R)): the bound bounds.hpp's reference term covers
// (docs/fast-reference.md, "How the bounds account for it"). On the fast path abs_sum_r is by
// default an upper bound a little above Σ|a·b| (AbsSums::upper_bound, fast_contraction.hpp); a
// caller that needs it within gamma of Σ|a·b| asks for AbsSums::exact (the plain path's always
// is).
#pragma once

#include "reference/contraction/contraction_path.hpp"
#include "reference/contraction/fast_contraction.hpp"
#include "reference/dot.hpp"
#include "reference/precision.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <vector>

namespace shardcheck::reference {

// How a row-major buffer is read as a [rows, cols] matrix: element (i, j) is
// data[i·row_stride + j·col_stride].
struct Layout {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::ptrdiff_t row_stride = 0;
  std::ptrdiff_t col_stride = 0;
};

// A row-major [rows, cols] buffer as itself.
inline Layout row_major_layout(std::size_t rows, std::size_t cols) {
  return {rows, cols, static_cast<std::ptrdiff_t>(cols), 1};
}

// A row-major [cols, rows] buffer read transposed, as [rows, cols] (w [out, in] as [in, out]).
inline Layout transposed_layout(std::size_t rows, std::size_t cols) {
  return {rows, cols, 1, static_cast<std::ptrdiff_t>(rows)};
}

// True when fast_contraction's accuracy argument holds in R: ≥ hp's precision and range.
template <class R>
constexpr bool fast_path_holds_in_impl() {
  using L = std::numeric_limits<R>;
  using H = std::numeric_limits<hp>;
  return L::is_specialized && L::digits >= H::digits && L::max_exponent >= H::max_exponent &&
         L::min_exponent <= H::min_exponent;
}
template <class R>
inline constexpr bool fast_path_holds_in = fast_path_holds_in_impl<R>();

// The values of an R buffer as doubles, or nothing when one of them is not exactly a double
// (NaN maps to NaN; ±inf and ±0 keep their signs).
template <class R>
std::optional<std::vector<double>> exact_doubles(std::span<const R> values) {
  using std::isnan;
  std::vector<double> out;
  out.reserve(values.size());
  for (const R& v : values) {
    const auto d = static_cast<double>(v);
    if (!(R(d) == v) && !isnan(v)) return std::nullopt;
    out.push_back(d);
  }
  return out;
}

namespace detail {
template <class V>
MatrixViewOf<V> view_of(const V* data, const Layout& l) {
  return {data, l.rows, l.cols, l.row_stride, l.col_stride};
}
}  // namespace detail

// The plain path: contract_parts per element in R. `parts`: normalized (normalize_parts).
template <class R>
Contraction<R> plain_contraction(const R* a, const Layout& la, const R* b, const Layout& lb,
                                 std::span<const std::size_t> parts) {
  const std::size_t m = la.rows, n = lb.cols;
  Contraction<R> c;
  c.value = Tensor<R>({m, n});
  c.part_lengths.assign(parts.begin(), parts.end());
  c.terms.resize(c.parts() * m * n);
  std::vector<PartTerms<R>> out(c.parts());
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      contract_parts(a + static_cast<std::ptrdiff_t>(i) * la.row_stride, la.col_stride,
                     b + static_cast<std::ptrdiff_t>(j) * lb.col_stride, lb.row_stride, parts,
                     out.data());
      for (std::size_t r = 0; r < c.parts(); ++r) c.terms[r * m * n + i * n + j] = out[r];
    }
  }
  finish_values(c);
  return c;
}

// The fast path on double operands (storage-typed inputs, converted exactly by the caller).
// `options`: fast_contraction's (threads, tile, statistics; tests' mutants).
template <class R>
Contraction<R> fast_contraction_of(const std::vector<double>& a, const Layout& la,
                                   const std::vector<double>& b, const Layout& lb,
                                   std::span<const std::size_t> parts,
                                   const FastOptions& options = {}) {
  static_assert(fast_path_holds_in<R>, "the fast path needs R at least as precise and wide as hp");
  return fast_contraction<R>(detail::view_of(a.data(), la), detail::view_of(b.data(), lb), parts,
                             options);
}

// An operand of contraction_at: an R tensor, with its values as doubles when every one of them
// is exactly a double (found once per tensor, so the many products one tensor takes part in,
// attention's per-head ones, share the conversion; only on the fast path).
template <class R>
struct ContractionOperand {
  const Tensor<R>* tensor = nullptr;
  std::optional<std::vector<double>> doubles;

  ContractionOperand(const Tensor<R>& t, ContractionPath path) : tensor(&t) {
    if constexpr (fast_path_holds_in<R>) {
      if (path != ContractionPath::plain) doubles = exact_doubles<R>(t.values());
    }
  }
};

// a·b by `path` (see above; automatic resolved for this product's shape by resolve_path), each
// operand read through its Layout from element `offset` of its tensor (one head's block of a BSHD
// tensor, say).
// `parts`: normalized. @pre la.cols == lb.rows; the layouts lie within the tensors.
template <class R>
Contraction<R> contraction_at(const ContractionOperand<R>& a, std::size_t a_offset,
                              const Layout& la, const ContractionOperand<R>& b,
                              std::size_t b_offset, const Layout& lb,
                              std::span<const std::size_t> parts, ContractionPath path,
                              AbsSums abs_sums = AbsSums::upper_bound) {
  const R* ra = a.tensor->data() + a_offset;
  const R* rb = b.tensor->data() + b_offset;
  if constexpr (fast_path_holds_in<R>) {
    if (resolve_path(path, la.rows, lb.cols, la.cols, a.doubles.has_value(),
                     b.doubles.has_value()) == ContractionPath::fast) {
      // Each operand as doubles when it is exactly doubles (fewer slices), else as R values.
      const auto va = detail::view_of(ra, la);
      const auto vb = detail::view_of(rb, lb);
      FastOptions o;
      o.abs_sums = abs_sums;
      if (a.doubles && b.doubles) {
        return fast_contraction<R>(detail::view_of(a.doubles->data() + a_offset, la),
                                   detail::view_of(b.doubles->data() + b_offset, lb), parts, o);
      }
      if (a.doubles) {
        return fast_contraction<R>(detail::view_of(a.doubles->data() + a_offset, la), vb, parts, o);
      }
      if (b.doubles) {
        return fast_contraction<R>(va, detail::view_of(b.doubles->data() + b_offset, lb), parts, o);
      }
      return fast_contraction<R>(va, vb, parts, o);
    }
  }
  return plain_contraction<R>(ra, la, rb, lb, parts);
}

// a·b by `path`, both read from their first element.
template <class R>
Contraction<R> contraction(const Tensor<R>& a, const Layout& la, const Tensor<R>& b,
                           const Layout& lb, std::span<const std::size_t> parts,
                           ContractionPath path, AbsSums abs_sums = AbsSums::upper_bound) {
  return contraction_at<R>(ContractionOperand<R>(a, path), 0, la, ContractionOperand<R>(b, path), 0,
                           lb, parts, path, abs_sums);
}

}  // namespace shardcheck::reference
