// The collector's per-mesh-axis statistics (engine/collector.hpp) and the reports' section
// "worst tensors per mesh axis" (reports/): a tensor's worst case is kept for every named axis
// above size 1 in that case, the three worst tensors per axis come largest first, a NaN/Inf
// mismatch counts as +inf; the model suite's cases carry their mesh axes and one-group suites
// none.
#include "engine/collector.hpp"
#include "engine/runner.hpp"
#include "engine/suite.hpp"
#include "reports/report.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <set>
#include <string>
#include <vector>

namespace shardcheck::check {
namespace {

TensorCheck tensor(std::string name, double ratio) {
  TensorCheck t;
  t.name = std::move(name);
  t.max_ratio = ratio;
  t.over_bound = ratio > 1 ? 1 : 0;
  return t;
}

CaseVerdict with_axes(std::vector<std::string> axes, std::vector<TensorCheck> tensors) {
  CaseVerdict v;
  v.op = "model_train_step";
  v.case_text = "case on " + std::to_string(axes.size()) + " axes";
  v.mesh_axes = std::move(axes);
  v.tensors = std::move(tensors);
  return v;
}

Collector three_cases() {
  Collector c;
  c.set_context("model", "matches_reference", "shardcheck");
  c.record(with_axes({"pp", "tp"}, {tensor("loss", 0.1), tensor("dembedding", 0.5),
                                    tensor("new.output", 0.2), tensor("grad_norm", 0.05)}));
  c.record(with_axes({"tp"}, {tensor("loss", 0.7), tensor("dembedding", 0.01)}));
  TensorCheck nan = tensor("dembedding", 0.0);
  nan.problem = "NaN where the reference is finite";
  c.record(with_axes({}, {tensor("loss", 0.9), nan}));  // no axis above 1: nowhere
  return c;
}

TEST(CollectorMeshAxes, EachAxisKeepsItsCasesWorstTensorsLargestFirst) {
  const Collector c = three_cases();
  const auto w = c.worst_per_axis();
  ASSERT_EQ(w.size(), 2U);
  EXPECT_EQ(w[0].axis, "pp");
  EXPECT_EQ(w[0].cases, 1);
  ASSERT_EQ(w[0].worst.size(), 3U);  // the three worst of four
  EXPECT_EQ(w[0].worst[0].first, "dembedding");
  EXPECT_EQ(w[0].worst[1].first, "new.output");
  EXPECT_EQ(w[0].worst[2].first, "loss");
  EXPECT_EQ(w[1].axis, "tp");
  EXPECT_EQ(w[1].cases, 2);
  EXPECT_EQ(w[1].worst[0].first, "loss");  // 0.7 in the tp-only case
  EXPECT_DOUBLE_EQ(w[1].worst[0].second.max_ratio, 0.7);
  EXPECT_EQ(w[1].worst[0].second.worst_case, "case on 1 axes | " + tensor("loss", 0.7).summary());
  // The third case (no axis) is in the per-tensor statistics only.
  EXPECT_EQ(c.axis_stats().count({"model", "matches_reference", "shardcheck", "tp", "loss"}), 1U);
}

TEST(CollectorMeshAxes, AMismatchIsInfinitelyWorseAndCountsAsFailed) {
  Collector c;
  c.set_context("model", "matches_reference", "shardcheck");
  TensorCheck nan = tensor("dembedding", 0.0);
  nan.problem = "NaN where the reference is finite";
  c.record(with_axes({"dp"}, {tensor("loss", 3.0), nan}));
  const auto w = c.worst_per_axis();
  ASSERT_EQ(w.size(), 1U);
  EXPECT_EQ(w[0].worst[0].first, "dembedding");
  EXPECT_TRUE(std::isinf(w[0].worst[0].second.max_ratio));
  EXPECT_EQ(w[0].worst[0].second.failed_cases, 1);
  EXPECT_EQ(w[0].worst[1].second.failed_cases, 1);  // loss at 3x its bound
}

TEST(CollectorMeshAxes, TheReportsShowTheSection) {
  const Collector c = three_cases();
  report::Report r;
  r.command = "shardcheck check model";
  r.collector = &c;
  const auto j = nlohmann::json::parse(report::to_json(r));
  ASSERT_EQ(j.at("mesh_axes").size(), 2U);
  EXPECT_EQ(j.at("mesh_axes")[0].at("axis"), "pp");
  EXPECT_EQ(j.at("mesh_axes")[0].at("worst")[0].at("tensor"), "dembedding");
  EXPECT_EQ(j.at("mesh_axes")[1].at("cases"), 2);
  const std::string md = report::to_markdown(r);
  EXPECT_NE(md.find("## Worst tensors per mesh axis"), std::string::npos) << md;
  EXPECT_NE(md.find("| model | matches_reference | shardcheck | pp | 1 | dembedding (0.5), "
                    "new.output (0.2), loss (0.1) |"),
            std::string::npos)
      << md;
  EXPECT_NE(report::to_html(r).find("Worst tensors per mesh axis"), std::string::npos);
  // Without axes, no section.
  Collector none;
  none.set_context("linear", "matches_reference", "shardcheck");
  none.record(with_axes({}, {tensor("y", 0.1)}));
  r.collector = &none;
  EXPECT_EQ(report::to_markdown(r).find("per mesh axis"), std::string::npos);
}

// The wiring: the model suite's cases name their axes above 1 (pp, dp, cp, tp); the linear
// suite's one tp group names none.
TEST(CollectorMeshAxes, TheModelSuitesCasesCarryTheirAxes) {
  register_builtin_suites();
  RunParams params;
  params.seed = 5;
  params.cases = 40;
  Collector model;
  const auto r = run_property(*SuiteRegistry::instance().find("model"), "matches_reference",
                              "shardcheck", RunConfig{}, params, model);
  ASSERT_TRUE(r.passed) << r.message;
  std::set<std::string> axes;
  for (const auto& [k, s] : model.axis_stats()) axes.insert(k.axis);
  EXPECT_EQ(axes, (std::set<std::string>{"cp", "dp", "pp", "tp"}));
  Collector linear;
  params.cases = 5;
  (void)run_property(*SuiteRegistry::instance().find("linear"), "matches_reference", "shardcheck",
                     RunConfig{}, params, linear);
  EXPECT_FALSE(linear.stats().empty());
  EXPECT_TRUE(linear.axis_stats().empty());
}

}  // namespace
}  // namespace shardcheck::check
