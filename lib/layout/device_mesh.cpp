#include "layout/device_mesh.hpp"

#include "runtime/errors.hpp"

#include <set>

namespace shardcheck {
namespace {

std::string describe(const std::vector<MeshDim>& dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i != 0) s += ", ";
    s += dims[i].name + "=" + std::to_string(dims[i].size);
  }
  return s + ")";
}

}  // namespace

DeviceMesh::DeviceMesh(std::vector<MeshDim> dims, int world_size) : dims_(std::move(dims)) {
  if (dims_.empty()) {
    throw UsageError("DeviceMesh: a mesh needs at least one dimension, e.g. {{\"tp\", 4}}");
  }
  std::set<std::string> names;
  long long product = 1;
  for (const auto& d : dims_) {
    if (d.name.empty()) {
      throw UsageError("DeviceMesh " + describe(dims_) +
                       ": a dimension has an empty name; name "
                       "every dimension (pp, dp, cp, tp, ...)");
    }
    if (!names.insert(d.name).second) {
      throw UsageError("DeviceMesh " + describe(dims_) + ": dimension name '" + d.name +
                       "' appears twice; names must be distinct");
    }
    if (d.size < 1) {
      throw UsageError("DeviceMesh " + describe(dims_) + ": dimension " + d.name + " has size " +
                       std::to_string(d.size) + "; every size must be at least 1");
    }
    product *= d.size;
    if (product > (1 << 20)) {
      throw UsageError("DeviceMesh " + describe(dims_) +
                       ": the sizes multiply to more than 2^20 = " + std::to_string(1 << 20) +
                       " ranks; choose smaller sizes");
    }
  }
  world_size_ = static_cast<int>(product);
  if (world_size > 0 && world_size_ != world_size) {
    throw UsageError("DeviceMesh " + describe(dims_) + ": the sizes multiply to " +
                     std::to_string(world_size_) + " ranks but the world has " +
                     std::to_string(world_size) + "; choose sizes whose product is " +
                     std::to_string(world_size));
  }
}

std::size_t DeviceMesh::index_of(const std::string& name) const {
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i].name == name) return i;
  }
  throw UsageError("DeviceMesh " + to_string() + " has no dimension named '" + name +
                   "'; use one of the names it lists, or add the dimension to the mesh");
}

std::vector<int> DeviceMesh::coordinates(int world_rank) const {
  if (world_rank < 0 || world_rank >= world_size_) {
    throw UsageError("DeviceMesh " + to_string() + ": rank " + std::to_string(world_rank) +
                     " is not in [0, " + std::to_string(world_size_) +
                     "); pass a rank of the mesh's world (the sizes' product)");
  }
  std::vector<int> c(dims_.size());
  int r = world_rank;
  for (std::size_t i = dims_.size(); i-- > 0;) {
    c[i] = r % dims_[i].size;
    r /= dims_[i].size;
  }
  return c;
}

int DeviceMesh::rank_of(const std::vector<int>& coords) const {
  if (coords.size() != dims_.size()) {
    throw UsageError("DeviceMesh " + to_string() + ": " + std::to_string(coords.size()) +
                     " coordinates given for a " + std::to_string(dims_.size()) +
                     "-D mesh; give one coordinate per mesh dimension");
  }
  int r = 0;
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (coords[i] < 0 || coords[i] >= dims_[i].size) {
      throw UsageError("DeviceMesh " + to_string() + ": coordinate " + std::to_string(coords[i]) +
                       " along " + dims_[i].name + " is not in [0, " +
                       std::to_string(dims_[i].size) + "); pass 0 <= coordinate < the size of " +
                       dims_[i].name);
    }
    r = r * dims_[i].size + coords[i];
  }
  return r;
}

std::vector<int> DeviceMesh::group_along(std::size_t i, int world_rank) const {
  auto c = coordinates(world_rank);
  std::vector<int> members(static_cast<std::size_t>(dim(i).size));
  for (int k = 0; k < dims_[i].size; ++k) {
    c[i] = k;
    members[static_cast<std::size_t>(k)] = rank_of(c);
  }
  return members;
}

std::string DeviceMesh::to_string() const { return describe(dims_); }

MeshGroups::MeshGroups(Communicator& world, DeviceMesh mesh)
    : world_(world), mesh_(std::move(mesh)) {
  if (mesh_.world_size() != world.size()) {
    throw UsageError("rank " + std::to_string(world.rank()) + ": mesh " + mesh_.to_string() +
                     " has " + std::to_string(mesh_.world_size()) +
                     " ranks but the communicator has " + std::to_string(world.size()) +
                     "; build the mesh over the whole group");
  }
  coords_ = mesh_.coordinates(world.rank());
  for (std::size_t i = 0; i < mesh_.ndim(); ++i) {
    const auto members = mesh_.group_along(i, world.rank());
    groups_.push_back(world.group(members));
  }
}

}  // namespace shardcheck
