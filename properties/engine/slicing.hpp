// Cutting a global tensor into the pieces ranks are given: the suites prepare inputs with this,
// never with the library's own split helpers (a bug there must not hide itself).
#pragma once

#include "layout/placement.hpp"
#include "layout/split_policy.hpp"
#include "runtime/errors.hpp"
#include "tensor/tensor.hpp"

#include <cstring>
#include <vector>

namespace shardcheck::check {

// Elements [piece.offset, piece.offset + piece.size) of `t` along dimension `dim`.
template <class T>
Tensor<T> slice(const Tensor<T>& t, std::size_t dim, const Piece& piece) {
  Shape shape = t.shape();
  std::size_t outer = 1;
  std::size_t inner = 1;
  for (std::size_t k = 0; k < dim; ++k) outer *= shape[k];
  for (std::size_t k = dim + 1; k < shape.size(); ++k) inner *= shape[k];
  const std::size_t full = shape[dim];
  shape[dim] = piece.size;
  Tensor<T> out(shape);
  const std::size_t len = piece.size * inner;
  for (std::size_t o = 0; o < outer && len != 0; ++o) {
    std::memcpy(out.data() + o * len, t.data() + (o * full + piece.offset) * inner,
                len * sizeof(T));
  }
  return out;
}

// Rows [first, first + count) of `t` (its first dimension).
template <class T>
Tensor<T> rows(const Tensor<T>& t, std::size_t first, std::size_t count) {
  return slice(t, 0, Piece{first, count});
}

// Rank r's piece of `t` along `dim` under `policy` over `parts` ranks.
template <class T>
Tensor<T> shard(const Tensor<T>& t, std::size_t dim, const SplitPolicy& policy, int parts, int r) {
  return slice(t, dim, split(policy, t.shape().at(dim), parts).at(static_cast<std::size_t>(r)));
}

// Rank r's piece of the global `t` under `placement` over `parts` ranks (an op spec's input
// placement, ops/op_spec.hpp): S(d) its shard, R the whole tensor.
// @throws UsageError for Partial: a global tensor has no one set of partial terms.
template <class T>
Tensor<T> place(const Tensor<T>& t, const Placement& placement, int parts, int r) {
  if (placement.is_shard()) return shard(t, placement.dim(), placement.policy(), parts, r);
  if (placement.is_replicate()) return t;
  throw UsageError("place: an input placed " + placement.to_string() +
                   " has no one piece per rank; give inputs as Shard or Replicate");
}

}  // namespace shardcheck::check
