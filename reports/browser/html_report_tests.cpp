// Unit tests of what report.html is built from: the bound-ratio bins and the per-element error
// profile (engine/collector.hpp, engine/tensor_check.hpp), escaping, and a page built from a
// real collector (the replay command, no network address, every figure with its data).
// The rendering itself is tested in a browser: check_page.mjs (ctest -L html).
#include "engine/collector.hpp"
#include "engine/tensor_check.hpp"
#include "reports/compare_report.hpp"
#include "reports/html_page.hpp"
#include "reports/nightly_page.hpp"
#include "reports/report.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

namespace shardcheck {
namespace {

// check_tensor of a tensor "y" of `shape` placed by `placement` over `ranks` ranks: element i is
// exact + err(i) against `exact`, every bound `bound`.
check::TensorCheck check_errors(const Shape& shape, double exact,
                                const std::function<double(std::size_t)>& err, double bound,
                                const Placement& placement, int ranks) {
  Tensor<double> e(shape), actual(shape), b(shape);
  for (std::size_t i = 0; i < e.size(); ++i) {
    e[i] = exact;
    actual[i] = exact + err(i);
    b[i] = bound;
  }
  return check::check_tensor("y", actual, e, b, placement, ranks);
}

TEST(RatioBins, EdgesBelongToTheLowerBinAndFailuresAreAboveOne) {
  EXPECT_EQ(check::ratio_bin(0.0), 0U);
  EXPECT_EQ(check::ratio_bin(1e-9), 1U);
  EXPECT_EQ(check::ratio_bin(1e-4), 1U);
  EXPECT_EQ(check::ratio_bin(0.5), 5U);
  EXPECT_EQ(check::ratio_bin(1.0), 6U);
  EXPECT_EQ(check::ratio_bin(1.0000001), 7U);
  EXPECT_EQ(check::ratio_bin(10.0), 7U);
  EXPECT_EQ(check::ratio_bin(11.0), 8U);
  EXPECT_EQ(check::ratio_bin(std::numeric_limits<double>::infinity()), 8U);
  EXPECT_EQ(check::ratio_bin(std::nan("")), 8U);
  EXPECT_EQ(check::ratio_bin_label(0), "0");
  EXPECT_EQ(check::ratio_bin_label(6), "(0.5, 1]");
  EXPECT_EQ(check::ratio_bin_label(8), "> 10");
}

// A [6, 3] tensor sharded on dim 0 over 3 ranks: 2 rows each; the error of element (r, c) is
// 10r + c, its bound 100, so every cell of the (unpooled) profile is known.
TEST(ErrorProfile, HoldsEveryElementAlongTheShardedAxisWithTheRankBoundaries) {
  const auto c = check_errors(
      Shape{6, 3}, 1.0,
      [](std::size_t i) {
        const std::size_t row = i / 3;  // row-major [6, 3]: element (row, i % 3)
        return static_cast<double>(10 * row + i % 3);
      },
      100.0, Placement::shard(0), 3);
  const auto& p = c.profile;
  EXPECT_EQ(p.axis, 0);
  EXPECT_EQ(p.rows, 6U);
  EXPECT_EQ(p.cols, 3U);
  EXPECT_EQ(p.boundaries, (std::vector<std::size_t>{2, 4}));
  EXPECT_DOUBLE_EQ(p.error[4 * 3 + 2], 42.0);
  EXPECT_DOUBLE_EQ(p.ratio[4 * 3 + 2], 0.42);
}

// Sharded on the last dim of [2, 5000]: the profile's rows run along dim 1, pooled by the
// largest in each block, and at most 4096 cells.
TEST(ErrorProfile, PoolsLargeTensorsByTheBlockMaximum) {
  const auto c = check_errors(
      Shape{2, 5000}, 0.0,
      [](std::size_t i) { return i == 4999 ? 0.5 : 0.0; },  // element (0, 4999)
      1.0, Placement::shard(1), 4);
  const auto& p = c.profile;
  EXPECT_EQ(p.axis, 1);
  EXPECT_EQ(p.length, 5000U);
  EXPECT_EQ(p.rest, 2U);
  EXPECT_LE(p.rows * p.cols, check::ErrorProfile::kMaxCells);
  EXPECT_EQ(p.rows, 64U);
  const std::size_t row = 4999 / p.row_block;
  EXPECT_DOUBLE_EQ(p.ratio[row * p.cols + 0], 0.5);
  EXPECT_DOUBLE_EQ(p.ratio[row * p.cols + p.cols - 1], 0.0);
  EXPECT_EQ(p.boundaries, (std::vector<std::size_t>{1250, 2500, 3750}));
}

TEST(Html, EscapesMarkupAndKeepsScriptBlocksClosedOnlyByThemselves) {
  EXPECT_EQ(report::html::escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  EXPECT_EQ(report::html::json_str("</script>"), "\"\\u003c/script>\"");
}

// A failing property recorded by a collector: the page holds its replay command, a figure per
// plot with its data, and no address outside the file.
TEST(Html, APageOfAFailingRunHasItsReplayCommandAndNoNetworkAddress) {
  check::Collector collector;
  collector.set_context("linear", "forward_within_bound", "mutant:x");
  check::CaseVerdict v;
  v.op = "column_parallel_linear";
  v.world = 2;
  v.case_text = "P=2";
  v.tensors.push_back(check_errors(
      Shape{4}, 1.0,
      [](std::size_t i) { return i == 2 ? 2.0 : 0.0; },  // the first element of rank 1's piece
      1.0, Placement::shard(0), 2));
  collector.record(v);
  report::Report r;
  r.seed = 7;
  r.cases = 20;
  r.collector = &collector;
  check::PropertyOutcome p;
  p.suite = "linear";
  p.property = "forward_within_bound";
  p.impl = "mutant:x";
  p.message = "y: worst element";
  r.properties.push_back(p);
  const std::string page = report::to_html(r);
  EXPECT_NE(page.find("shardcheck check linear --impl mutant:x --property forward_within_bound "
                      "--seed 7 --cases 20 --max-world 8"),
            std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  for (const char* id : {"numerics-0-ratios", "numerics-0-assert-close", "profile-0"}) {
    EXPECT_NE(page.find("<figure class=\"plot\" id=\"" + std::string(id) + "\""), std::string::npos)
        << id;
    EXPECT_NE(page.find("\"" + std::string(id) + "\": {"), std::string::npos) << id;
  }
  EXPECT_NE(page.find("\"boundaries\": [2]"), std::string::npos);
}

// A compare report with a whole run: the Runs section holds its line, a row per step and its
// broken link, escaped.
TEST(Html, ACompareReportShowsEachRunsStepsAndBrokenLinks) {
  report::CompareReport r;
  r.command = "shardcheck compare dumps/step3";
  check::RunResult run;
  run.file = "dumps/step3/run.json";
  run.name = "block <0>";
  for (const char* n : {"00_norm", "01_attention"}) {
    check::CompareResult c;
    c.dir = std::string("dumps/step3/") + n;
    c.verdict.op = "sequence_parallel_norm";
    run.step_names.emplace_back(n);
    run.steps.push_back(c);
  }
  run.links.push_back({{0, "y", 1, "x"}, "step 2 (01_attention)'s x is not step 1 (00_norm)'s y"});
  r.runs.push_back(run);
  for (const auto& c : run.steps) r.cases.push_back(c);
  const std::string page = report::to_html(r);
  for (const char* part :
       {"<section id=\"runs\"", "<h3>block &lt;0&gt;</h3>", "the first failure is step 2 of 2",
        "dumps/step3/01_attention", "<strong>broken</strong>", "1 dataflow links, 1 broken.",
        "Link broken: step 2 (01_attention)&#39;s x is not step 1 (00_norm)&#39;s y",
        "shardcheck compare dumps/step3/run.json"}) {
    EXPECT_NE(page.find(part), std::string::npos) << part;
  }
}

// The nightly page (reports/nightly_page.hpp): one figure per quantity, a gap (null) where a
// night has no such harness, the night's crash with its replay command; bad input named.
TEST(NightlyPage, PlotsEveryHarnessOverTheNightsWithGapsAndNamesBadInput) {
  const std::string one = R"({"schema": "shardcheck-nightly/1", "date": "2026-12-01",
    "verdict": "clean", "new_findings": 0, "harnesses": [{"name": "npy",
    "fuzz": {"exec_per_s": 5525.7, "executions": 447829, "edges": 2380},
    "corpus": {"before": 60, "after": 151}, "new_crashes": []}], "properties": null})";
  const std::string two = R"({"schema": "shardcheck-nightly/1", "date": "2026-12-02",
    "verdict": "NEW FINDINGS", "new_findings": 1, "harnesses": [{"name": "npy",
    "fuzz": {"exec_per_s": 6012, "executions": 490001, "edges": 2391},
    "coverage": {"lines": {"count": 1000, "covered": 615}},
    "corpus": {"before": 151, "after": 170}, "new_crashes": [{"slug": "heap-overflow-x",
    "kind": "heap-buffer-overflow", "replay": "npy_fuzz crash-1"}]}, {"name": "collectives",
    "fuzz": {"exec_per_s": 830.1}, "corpus": {"before": 517, "after": 530},
    "new_crashes": []}], "properties": null})";
  const std::string page = shardcheck::report::nightly_page({{"a", one}, {"b", two}});
  std::size_t figures = 0;
  for (std::size_t at = page.find("<figure class=\"plot\" id="); at != std::string::npos;
       at = page.find("<figure class=\"plot\" id=", at + 1)) {
    ++figures;
  }
  EXPECT_EQ(figures, 4U);
  EXPECT_NE(page.find(R"({"name":"collectives","values":[null,830.1]})"), std::string::npos);
  EXPECT_NE(page.find(R"({"name":"npy","values":[null,61.5]})"), std::string::npos);  // coverage
  EXPECT_NE(page.find("npy_fuzz crash-1"), std::string::npos);
  EXPECT_NE(page.find("NEW FINDINGS"), std::string::npos);
  EXPECT_THROW((void)shardcheck::report::nightly_page({}), std::invalid_argument);
  try {
    (void)shardcheck::report::nightly_page({{"night.json", R"({"schema": "other"})"}});
    ADD_FAILURE() << "a summary of another schema was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("night.json: schema: not a shardcheck-nightly/1"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace shardcheck
