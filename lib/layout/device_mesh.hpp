// Device meshes: the world's ranks arranged as an n-D grid with named dimensions
// (PyTorch's DeviceMesh; Megatron's parallel_state). A mesh (pp=2, dp=2, tp=4) over 16 ranks
// numbers ranks row-major: the last dimension varies fastest, so world rank
//   r = ((c_pp * 2) + c_dp) * 4 + c_tp
// and the tp groups are runs of 4 consecutive ranks, as in Megatron-LM's default order.
//
// A mesh is a value (names and sizes); it knows nothing of communicators. MeshGroups turns it
// into one sub-communicator per dimension for the calling rank: the ranks that share every
// other coordinate, in coordinate order. Collectives on different dimensions' groups are
// separate groups of the runtime, so they never interfere.
//
// Printed "(dp=2, tp=4)" everywhere (logs, reports, docs), beside placements "[S(0), R]".
#pragma once

#include "runtime/communicator.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace shardcheck {

struct MeshDim {
  std::string name;  // "pp", "dp", "cp", "tp", or any other non-empty name
  int size = 1;      // >= 1
  friend bool operator==(const MeshDim&, const MeshDim&) = default;
};

class DeviceMesh {
 public:
  // @throws UsageError when a size is < 1, a name is empty or repeated, or (with world_size
  //         > 0) the sizes do not multiply to world_size; the message names the sizes.
  explicit DeviceMesh(std::vector<MeshDim> dims, int world_size = 0);
  // A 1-D mesh over `size` ranks named `name`.
  static DeviceMesh line(int size, std::string name = "tp") {
    return DeviceMesh({{std::move(name), size}});
  }

  std::size_t ndim() const noexcept { return dims_.size(); }
  const std::vector<MeshDim>& dims() const noexcept { return dims_; }
  const MeshDim& dim(std::size_t i) const { return dims_.at(i); }
  int size(std::size_t i) const { return dims_.at(i).size; }
  // The index of the dimension called `name`. @throws UsageError naming the mesh's dimensions.
  std::size_t index_of(const std::string& name) const;
  int world_size() const noexcept { return world_size_; }

  // Row-major: coordinates of world rank r, and back. @throws UsageError when out of range.
  std::vector<int> coordinates(int world_rank) const;
  int rank_of(const std::vector<int>& coords) const;

  // The world ranks that share every coordinate of `world_rank` except dimension i, ordered by
  // their coordinate along i (so a rank's position in the list is its coordinate).
  std::vector<int> group_along(std::size_t i, int world_rank) const;

  // "(dp=2, tp=4)"
  std::string to_string() const;

  friend bool operator==(const DeviceMesh&, const DeviceMesh&) = default;

 private:
  std::vector<MeshDim> dims_;
  int world_size_ = 1;
};

// One rank's communicators on a mesh: one per dimension. Every rank of the world constructs
// it, with the same mesh, at the same point of its program (group creation is per member and
// ordered, communicator.hpp).
class MeshGroups {
 public:
  // @throws UsageError when the mesh's size differs from the communicator's.
  MeshGroups(Communicator& world, DeviceMesh mesh);

  const DeviceMesh& mesh() const noexcept { return mesh_; }
  Communicator& world() const noexcept { return world_; }
  // This rank's sub-communicator along dimension i (its rank there is its coordinate).
  Communicator& along(std::size_t i) const { return *groups_.at(i); }
  Communicator& along(const std::string& name) const { return along(mesh_.index_of(name)); }
  const std::vector<int>& coordinates() const noexcept { return coords_; }

 private:
  Communicator& world_;
  DeviceMesh mesh_;
  std::vector<int> coords_;
  std::vector<std::unique_ptr<Communicator>> groups_;
};

}  // namespace shardcheck
