// Unit tests of redistribution (lib/layout/redistribute.hpp) and of its suite: the plan's steps
// in words, hand-checked plans, the usage errors, and the suite run against implementations
// other than the library's (a correct one that moves data another way, and a user's own
// registered from this file, right and wrong). The suite's properties and mutant kills are
// suite_tests' (label redistribute): `shardcheck check redistribute`.
#include "engine/collector.hpp"
#include "engine/runner.hpp"
#include "engine/suite.hpp"
#include "layout/layout_test_support.hpp"
#include "layout/redistribute.hpp"
#include "runtime/errors.hpp"
#include "runtime/launcher.hpp"
#include "suites/redistribute/redistribute_impl.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace shardcheck {
namespace {

using layout_test::expect_usage_error;

TEST(redistribute, the_plan_names_each_step_and_its_collective) {
  const DeviceMesh mesh({{"dp", 2}, {"tp", 2}});
  const auto plan =
      plan_redistribute({5, 4}, DType::float32, mesh, {Placement::shard(0), Placement::shard(0)},
                        {Placement::replicate(), Placement::shard(1)}, {0, 0});
  // Innermost cut undone first: tp gathers rows 2|1 of the dp piece (3 rows), then dp gathers
  // 3|2 rows; then tp slices columns.
  EXPECT_EQ(plan.to_string(mesh),
            "tp: S(0) -> R all_gather [2, 4] -> [3, 4], sent 32 B, received 16 B\n"
            "dp: S(0) -> R all_gather [3, 4] -> [5, 4], sent 48 B, received 32 B\n"
            "tp: R -> S(1) local slice [5, 4] -> [5, 2], sent 0 B, received 0 B\n");
}

TEST(redistribute, a_single_shard_dimension_change_is_one_all_to_all) {
  const DeviceMesh mesh = DeviceMesh::line(3, "cp");
  const auto plan = plan_redistribute({7, 5}, DType::float32, mesh, {Placement::shard(0)},
                                      {Placement::shard(1)}, {2});
  ASSERT_EQ(plan.steps.size(), 1U);
  EXPECT_EQ(plan.steps[0].kind, RedistributeStep::Kind::all_to_all);
  EXPECT_EQ(plan.steps[0].before, (Shape{1, 5}));  // chunk 7/3 = 3,3,1
  EXPECT_EQ(plan.steps[0].after, (Shape{7, 1}));   // chunk 5/3 = 2,2,1
}

// R -> P(sum): coordinate 0 keeps the value and the others hold zeros (exact), not value/P.
TEST(redistribute, replicate_to_partial_sum_keeps_the_value_on_coordinate_zero) {
  const DeviceMesh mesh = DeviceMesh::line(3);
  std::vector<Tensor<double>> out(3);
  run(3, [&](Communicator& world) {
    MeshGroups g(world, mesh);
    const Tensor<double> x({2}, {1.5, -3.0});
    out[static_cast<std::size_t>(world.rank())] =
        redistribute(g, x, {2}, {Placement::replicate()}, {Placement::partial()});
  });
  EXPECT_EQ(out[0].values(), (std::vector<double>{1.5, -3.0}));
  EXPECT_EQ(out[1].values(), (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(out[2].values(), (std::vector<double>{0.0, 0.0}));
}

TEST(redistribute, impossible_transitions_are_usage_errors) {
  const DeviceMesh mesh({{"dp", 2}, {"tp", 2}});
  expect_usage_error(
      [&] {
        plan_redistribute({4}, DType::float32, mesh, {Placement::shard(0), Placement::replicate()},
                          {Placement::partial(), Placement::replicate()}, {0, 0});
      },
      {"[S(0), R] -> [P(sum), R]", "(dp=2, tp=2)", "dp goes S(0) -> P(sum)", "Go through R"});
  expect_usage_error(
      [&] {
        plan_redistribute({4}, DType::float32, mesh,
                          {Placement::replicate(), Placement::partial(ReduceOp::sum)},
                          {Placement::replicate(), Placement::partial(ReduceOp::avg)}, {0, 0});
      },
      {"tp goes P(sum) -> P(avg)", "no conversion between reductions is exact"});
  expect_usage_error(
      [&] {
        plan_redistribute({4}, DType::float32, mesh, {Placement::shard(0)},
                          {Placement::replicate()}, {0, 0});
      },
      {"one placement per mesh dimension (2)"});
}

TEST(redistribute, a_piece_of_the_wrong_shape_is_a_usage_error) {
  try {
    run(2, [](Communicator& world) {
      MeshGroups g(world, DeviceMesh::line(2));
      const Tensor<double> x({3});
      (void)redistribute(g, x, {5}, {Placement::shard(0)}, {Placement::replicate()});
    });
    ADD_FAILURE() << "no error";
  } catch (const RankFailure& e) {
    EXPECT_NE(std::string(e.what()).find("holds [3] but its piece of [5] under [S(0)] is ["),
              std::string::npos)
        << e.what();
  }
}

// ---------------------------------------------------------------- the suite, other implementations

// A user's redistribution, registered from this file as a user's would be from theirs: the
// library's, except that it drops the last element of every piece it returns along dimension 0
// when asked to (the uneven-gather bug that lost a row).
struct UserRedistribute {
  bool drop_last_row = false;
  template <class T>
  Tensor<T> redistribute(const MeshGroups& groups, const Tensor<T>& local, const Shape& global,
                         const std::vector<Placement>& from,
                         const std::vector<Placement>& to) const {
    Tensor<T> y = shardcheck::redistribute(groups, local, global, from, to);
    if (!drop_last_row || y.ndim() == 0 || y.dim(0) == 0) return y;
    // The last row along dimension 0 zeroed: what a gather that lost a row leaves.
    const std::size_t row = y.size() / y.dim(0);
    for (std::size_t k = y.size() - row; k < y.size(); ++k) y.data()[k] = T(0);
    return y;
  }
};

const check::Registration<check::RedistributeImplementation> user_right(
    {.name = "test-user-redistribute", .description = "the library's, from a user's file"},
    std::make_shared<const check::RedistributeAdapter<UserRedistribute>>());
const check::Registration<check::RedistributeImplementation> user_wrong(
    {.name = "test-user-redistribute-loses-a-row",
     .description = "zeroes the last row of every piece it returns"},
    std::make_shared<const check::RedistributeAdapter<UserRedistribute>>(UserRedistribute{true}));

const check::Suite& redistribute_suite() {
  check::register_builtin_suites();
  const check::Suite* s = check::SuiteRegistry::instance().find("redistribute");
  if (s == nullptr) throw std::logic_error("no redistribute suite");
  return *s;
}

check::PropertyOutcome run_on(const std::string& property, const std::string& impl) {
  check::RunParams params;
  params.seed = 20261202;
  params.cases = 100;
  check::Collector collector;
  return check::run_property(redistribute_suite(), property, impl, check::RunConfig{}, params,
                             collector);
}

// An implementation that claims no plan runs every property but the ledger's and the refusals'.
TEST(RedistributeSuite, a_correct_implementation_that_is_not_the_plan_passes_what_applies) {
  const auto& s = redistribute_suite();
  int ran = 0;
  for (const auto& p : s.properties()) {
    const bool plan_only = p.name == "ledger_matches_the_declared_plan" ||
                           p.name == "impossible_transitions_are_refused";
    EXPECT_EQ(s.applies(p.name, "via-replicate"), !plan_only) << p.name;
    if (!s.applies(p.name, "via-replicate")) continue;
    const auto r = run_on(p.name, "via-replicate");
    EXPECT_TRUE(r.passed) << p.name << ": " << r.message;
    ++ran;
  }
  EXPECT_EQ(ran, 4);
}

// ... and it would fail the ledger's: it moves more bytes than the plan (so it must not claim it).
TEST(RedistributeSuite, the_ledger_property_fails_an_implementation_that_is_not_the_plan) {
  // applies() skips it for via-replicate; run the check itself through a claiming registration.
  static const check::Registration<check::RedistributeImplementation> claims(
      {.name = "test-via-replicate-claiming-the-plan",
       .description = "via-replicate, wrongly claiming the plan",
       .deterministic = true},
      std::make_shared<const check::RedistributeAdapter<check::ViaReplicateRedistribute>>());
  const auto r = run_on("ledger_matches_the_declared_plan", "test-via-replicate-claiming-the-plan");
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.message.find("the ledger has"), std::string::npos) << r.message;
}

TEST(RedistributeSuite, a_users_implementation_is_checked_by_name) {
  for (const auto& p : redistribute_suite().properties()) {
    if (!redistribute_suite().applies(p.name, "test-user-redistribute")) continue;
    const auto r = run_on(p.name, "test-user-redistribute");
    EXPECT_TRUE(r.passed) << p.name << ": " << r.message;
  }
  const auto r = run_on("preserves_the_global_tensor", "test-user-redistribute-loses-a-row");
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.message.find("the target layout stands for another tensor"), std::string::npos)
      << r.message;
}

}  // namespace
}  // namespace shardcheck
