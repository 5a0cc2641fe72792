#include "layout/sharding.hpp"

#include "layout/split_policy.hpp"
#include "runtime/errors.hpp"

namespace shardcheck {

std::string format_placements(const std::vector<Placement>& placements) {
  std::string s = "[";
  for (std::size_t i = 0; i < placements.size(); ++i) {
    if (i != 0) s += ", ";
    s += placements[i].to_string();
  }
  return s + "]";
}

LocalPiece local_piece(const Shape& global, const DeviceMesh& mesh,
                       const std::vector<Placement>& placements, const std::vector<int>& coords) {
  const auto where = [&] {
    return "global shape " + format_shape(global) + " on mesh " + mesh.to_string() +
           " with placements " + format_placements(placements);
  };
  if (placements.size() != mesh.ndim()) {
    throw UsageError(where() + ": " + std::to_string(placements.size()) + " placements for a " +
                     std::to_string(mesh.ndim()) +
                     "-D mesh; give one placement per mesh dimension");
  }
  if (coords.size() != mesh.ndim()) {
    throw UsageError(where() + ": " + std::to_string(coords.size()) + " coordinates for a " +
                     std::to_string(mesh.ndim()) +
                     "-D mesh; give one coordinate per mesh dimension (mesh.coordinates(rank))");
  }
  LocalPiece piece{global, Shape(global.size(), 0)};
  for (std::size_t i = 0; i < mesh.ndim(); ++i) {
    const Placement& p = placements[i];
    if (!p.is_shard()) continue;
    const std::size_t d = p.dim();
    if (d >= global.size()) {
      throw UsageError(where() + ": " + p.to_string() + " on mesh dimension " + mesh.dim(i).name +
                       " shards tensor dimension " + std::to_string(d) + " but the tensor has " +
                       std::to_string(global.size()) + "; shard a dimension below " +
                       std::to_string(global.size()));
    }
    if (coords[i] < 0 || coords[i] >= mesh.size(i)) {
      throw UsageError(where() + ": coordinate " + std::to_string(coords[i]) + " along " +
                       mesh.dim(i).name + " is outside the mesh; pass 0 <= coordinate < " +
                       std::to_string(mesh.size(i)) + " (mesh.coordinates(rank))");
    }
    std::vector<Piece> cuts;
    try {
      cuts = split(p.policy(), piece.shape[d], mesh.size(i));
    } catch (const UsageError& e) {
      throw UsageError(where() + ": " + p.to_string() + " along " + mesh.dim(i).name +
                       " cuts a piece of " + std::to_string(piece.shape[d]) +
                       " elements (after the earlier mesh dimensions' cuts): " + e.what());
    }
    const Piece& mine = cuts[static_cast<std::size_t>(coords[i])];
    piece.offset[d] += mine.offset;
    piece.shape[d] = mine.size;
  }
  return piece;
}

}  // namespace shardcheck
