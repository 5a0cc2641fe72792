// The dense linear layer, forward and backward, in the high-precision scalar R: the oracle every
// linear implementation (dense, column-parallel, row-parallel, a user's own) is compared with.
// Shapes and formulas are lib/ops/linear/linear.hpp's (PyTorch's convention):
//   x [tokens, in], w [out, in], b [out] or empty
//   y  = x·Wᵀ + b        y[t,o]  = Σ_i x[t,i]·w[o,i] + b[o]     contracted axis: in
//   dx = dy·W            dx[t,i] = Σ_o dy[t,o]·w[o,i]           contracted axis: out
//   dW = dyᵀ·x           dW[o,i] = Σ_t dy[t,o]·x[t,i]           contracted axis: tokens
//   db = Σ_t dy          db[o]   = Σ_t dy[t,o]                  contracted axis: tokens (unit)
// Each result is a Contraction (dot.hpp): the value plus, per element and per part of the
// contracted axis, the partial sum and Σ|a||b| that bounds.hpp turns into an error bound.
// The parts are the shard sizes of the contracted axis in the implementation being checked:
//   row-parallel forward          y over `in` split by input features (in_parts)
//   column-parallel backward dx   dx over `out` split by output features (out_parts)
//   everything else               one part (the whole axis on one rank)
// y, dx and dW are evaluated by contraction/contract.hpp: by default the fast path (exact double
// GEMMs, fast_contraction.hpp), or the plain 113-bit loops (contract_parts per element, the slow,
// obviously right version: MatMulSlow in gemma.cpp's words) with `path` = plain or the
// environment's SHARDCHECK_REFERENCE=plain (contraction_path.hpp). Both meet dot.hpp's per-term
// bound, which is what bounds.hpp covers; db is a plain sum in R either way.
// Inputs of element type T (double, float, bfloat16, float16) are converted exactly.
#pragma once

#include "reference/contraction/contract.hpp"
#include "reference/dot.hpp"
#include "reference/precision.hpp"

#include <span>
#include <stdexcept>
#include <string>

