// materialize: the global tensor that the ranks' pieces stand for, by their placement on a
// one-dimensional group. This is the ground truth every check compares against the reference.
// (Device meshes with one placement per dimension arrive with the layout issue.)
#pragma once

#include "layout/placement.hpp"
#include "layout/split_policy.hpp"
#include "tensor/tensor.hpp"

#include <cstring>
#include <string>
#include <vector>

namespace shardcheck {

template <class T>
struct Materialized {
  Tensor<T> global;
  // Replicate: the ranks whose piece differs in any bit from rank 0's (a replicated result
  // must be bit-identical on every rank). Empty otherwise.
  std::vector<int> divergent_ranks;
};

// The rank that holds element `index` (a multi-index into the global shape) under `p`, and how
// many elements it lies from the nearest edge of that rank's piece along the sharded dimension
// (0: the piece's first or last element). Replicate and Partial: every rank holds it: owner -1.
struct Owner {
  int rank = -1;
  std::size_t boundary_distance = 0;
};
inline Owner owner_of(const Shape& global_shape, const Shape& index, const Placement& p,
                      int parts) {
  if (!p.is_shard()) return {};
  const auto pieces = split(p.policy(), global_shape.at(p.dim()), parts);
  const std::size_t i = index.at(p.dim());
  for (std::size_t r = 0; r < pieces.size(); ++r) {
    const auto& pc = pieces[r];
    if (i >= pc.offset && i < pc.offset + pc.size) {
      return {static_cast<int>(r), std::min(i - pc.offset, pc.offset + pc.size - 1 - i)};
    }
  }
  return {};
}

// Rebuilds the global tensor of shape `global_shape` from pieces[r] (rank r's local tensor).
//   Shard(d): pieces concatenated along d; piece r must have the global shape with dimension d
//             replaced by the split's size for r.
//   Replicate: rank 0's piece; every piece must have the global shape; divergent_ranks lists
//             the ranks whose bits differ.
// @throws UsageError naming the rank and both shapes when a piece has the wrong shape, and for
//         Partial (its reduction is the reference's job, in high precision).
template <class T>
Materialized<T> materialize(const std::vector<Tensor<T>>& pieces, const Placement& p,
                            const Shape& global_shape) {
  const int parts = static_cast<int>(pieces.size());
  Materialized<T> out;
  if (p.is_partial()) {
    throw UsageError("materialize: " + p.to_string() +
                     " pieces are terms of a reduction, not pieces of the tensor; reduce them "
                     "(the reference does, in high precision) instead of materializing");
  }
  if (p.is_replicate()) {
    for (int r = 0; r < parts; ++r) {
      if (pieces[static_cast<std::size_t>(r)].shape() != global_shape) {
        throw UsageError("materialize R: rank " + std::to_string(r) + " holds " +
                         format_shape(pieces[static_cast<std::size_t>(r)].shape()) +
                         " but a replicated tensor must have the global shape " +
                         format_shape(global_shape) + " on every rank; pass each rank's full copy");
      }
      if (r > 0 && !bit_equal(pieces[static_cast<std::size_t>(r)], pieces[0])) {
        out.divergent_ranks.push_back(r);
      }
    }
    out.global = pieces.at(0);
    return out;
  }
  const std::size_t d = p.dim();
  if (d >= global_shape.size()) {
    throw UsageError("materialize " + p.to_string() + ": the global shape " +
                     format_shape(global_shape) + " has no dimension " + std::to_string(d) +
                     "; shard a dimension below " + std::to_string(global_shape.size()));
  }
  const auto split_pieces = split(p.policy(), global_shape[d], parts);
  // outer = product of dims before d, inner = product of dims after d.
  std::size_t outer = 1;
  std::size_t inner = 1;
  for (std::size_t k = 0; k < d; ++k) outer *= global_shape[k];
  for (std::size_t k = d + 1; k < global_shape.size(); ++k) inner *= global_shape[k];
  out.global = Tensor<T>(global_shape);
  for (int r = 0; r < parts; ++r) {
    const auto& piece = pieces[static_cast<std::size_t>(r)];
    Shape expect = global_shape;
    expect[d] = split_pieces[static_cast<std::size_t>(r)].size;
    if (piece.shape() != expect) {
      throw UsageError("materialize " + p.to_string() + ": rank " + std::to_string(r) + " holds " +
                       format_shape(piece.shape()) + " but its piece of " +
                       format_shape(global_shape) + " under " + p.policy().to_string() + " over " +
                       std::to_string(parts) + " ranks is " + format_shape(expect) +
                       "; pass rank r the piece split() gives it");
    }
    const std::size_t len = expect[d] * inner;
    const std::size_t off = split_pieces[static_cast<std::size_t>(r)].offset * inner;
    for (std::size_t o = 0; o < outer; ++o) {
      if (len == 0) break;
      std::memcpy(out.global.data() + o * global_shape[d] * inner + off, piece.data() + o * len,
                  len * sizeof(T));
    }
  }
  return out;
}

}  // namespace shardcheck
