// materialize on a device mesh: the global tensor that the ranks' pieces stand for, given one
// placement per mesh dimension ("[S(0), R, P(sum)]" on "(pp=2, dp=2, tp=4)"). The ground truth
// that redistribution and every later mesh-level check compare against.
//
//   Shard(d)     the pieces are put at the offsets local_piece() gives (nested cuts included)
//   Replicate    ranks that differ only in replicated coordinates must hold the same bits;
//                the lowest such coordinate's piece is used, the others listed as divergent
//   Partial(op)  ranks that differ in partial coordinates hold terms of a reduction. The terms
//                are returned assembled (one global tensor per combination of partial
//                coordinates, in row-major order of those coordinates) and NOT reduced here:
//                reducing in T would round, and the ground truth must not. The reference
//                reduces them in high precision; `reduce_op` says how.
// Every piece's shape is checked against local_piece() first.
#pragma once

#include "layout/device_mesh.hpp"
#include "layout/placement.hpp"
#include "layout/sharding.hpp"
#include "runtime/errors.hpp"
#include "tensor/tensor.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace shardcheck {

template <class T>
struct MeshMaterialized {
  // The assembled global tensor of each combination of partial coordinates: one tensor when
  // no mesh dimension is Partial.
  std::vector<Tensor<T>> terms;
  std::optional<ReduceOp> reduce_op;  // set when some mesh dimension is Partial
  // Ranks (mesh ranks) whose piece differs in some bit from the replica it must equal.
  std::vector<int> divergent_ranks;

  // The global tensor of a layout without Partial. @throws UsageError otherwise.
  const Tensor<T>& global() const {
    if (reduce_op) {
      throw UsageError("materialize: the layout has Partial(" + std::string(name(*reduce_op)) +
                       ") dimensions; its " + std::to_string(terms.size()) +
                       " terms must be reduced (in high precision) to give the global tensor");
    }
    return terms.at(0);
  }
};

// pieces[r] is mesh rank r's local tensor (mesh.world_size() of them).
// @throws UsageError when the count or a piece's shape is wrong (naming the rank, its
//         coordinates, both shapes and the layout), or Partial dimensions use different ops.
template <class T>
MeshMaterialized<T> materialize(const std::vector<Tensor<T>>& pieces, const DeviceMesh& mesh,
                                const std::vector<Placement>& placements, const Shape& global) {
  const std::string layout = format_placements(placements) + " on mesh " + mesh.to_string() +
                             ", global shape " + format_shape(global);
  if (pieces.size() != static_cast<std::size_t>(mesh.world_size())) {
    throw UsageError("materialize " + layout + ": " + std::to_string(pieces.size()) +
                     " pieces for " + std::to_string(mesh.world_size()) +
                     " ranks; pass one piece per mesh rank");
  }
  MeshMaterialized<T> out;
  std::vector<std::size_t> partial_dims;
  for (std::size_t i = 0; i < placements.size() && i < mesh.ndim(); ++i) {
    if (!placements[i].is_partial()) continue;
    if (out.reduce_op && *out.reduce_op != placements[i].reduce_op()) {
      throw UsageError("materialize " + layout +
                       ": Partial dimensions with different reduce ops (" +
                       std::string(name(*out.reduce_op)) + " and " +
                       std::string(name(placements[i].reduce_op())) + " on " + mesh.dim(i).name +
                       "); redistribute one of them first");
    }
    out.reduce_op = placements[i].reduce_op();
    partial_dims.push_back(i);
  }
  std::size_t n_terms = 1;
  for (const auto i : partial_dims) n_terms *= static_cast<std::size_t>(mesh.size(i));
  out.terms.assign(n_terms, Tensor<T>(global));
  // The first rank seen for each (term, shard coordinates): replicas are compared with it.
  std::vector<int> first_of_slot(static_cast<std::size_t>(mesh.world_size()), -1);

  const std::size_t nd = global.size();
  for (int r = 0; r < mesh.world_size(); ++r) {
    const auto coords = mesh.coordinates(r);
    const auto piece = local_piece(global, mesh, placements, coords);
    const auto& local = pieces[static_cast<std::size_t>(r)];
    if (local.shape() != piece.shape) {
      std::string c;
      for (std::size_t i = 0; i < coords.size(); ++i) {
        c += (i != 0 ? ", " : "") + mesh.dim(i).name + "=" + std::to_string(coords[i]);
      }
      // NOLINTNEXTLINE(performance-inefficient-string-concatenation): once, as the loop throws
      throw UsageError("materialize " + layout + ": rank " + std::to_string(r) + " (" + c +
                       ") holds " + format_shape(local.shape()) + " but its piece is " +
                       format_shape(piece.shape) + " at offset " + format_shape(piece.offset));
    }
    // Which term (partial coordinates) and which replica slot (every non-replicated
    // coordinate) this rank fills.
    std::size_t term = 0;
    for (const auto i : partial_dims) {
      term = term * static_cast<std::size_t>(mesh.size(i)) + static_cast<std::size_t>(coords[i]);
    }
    auto slot_coords = coords;
    for (std::size_t i = 0; i < mesh.ndim(); ++i) {
      if (placements[i].is_replicate()) slot_coords[i] = 0;
    }
    const int slot = mesh.rank_of(slot_coords);
    auto& first = first_of_slot[static_cast<std::size_t>(slot)];
    if (first >= 0) {
      if (!bit_equal(local, pieces[static_cast<std::size_t>(first)])) {
        out.divergent_ranks.push_back(r);
      }
      continue;
    }
    first = r;
    // Copy the piece into its place, row by row along the last dimension.
    Tensor<T>& dst = out.terms[term];
    const std::size_t n = numel(piece.shape);
    if (n == 0) continue;
    const std::size_t row = nd == 0 ? 1 : piece.shape[nd - 1];
    Shape idx(nd, 0);
    for (std::size_t k = 0; k < n; k += row) {
      std::size_t rest = k;
      std::size_t flat = 0;
      for (std::size_t d = nd; d-- > 0;) {
        idx[d] = rest % piece.shape[d];
        rest /= piece.shape[d];
      }
      for (std::size_t d = 0; d < nd; ++d) flat = flat * global[d] + piece.offset[d] + idx[d];
      std::copy(local.data() + k, local.data() + k + row, dst.data() + flat);
    }
  }
  return out;
}

}  // namespace shardcheck