namespace shardcheck::reference {

namespace detail {
template <class V>
void require_linear_shapes(const Tensor<V>& x, const Tensor<V>& w, const Tensor<V>* b,
                           const Tensor<V>* dy) {
  auto fail = [&](const std::string& why) {
    std::string msg =
        "reference::linear: x " + format_shape(x.shape()) + ", w " + format_shape(w.shape());
    if (b != nullptr) msg += ", b " + format_shape(b->shape());
    if (dy != nullptr) msg += ", dy " + format_shape(dy->shape());
    throw std::invalid_argument(msg + ": " + why);
  };
  if (x.ndim() != 2 || w.ndim() != 2) fail("x must be [tokens, in] and w [out, in]");
  if (x.dim(1) != w.dim(1)) fail("x's in (last axis) must equal w's in (axis 1)");
  if (b != nullptr && !b->empty() && (b->ndim() != 1 || b->dim(0) != w.dim(0))) {
    fail("b must be empty or [out]");
  }
  if (dy != nullptr && (dy->ndim() != 2 || dy->dim(0) != x.dim(0) || dy->dim(1) != w.dim(0))) {
    fail("dy must be [tokens, out]");
  }
}

// The operands' layouts: y = x·Wᵀ, dx = dy·W, dW = dyᵀ·x.
struct LinearLayouts {
  Layout x, w_t, dy, w, dy_t;
  LinearLayouts(std::size_t tokens, std::size_t in, std::size_t out)
      : x(row_major_layout(tokens, in)),
        w_t(transposed_layout(in, out)),
        dy(row_major_layout(tokens, out)),
        w(row_major_layout(out, in)),
        dy_t(transposed_layout(out, tokens)) {}
};

inline std::vector<std::size_t> forward_parts(std::span<const std::size_t> in_parts,
                                              std::size_t in) {
  return normalize_parts(in_parts, in, "in (linear forward, row-parallel split)");
}
inline std::vector<std::size_t> dx_parts(std::span<const std::size_t> out_parts, std::size_t out) {
  return normalize_parts(out_parts, out, "out (linear backward dx, column-parallel split)");
}

template <class R>
Contraction<R> with_bias(Contraction<R> c, Tensor<R> b) {
  if (!b.empty()) {
    c.bias = std::move(b);
    finish_values(c);
  }
  return c;
}

// db = Σ_t dy (Operands::unit, one part of `tokens`), or an empty value without bias (dy is
// then not read).
template <class R>
Contraction<R> bias_gradient(const Tensor<R>& dy, std::size_t tokens, bool has_bias) {
  Contraction<R> db;
  db.operands = Operands::unit;
  db.part_lengths = {tokens};
  if (has_bias) {
    const std::size_t out = dy.dim(1);
    db.value = Tensor<R>({out});
    db.terms.resize(out);
    for (std::size_t o = 0; o < out; ++o) {
      contract_parts<R>(dy.data() + o, static_cast<std::ptrdiff_t>(out), nullptr, 0,
                        db.part_lengths, &db.terms[o]);
    }
    finish_values(db);
  }
  return db;
}
}  // namespace detail

// y = x·Wᵀ + b: the library's linear(x, w, b, kernel), with the reference-only `in_parts`: shard
// sizes of the input features when the contraction is split (row-parallel), empty for one part;
// and `path`, the evaluation (contraction_path.hpp). @pre x [tokens, in], w [out, in], b empty
// or [out]. @throws std::invalid_argument naming the shapes, or the parts and their sum.
template <HighPrecision R = hp>
Contraction<R> linear(const Tensor<R>& x, const Tensor<R>& w, const Tensor<R>& b,
                      std::span<const std::size_t> in_parts = {},
                      ContractionPath path = default_contraction_path()) {
  detail::require_linear_shapes<R>(x, w, &b, nullptr);
  const std::size_t tokens = x.dim(0), in = x.dim(1), out = w.dim(0);
  const detail::LinearLayouts l(tokens, in, out);
  const auto parts = detail::forward_parts(in_parts, in);
  return detail::with_bias(contraction<R>(x, l.x, w, l.w_t, parts, path), b);
}

template <class R = hp>
struct LinearBackward {
  Contraction<R> dx;  // [tokens, in]
  Contraction<R> dw;  // [out, in]
  Contraction<R> db;  // [out]; value empty when the layer has no bias
};

// Gradients of y = x·Wᵀ + b for the upstream gradient dy [tokens, out]: the library's
// linear_backward(x, w, has_bias, dy, kernel), with the reference-only `out_parts`: shard sizes
// of the output features when dx's contraction is split (column-parallel), empty for one part;
// and `path` (contraction_path.hpp).
template <HighPrecision R = hp>
LinearBackward<R> linear_backward(const Tensor<R>& x, const Tensor<R>& w, bool has_bias,
                                  const Tensor<R>& dy, std::span<const std::size_t> out_parts = {},
                                  ContractionPath path = default_contraction_path()) {
  detail::require_linear_shapes<R>(x, w, nullptr, &dy);
  const std::size_t tokens = x.dim(0), in = x.dim(1), out = w.dim(0);
  const detail::LinearLayouts l(tokens, in, out);
  const std::size_t all_tokens[] = {tokens};
  return {contraction<R>(dy, l.dy, w, l.w, detail::dx_parts(out_parts, out), path),
          contraction<R>(dy, l.dy_t, x, l.x, all_tokens, path),
          detail::bias_gradient(dy, tokens, has_bias)};
}

// The same, from storage-typed tensors (converted exactly: to doubles for the fast path, to R
// for the plain one).
template <class R = hp, StorageFloat T>
Contraction<R> linear(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b,
                      std::span<const std::size_t> in_parts = {},
                      ContractionPath path = default_contraction_path()) {
  detail::require_linear_shapes<T>(x, w, &b, nullptr);
  const std::size_t tokens = x.dim(0), in = x.dim(1), out = w.dim(0);
  if (resolve_path(path, tokens, out, in, true, true) == ContractionPath::plain ||
      !fast_path_holds_in<R>) {
    return linear<R>(to_hp<R>(x), to_hp<R>(w), to_hp<R>(b), in_parts, ContractionPath::plain);
  }
  const detail::LinearLayouts l(tokens, in, out);
  const auto parts = detail::forward_parts(in_parts, in);
  return detail::with_bias(
      fast_contraction_of<R>(to_double_matrix(x), l.x, to_double_matrix(w), l.w_t, parts),
      to_hp<R>(b));
}

template <class R = hp, StorageFloat T>
LinearBackward<R> linear_backward(const Tensor<T>& x, const Tensor<T>& w, bool has_bias,
                                  const Tensor<T>& dy, std::span<const std::size_t> out_parts = {},
                                  ContractionPath path = default_contraction_path()) {
  detail::require_linear_shapes<T>(x, w, nullptr, &dy);
  const std::size_t tokens = x.dim(0), in = x.dim(1), out = w.dim(0);
  // dx [tokens, in] over out, dw [out, in] over tokens: the forward's m·n·k each.
  if (resolve_path(path, tokens, in, out, true, true) == ContractionPath::plain ||
      !fast_path_holds_in<R>) {
    return linear_backward<R>(to_hp<R>(x), to_hp<R>(w), has_bias, to_hp<R>(dy), out_parts,
                              ContractionPath::plain);
  }
  const detail::LinearLayouts l(tokens, in, out);
  const std::size_t all_tokens[] = {tokens};
  const auto dx = to_double_matrix(x), dw = to_double_matrix(w), ddy = to_double_matrix(dy);
  return {fast_contraction_of<R>(ddy, l.dy, dw, l.w, detail::dx_parts(out_parts, out)),
          fast_contraction_of<R>(ddy, l.dy_t, dx, l.x, all_tokens),
          detail::bias_gradient(has_bias ? to_hp<R>(dy) : Tensor<R>(), tokens, has_bias)};
}

}  // namespace shardcheck::reference
