// The UsageErrors of meshes, local pieces, materialize, redistribute and Tensor not pinned by
// mesh_props.cpp and suites/redistribute/. Each case pins the parts of the message a user
// needs (the mesh, the layout, the shapes or sizes, and the fix) and, for an error raised on a
// rank, that it is a UsageError and the run's primary failure, on the rank at fault.
#include "layout/device_mesh.hpp"
#include "layout/materialize.hpp"
#include "layout/materialize_mesh.hpp"
#include "layout/redistribute.hpp"
#include "layout/sharding.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace shardcheck {
namespace {

using D = Tensor<double>;
using test::expect_usage_errors;

TEST(LayoutUsageErrors, meshes_pieces_and_tensors_name_the_layout_and_what_to_pass) {
  const DeviceMesh mesh({{"dp", 2}, {"tp", 2}});
  const auto R = Placement::replicate();
  expect_usage_errors(std::vector<test::UsageCase>{
      {"a mesh of more than 2^20 ranks",
       [] {
         DeviceMesh({{"a", 1024}, {"b", 1025}});
       },
       {"DeviceMesh (a=1024, b=1025): the sizes multiply to more than 2^20 = 1048576 ranks",
        "choose smaller sizes"}},
      {"a dimension the mesh lacks",
       [&] { (void)mesh.index_of("cp"); },
       {"DeviceMesh (dp=2, tp=2) has no dimension named 'cp'",
        "use one of the names it lists, or add the dimension to the mesh"}},
      {"a rank outside the mesh",
       [&] { (void)mesh.coordinates(4); },
       {"DeviceMesh (dp=2, tp=2): rank 4 is not in [0, 4)", "pass a rank of the mesh's world"}},
      {"too few coordinates",
       [&] { (void)mesh.rank_of({0}); },
       {"DeviceMesh (dp=2, tp=2): 1 coordinates given for a 2-D mesh",
        "give one coordinate per mesh dimension"}},
      {"a coordinate outside its dimension",
       [&] {
         (void)mesh.rank_of({0, 2});
       },
       {"coordinate 2 along tp is not in [0, 2)", "pass 0 <= coordinate < the size of tp"}},
      {"local_piece with too few coordinates",
       [&] {
         (void)local_piece({4}, mesh, {R, R}, {0});
       },
       {"global shape [4] on mesh (dp=2, tp=2) with placements [R, R]: 1 coordinates for a 2-D "
        "mesh",
        "give one coordinate per mesh dimension (mesh.coordinates(rank))"}},
      {"local_piece with a coordinate outside the mesh",
       [&] {
         (void)local_piece({4}, mesh, {Placement::shard(0), R}, {2, 0});
       },
       {"with placements [S(0), R]: coordinate 2 along dp is outside the mesh",
        "pass 0 <= coordinate < 2 (mesh.coordinates(rank))"}},
      {"materialize of Partial pieces",
       [] { (void)materialize(std::vector<D>(2, D({2})), Placement::partial(), {2}); },
       {"materialize: P(sum) pieces are terms of a reduction, not pieces of the tensor",
        "reduce them (the reference does, in high precision)"}},
      {"materialize R with a piece of another shape",
       [] {
         (void)materialize(std::vector<D>{D({2}), D({3})}, Placement::replicate(), {2});
       },
       {"materialize R: rank 1 holds [3] but a replicated tensor must have the global shape [2]",
        "pass each rank's full copy"}},
      {"materialize S(d) past the tensor's dimensions",
       [] { (void)materialize(std::vector<D>(2, D({2})), Placement::shard(1), {4}); },
       {"materialize S(1): the global shape [4] has no dimension 1", "shard a dimension below 1"}},
      {"materialize S(0) with a piece of another shape",
       [] {
         (void)materialize(std::vector<D>{D({2}), D({1})}, Placement::shard(0), {4});
       },
       {"materialize S(0): rank 1 holds [1] but its piece of [4] under chunk over 2 ranks is [2]",
        "pass rank r the piece split() gives it"}},
      {"materialize on a mesh with two reduce ops",
       [&] {
         (void)materialize(std::vector<D>(4, D({2})), mesh,
                           {Placement::partial(ReduceOp::sum), Placement::partial(ReduceOp::max)},
                           {2});
       },
       {"materialize [P(sum), P(max)] on mesh (dp=2, tp=2), global shape [2]: Partial dimensions "
        "with different reduce ops (sum and max on tp)",
        "redistribute one of them first"}},
      {"a split into no parts",
       [] { (void)split(SplitPolicy::chunk(), 4, 0); },
       {"split: cannot split a dimension of 4 into 0 parts; the number of ranks must be at least "
        "1"}},
      {"a Tensor whose values do not fill its shape",
       [] {
         (void)D({2, 3}, std::vector<double>(5));
       },
       {"Tensor: shape [2, 3] needs 6 elements but 5 were given",
        "pass numel(shape) values in row-major order"}},
  });
}

TEST(LayoutUsageErrors, errors_on_ranks_name_the_rank_and_the_layout) {
  expect_usage_errors(std::vector<test::RankUsageCase>{
      {"MeshGroups over a mesh of another size",
       4,
       [](Communicator& world) {
         MeshGroups g(world, DeviceMesh({{"dp", 2}, {"tp", 3}}));
       },
       0,
       {"rank 0: mesh (dp=2, tp=3) has 6 ranks but the communicator has 4",
        "build the mesh over the whole group"}},
      {"redistribute of an impossible transition",
       2,
       [](Communicator& world) {
         MeshGroups g(world, DeviceMesh::line(2));
         (void)redistribute(g, D({3}), {5}, {Placement::shard(0)}, {Placement::partial()});
       },
       0,
       {"rank 0: redistribute [S(0)] -> [P(sum)] on mesh (tp=2), global shape [5]",
        "tp goes S(0) -> P(sum)", "Go through R (all_gather) and then to P(sum)"}},
      {"redistribute of a piece of another shape",
       2,
       [](Communicator& world) {
         MeshGroups g(world, DeviceMesh::line(2));
         (void)redistribute(g, D({3}), {5}, {Placement::shard(0)}, {Placement::replicate()});
       },
       1,
       {"redistribute [S(0)] -> [R] on mesh (tp=2): rank 1 holds [3] but its piece of [5] under "
        "[S(0)] is [2]"}},
      {"execute_step given a piece of another shape than its step's",
       2,
       [](Communicator& world) {
         const auto plan =
             plan_redistribute({5}, DType::float64, DeviceMesh::line(2), {Placement::shard(0)},
                               {Placement::replicate()}, {world.rank()});
         (void)execute_step(world, plan.steps.at(0), D({4}));
       },
       0,
       {"execute_step on rank 0 of 2 (all_gather along mesh dim 0): the piece is [4] but the step "
        "takes [3]",
        "pass the piece the plan's previous step returned (step.before)"}},
  });
}

}  // namespace
}  // namespace shardcheck
