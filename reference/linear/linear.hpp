// The dense linear layer, forward and backward, in the high-precision scalar R: the oracle every
// linear implementation (dense, column-parallel, row-parallel, a user's own) is compared with.
// Plain loops on purpose: this is the slow, obviously right version (MatMulSlow in gemma.cpp's
// words). Shapes and formulas are lib/ops/linear/linear.hpp's (PyTorch's convention):
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
// Inputs of element type T (double, float, bfloat16, float16) are converted exactly (to_hp).
#pragma once

#include "reference/dot.hpp"
#include "reference/precision.hpp"

#include <span>
#include <stdexcept>
#include <string>

namespace shardcheck::reference {

namespace detail {
template <class R>
void require_linear_shapes(const Tensor<R>& x, const Tensor<R>& w, const Tensor<R>* b,
                           const Tensor<R>* dy) {
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
}  // namespace detail

// y = x·Wᵀ + b: the library's linear(x, w, b, kernel), with the reference-only `in_parts` last:
// shard sizes of the input features when the contraction is split (row-parallel), empty for one
// part. @pre x [tokens, in], w [out, in], b empty or [out].
template <HighPrecision R = hp>
Contraction<R> linear(const Tensor<R>& x, const Tensor<R>& w, const Tensor<R>& b,
                      std::span<const std::size_t> in_parts = {}) {
  detail::require_linear_shapes<R>(x, w, &b, nullptr);
  const std::size_t tokens = x.dim(0), in = x.dim(1), out = w.dim(0);
  Contraction<R> c;
  c.value = Tensor<R>({tokens, out});
  c.part_lengths = normalize_parts(in_parts, in, "in (linear forward, row-parallel split)");
  c.terms.resize(c.parts() * tokens * out);
  c.bias = b;
  std::vector<PartTerms<R>> parts(c.parts());
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t o = 0; o < out; ++o) {
      contract_parts(x.data() + t * in, 1, w.data() + o * in, 1, c.part_lengths, parts.data());
      for (std::size_t r = 0; r < c.parts(); ++r)
        c.terms[r * tokens * out + t * out + o] = parts[r];
    }
  }
  finish_values(c);
  return c;
}

template <class R = hp>
struct LinearBackward {
  Contraction<R> dx;  // [tokens, in]
  Contraction<R> dw;  // [out, in]
  Contraction<R> db;  // [out]; value empty when the layer has no bias
};

// Gradients of y = x·Wᵀ + b for the upstream gradient dy [tokens, out]: the library's
// linear_backward(x, w, has_bias, dy, kernel), with the reference-only `out_parts` last: shard
// sizes of the output features when dx's contraction is split (column-parallel), empty for one
// part.
template <HighPrecision R = hp>
LinearBackward<R> linear_backward(const Tensor<R>& x, const Tensor<R>& w, bool has_bias,
                                  const Tensor<R>& dy,
                                  std::span<const std::size_t> out_parts = {}) {
  detail::require_linear_shapes<R>(x, w, nullptr, &dy);
  const std::size_t tokens = x.dim(0), in = x.dim(1), out = w.dim(0);
  const auto s_in = static_cast<std::ptrdiff_t>(in);
  const auto s_out = static_cast<std::ptrdiff_t>(out);
  LinearBackward<R> g;

  g.dx.value = Tensor<R>({tokens, in});
  g.dx.part_lengths =
      normalize_parts(out_parts, out, "out (linear backward dx, column-parallel split)");
  g.dx.terms.resize(g.dx.parts() * tokens * in);
  std::vector<PartTerms<R>> parts(g.dx.parts());
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t i = 0; i < in; ++i) {
      contract_parts(dy.data() + t * out, 1, w.data() + i, s_in, g.dx.part_lengths, parts.data());
      for (std::size_t r = 0; r < g.dx.parts(); ++r)
        g.dx.terms[r * tokens * in + t * in + i] = parts[r];
    }
  }
  finish_values(g.dx);

  g.dw.value = Tensor<R>({out, in});
  g.dw.part_lengths = {tokens};
  g.dw.terms.resize(out * in);
  for (std::size_t o = 0; o < out; ++o) {
    for (std::size_t i = 0; i < in; ++i) {
      contract_parts(dy.data() + o, s_out, x.data() + i, s_in, g.dw.part_lengths,
                     &g.dw.terms[o * in + i]);
    }
  }
  finish_values(g.dw);

  g.db.operands = Operands::unit;
  g.db.part_lengths = {tokens};
  if (has_bias) {
    g.db.value = Tensor<R>({out});
    g.db.terms.resize(out);
    for (std::size_t o = 0; o < out; ++o) {
      contract_parts<R>(dy.data() + o, s_out, nullptr, 0, g.db.part_lengths, &g.db.terms[o]);
    }
    finish_values(g.db);
  }
  return g;
}

// The same, from storage-typed tensors (converted exactly).
template <class R = hp, StorageFloat T>
Contraction<R> linear(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b,
                      std::span<const std::size_t> in_parts = {}) {
  return linear<R>(to_hp<R>(x), to_hp<R>(w), to_hp<R>(b), in_parts);
}

template <class R = hp, StorageFloat T>
LinearBackward<R> linear_backward(const Tensor<T>& x, const Tensor<T>& w, bool has_bias,
                                  const Tensor<T>& dy,
                                  std::span<const std::size_t> out_parts = {}) {
  return linear_backward<R>(to_hp<R>(x), to_hp<R>(w), has_bias, to_hp<R>(dy), out_parts);
}

}  // namespace shardcheck::reference
