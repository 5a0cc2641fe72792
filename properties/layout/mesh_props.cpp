// Device meshes and n-D local pieces (lib/layout/device_mesh.hpp, lib/layout/sharding.hpp):
// coordinates, sub-groups along each dimension, collectives on different dimensions in one
// program, and where every rank's piece of a sharded tensor sits.
#include "layout/device_mesh.hpp"
#include "layout/materialize_mesh.hpp"
#include "layout/sharding.hpp"
#include "layout_test_support.hpp"
#include "runtime/errors.hpp"
#include "runtime/launcher.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

namespace shardcheck {
namespace {

using layout_test::expect_usage_error;
using layout_test::kMeshNames;

// A mesh of 1..3 dimensions, each of size 1..4, with distinct names from pp/dp/cp/tp.
rc::Gen<DeviceMesh> genMesh(int max_ndim = 3) {
  return rc::gen::exec([max_ndim] {
    const auto n = static_cast<std::size_t>(*rc::gen::inRange(1, max_ndim + 1));
    const auto picked = *rc::gen::unique<std::vector<int>>(n, rc::gen::inRange(0, 4));
    std::vector<MeshDim> dims;
    dims.reserve(picked.size());
    for (const int k : picked) dims.push_back({kMeshNames[k], *rc::gen::inRange(1, 5)});
    return DeviceMesh(dims);
  });
}

rc::Gen<SplitPolicy> genPolicy() {
  return rc::gen::element(SplitPolicy::chunk(), SplitPolicy::balanced());
}

RC_GTEST_PROP(mesh, coordinates_and_rank_of_are_inverse, ()) {
  const auto mesh = *genMesh();
  for (int r = 0; r < mesh.world_size(); ++r) {
    const auto c = mesh.coordinates(r);
    RC_ASSERT(mesh.rank_of(c) == r);
    for (std::size_t i = 0; i < mesh.ndim(); ++i) {
      // The group along i lists, by coordinate, the ranks that share every other coordinate.
      const auto g = mesh.group_along(i, r);
      RC_ASSERT(g.size() == static_cast<std::size_t>(mesh.size(i)));
      RC_ASSERT(g[static_cast<std::size_t>(c[i])] == r);
      for (std::size_t k = 0; k < g.size(); ++k) {
        auto ck = mesh.coordinates(g[k]);
        RC_ASSERT(ck[i] == static_cast<int>(k));
        ck[i] = c[i];
        RC_ASSERT(ck == c);
      }
    }
  }
}

TEST(mesh, row_major_numbering_as_megatron) {
  const DeviceMesh mesh({{"pp", 2}, {"dp", 2}, {"tp", 4}});
  EXPECT_EQ(mesh.world_size(), 16);
  EXPECT_EQ(mesh.to_string(), "(pp=2, dp=2, tp=4)");
  EXPECT_EQ(mesh.coordinates(13), (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(mesh.group_along(2, 5), (std::vector<int>{4, 5, 6, 7}));  // tp: consecutive
  EXPECT_EQ(mesh.group_along(1, 5), (std::vector<int>{1, 5}));        // dp: stride 4
  EXPECT_EQ(mesh.group_along(0, 5), (std::vector<int>{5, 13}));       // pp: stride 8
  EXPECT_EQ(mesh.index_of("dp"), 1U);
}

TEST(mesh, bad_meshes_are_usage_errors) {
  expect_usage_error([] { DeviceMesh({}); }, {"at least one dimension"});
  expect_usage_error([] { DeviceMesh({{"tp", 2}, {"tp", 2}}); }, {"(tp=2, tp=2)", "twice"});
  expect_usage_error([] { DeviceMesh({{"tp", 0}}); }, {"tp has size 0"});
  expect_usage_error([] { DeviceMesh({{"", 2}}); }, {"empty name"});
  expect_usage_error(
      [] {
        DeviceMesh({{"dp", 2}, {"tp", 3}}, 8);
      },
      {"(dp=2, tp=3)", "multiply to 6", "world has 8"});
  const DeviceMesh m({{"dp", 2}, {"tp", 2}});
  expect_usage_error([&] { (void)m.index_of("cp"); }, {"(dp=2, tp=2)", "'cp'"});
  expect_usage_error([&] { (void)m.coordinates(4); }, {"rank 4"});
  expect_usage_error([&] { (void)m.rank_of({0, 2}); }, {"coordinate 2", "tp"});
}

// Every dimension's group carries its own collectives: an all_reduce of the world rank along
// each dimension, interleaved in one program, gives each group's own sum.
RC_GTEST_PROP(mesh, collectives_on_different_dimensions_do_not_interfere, ()) {
  const auto mesh = *genMesh();
  const auto order = *rc::gen::container<std::vector<std::size_t>>(
      static_cast<std::size_t>(*rc::gen::inRange(1, 7)),
      rc::gen::inRange<std::size_t>(0, mesh.ndim()));
  std::mutex mu;
  std::vector<std::string> failures;
  run(mesh.world_size(), [&](Communicator& world) {
    MeshGroups groups(world, mesh);
    for (const std::size_t i : order) {
      Communicator& g = groups.along(i);
      std::vector<std::int64_t> x = {world.rank(), 1};
      g.all_reduce(std::span<std::int64_t>(x), ReduceOp::sum);
      const auto members = mesh.group_along(i, world.rank());
      const std::int64_t want = std::accumulate(members.begin(), members.end(), std::int64_t{0});
      if (g.rank() != groups.coordinates()[i] || x[0] != want || x[1] != mesh.size(i)) {
        const std::lock_guard lock(mu);
        failures.push_back("rank " + std::to_string(world.rank()) + " along " + mesh.dim(i).name +
                           ": sum " + std::to_string(x[0]) + ", want " + std::to_string(want));
      }
    }
  });
  RC_ASSERT(failures.empty());
}

TEST(mesh, mesh_groups_refuse_a_mesh_of_another_size) {
  try {
    run(4, [](Communicator& world) { MeshGroups g(world, DeviceMesh({{"dp", 2}, {"tp", 3}})); });
    ADD_FAILURE() << "no error";
  } catch (const RankFailure& e) {
    EXPECT_NE(std::string(e.what()).find("(dp=2, tp=3) has 6 ranks but the communicator has 4"),
              std::string::npos)
        << e.what();
  }
}

// ------------------------------------------------------------------------ local pieces

TEST(sharding, nested_shards_of_one_dimension_cut_the_piece_again) {
  const DeviceMesh mesh({{"dp", 2}, {"tp", 2}});
  const std::vector<Placement> p = {Placement::shard(0), Placement::shard(0)};
  std::vector<std::size_t> sizes, offsets;
  for (int r = 0; r < 4; ++r) {
    const auto piece = local_piece({5, 3}, mesh, p, mesh.coordinates(r));
    sizes.push_back(piece.shape[0]);
    offsets.push_back(piece.offset[0]);
    EXPECT_EQ(piece.shape[1], 3U);
  }
  EXPECT_EQ(sizes, (std::vector<std::size_t>{2, 1, 1, 1}));  // not the flat 2, 2, 1, 0
  EXPECT_EQ(offsets, (std::vector<std::size_t>{0, 2, 3, 4}));
  EXPECT_EQ(format_placements(p), "[S(0), S(0)]");
}

// pytorch issue 161368: 2-D uneven sharding of two tensor dimensions.
TEST(sharding, two_dimensions_sharded_unevenly) {
  const DeviceMesh mesh({{"dp", 2}, {"tp", 3}});
  const std::vector<Placement> p = {Placement::shard(1), Placement::shard(0)};
  const auto piece = local_piece({7, 5}, mesh, p, {1, 2});
  EXPECT_EQ(piece.shape, (Shape{1, 2}));  // rows: chunk 7/3 = 3,3,1; cols: chunk 5/2 = 3,2
  EXPECT_EQ(piece.offset, (Shape{6, 3}));
}

// Over the ranks of a mesh, the pieces of a Shard/Replicate layout cover every element of the
// global tensor exactly (product of the replicating dimensions' sizes) times, and each piece
// fits inside the global shape.
RC_GTEST_PROP(sharding, pieces_tile_the_global_tensor, ()) {
  const auto mesh = *genMesh();
  const auto ndim = static_cast<std::size_t>(*rc::gen::inRange(1, 4));
  const auto global = *rc::gen::container<Shape>(ndim, rc::gen::inRange<std::size_t>(0, 8));
  std::vector<Placement> p;
  int replicas = 1;
  for (std::size_t i = 0; i < mesh.ndim(); ++i) {
    if (*rc::gen::inRange(0, 3) == 0) {
      p.push_back(Placement::replicate());
      replicas *= mesh.size(i);
    } else {
      p.push_back(Placement::shard(*rc::gen::inRange<std::size_t>(0, ndim), *genPolicy()));
    }
  }
  bool nested = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      nested = nested || (p[i].is_shard() && p[j].is_shard() && p[i].dim() == p[j].dim());
    }
  }
  RC_TAG(mesh.ndim());
  RC_CLASSIFY(nested, "one tensor dimension sharded by two mesh dimensions");
  std::map<Shape, int> count;
  for (int r = 0; r < mesh.world_size(); ++r) {
    const auto piece = local_piece(global, mesh, p, mesh.coordinates(r));
    for (std::size_t d = 0; d < ndim; ++d) RC_ASSERT(piece.offset[d] + piece.shape[d] <= global[d]);
    if (numel(piece.shape) == 0) continue;
    Shape idx(ndim, 0);
    for (std::size_t k = 0; k < numel(piece.shape); ++k) {
      std::size_t rest = k;
      for (std::size_t d = ndim; d-- > 0;) {
        idx[d] = piece.offset[d] + rest % piece.shape[d];
        rest /= piece.shape[d];
      }
      ++count[idx];
    }
  }
  RC_ASSERT(count.size() == numel(global));
  for (const auto& [idx, n] : count) RC_ASSERT(n == replicas);
}

TEST(sharding, bad_layouts_are_usage_errors) {
  const DeviceMesh mesh({{"dp", 2}, {"tp", 2}});
  expect_usage_error(
      [&] {
        local_piece({4}, mesh, {Placement::shard(0)}, {0, 0});
      },
      {"[4]", "(dp=2, tp=2)", "[S(0)]", "1 placements for a 2-D mesh"});
  expect_usage_error(
      [&] {
        local_piece({4}, mesh, {Placement::shard(1), Placement::replicate()}, {0, 0});
      },
      {"S(1)", "dp", "tensor dimension 1", "tensor has 1"});
  expect_usage_error(
      [&] {
        local_piece({5}, mesh,
                    {Placement::shard(0), Placement::shard(0, SplitPolicy::explicit_sizes({2, 1}))},
                    {1, 0});
      },
      {"[S(0), S(0)[explicit[2,1]]]", "cuts a piece of 2 elements"});
}

// ------------------------------------------------------------------------ materialize

// The part of `x` that `piece` covers.
Tensor<double> cut(const Tensor<double>& x, const LocalPiece& piece) {
  Tensor<double> out(piece.shape);
  const std::size_t nd = x.ndim();
  Shape idx(nd, 0);
  for (std::size_t k = 0; k < out.size(); ++k) {
    std::size_t rest = k;
    for (std::size_t d = nd; d-- > 0;) {
      idx[d] = rest % piece.shape[d];
      rest /= piece.shape[d];
    }
    std::size_t flat = 0;
    for (std::size_t d = 0; d < nd; ++d) flat = flat * x.dim(d) + piece.offset[d] + idx[d];
    out.data()[k] = x.data()[flat];
  }
  return out;
}

struct MeshLayout {
  DeviceMesh mesh;
  std::vector<Placement> placements;
  Shape global;
};

rc::Gen<MeshLayout> genLayout(bool with_partial) {
  return rc::gen::exec([with_partial] {
    const auto mesh = *genMesh();
    const auto ndim = static_cast<std::size_t>(*rc::gen::inRange(1, 4));
    auto global = *rc::gen::container<Shape>(ndim, rc::gen::inRange<std::size_t>(0, 7));
    std::vector<Placement> p;
    for (std::size_t i = 0; i < mesh.ndim(); ++i) {
      const int kind = *rc::gen::inRange(0, with_partial ? 4 : 3);
      if (kind == 0) p.push_back(Placement::replicate());
      else if (kind == 3) p.push_back(Placement::partial(ReduceOp::sum));
      else p.push_back(Placement::shard(*rc::gen::inRange<std::size_t>(0, ndim), *genPolicy()));
    }
    return MeshLayout{mesh, p, global};
  });
}

Tensor<double> iota_tensor(const Shape& s, double start) {
  Tensor<double> t(s);
  for (std::size_t k = 0; k < t.size(); ++k) t.data()[k] = start + static_cast<double>(k);
  return t;
}

// Data movement is exact: cutting x by every rank's piece and materializing gives x back,
// bit for bit, for any Shard/Replicate layout on 1-D to 3-D meshes.
RC_GTEST_PROP(materialize, pieces_cut_from_x_materialize_to_x, ()) {
  const auto l = *genLayout(false);
  const auto x = iota_tensor(l.global, 1.0);
  std::vector<Tensor<double>> pieces;
  pieces.reserve(static_cast<std::size_t>(l.mesh.world_size()));
  for (int r = 0; r < l.mesh.world_size(); ++r) {
    pieces.push_back(cut(x, local_piece(l.global, l.mesh, l.placements, l.mesh.coordinates(r))));
  }
  const auto m = materialize(pieces, l.mesh, l.placements, l.global);
  RC_ASSERT(bit_equal(m.global(), x));
  RC_ASSERT(m.divergent_ranks.empty());
}

// A replica that differs in one element is named; a mutant materialize that took any replica
// without comparing would pass it silently.
RC_GTEST_PROP(materialize, a_divergent_replica_is_named, ()) {
  auto l = *genLayout(false);
  // Force one replicated mesh dimension of size >= 2 and a non-empty tensor.
  const auto j = *rc::gen::inRange<std::size_t>(0, l.mesh.ndim());
  auto dims = l.mesh.dims();
  dims[j].size = std::max(dims[j].size, 2);
  l.mesh = DeviceMesh(dims);
  l.placements[j] = Placement::replicate();
  for (auto& n : l.global) n = std::max<std::size_t>(n, 1);
  const auto x = iota_tensor(l.global, 1.0);
  std::vector<Tensor<double>> pieces;
  pieces.reserve(static_cast<std::size_t>(l.mesh.world_size()));
  for (int r = 0; r < l.mesh.world_size(); ++r) {
    pieces.push_back(cut(x, local_piece(l.global, l.mesh, l.placements, l.mesh.coordinates(r))));
  }
  // Coordinates 0 everywhere but 1 along j: a second replica of rank 0's (non-empty) piece.
  std::vector<int> c(l.mesh.ndim(), 0);
  c[j] = 1;
  const int victim = l.mesh.rank_of(c);
  pieces[static_cast<std::size_t>(victim)].data()[0] += 0.5;
  const auto m = materialize(pieces, l.mesh, l.placements, l.global);
  RC_ASSERT(m.divergent_ranks == std::vector<int>{victim});
}

// Partial dimensions give one assembled term per combination of partial coordinates,
// unreduced (the reference reduces them in high precision).
RC_GTEST_PROP(materialize, partial_terms_are_assembled_not_reduced, ()) {
  const auto l = *genLayout(true);
  std::vector<std::size_t> partial;
  std::size_t n_terms = 1;
  for (std::size_t i = 0; i < l.mesh.ndim(); ++i) {
    if (l.placements[i].is_partial()) {
      partial.push_back(i);
      n_terms *= static_cast<std::size_t>(l.mesh.size(i));
    }
  }
  RC_CLASSIFY(!partial.empty(), "partial");
  std::vector<Tensor<double>> terms;
  for (std::size_t t = 0; t < n_terms; ++t) {
    terms.push_back(iota_tensor(l.global, 1000.0 * static_cast<double>(t)));
  }
  std::vector<Tensor<double>> pieces;
  for (int r = 0; r < l.mesh.world_size(); ++r) {
    const auto c = l.mesh.coordinates(r);
    const std::size_t t = layout_test::partial_term(l.mesh, partial, c);
    pieces.push_back(cut(terms[t], local_piece(l.global, l.mesh, l.placements, c)));
  }
  const auto m = materialize(pieces, l.mesh, l.placements, l.global);
  RC_ASSERT(m.terms.size() == n_terms);
  for (std::size_t t = 0; t < n_terms; ++t) RC_ASSERT(bit_equal(m.terms[t], terms[t]));
  RC_ASSERT(m.reduce_op.has_value() == !partial.empty());
}

// Shard and Partial pieces of identical local shape stand for different tensors: the
// semantics live in the placement.
TEST(materialize, identical_local_shapes_do_not_determine_the_tensor) {
  const DeviceMesh mesh = DeviceMesh::line(2);
  const std::vector<Tensor<double>> pieces = {iota_tensor({2, 3}, 0), iota_tensor({2, 3}, 10)};
  const auto as_shard = materialize(pieces, mesh, {Placement::shard(0)}, {4, 3});
  const auto as_partial = materialize(pieces, mesh, {Placement::partial()}, {2, 3});
  EXPECT_EQ(as_shard.global().shape(), (Shape{4, 3}));
  EXPECT_EQ(as_partial.terms.size(), 2U);
  expect_usage_error([&] { (void)as_partial.global(); }, {"Partial(sum)", "2 terms"});
}

TEST(materialize, a_piece_of_the_wrong_shape_is_a_usage_error) {
  const DeviceMesh mesh({{"dp", 2}, {"tp", 2}});
  std::vector<Tensor<double>> pieces(4, Tensor<double>({2, 3}));
  pieces[3] = Tensor<double>({1, 3});
  expect_usage_error(
      [&] {
        materialize(pieces, mesh, {Placement::replicate(), Placement::shard(0)}, {4, 3});
      },
      {"[R, S(0)] on mesh (dp=2, tp=2)", "rank 3 (dp=1, tp=1) holds [1, 3]", "piece is [2, 3]"});
  expect_usage_error(
      [&] {
        materialize(std::vector<Tensor<double>>(3), mesh,
                    {Placement::replicate(), Placement::replicate()}, {4});
      },
      {"3 pieces for 4 ranks"});
}

}  // namespace
}  // namespace shardcheck
