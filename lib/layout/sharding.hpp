// Where a rank's piece of a distributed tensor sits: its local shape and its global offset,
// for a global shape, a device mesh and one placement per mesh dimension ("[S(0), R]" on mesh
// "(dp=2, tp=4)").
//
// Semantics (PyTorch DTensor): placements apply in mesh-dimension order. Shard(d) on mesh
// dimension i cuts the piece the earlier dimensions left along tensor dimension d into
// mesh.size(i) parts by its split policy and keeps part coords[i]. When two mesh dimensions
// shard the same tensor dimension the cuts nest: [S(0), S(0)] of 5 rows on mesh (2, 2) cuts
// 5 -> 3 | 2 by torch.chunk, then 3 -> 2 | 1 and 2 -> 1 | 1: sizes 2, 1, 1, 1, not the flat
// chunk of 5 over 4 (2, 2, 1, 0). PyTorch's compute_local_shape_and_global_offset got the
// offsets of this case wrong for uneven sizes (pytorch issue 161368); here the offset is the
// sum of the offsets of every nested cut. Replicate and Partial leave the piece as it is
// (a Partial piece is full-shape: its values are one term of the reduction).
#pragma once

#include "layout/device_mesh.hpp"
#include "layout/placement.hpp"
#include "tensor/tensor.hpp"

#include <string>
#include <vector>

namespace shardcheck {

struct LocalPiece {
  Shape shape;   // the local tensor's shape
  Shape offset;  // where its element [0, ..., 0] sits in the global tensor
  friend bool operator==(const LocalPiece&, const LocalPiece&) = default;
};

// "[S(0), R, P(sum)]"
std::string format_placements(const std::vector<Placement>& placements);

// The piece of the rank at mesh coordinates `coords`.
// @throws UsageError when placements.size() != mesh.ndim(), a Shard names a dimension the
//         tensor does not have, or an explicit split does not tile the piece it cuts; the
//         message names the global shape, the mesh, the placements and what to change.
LocalPiece local_piece(const Shape& global, const DeviceMesh& mesh,
                       const std::vector<Placement>& placements, const std::vector<int>& coords);

}  // namespace shardcheck
