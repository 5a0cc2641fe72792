// The report of one `shardcheck compare` run: report.json and report.md in the --report
// directory (docs/compare.md shows one), written atomically once every case has been judged.
//
// Per case: the op, dtype, world size, the case in words, the implementation, the contract the
// bounds assumed, and per tensor its verdict (engine/tensor_check.hpp). Over the cases, the
// tolerance table: per op x dtype x P x tensor, the cases and failures, the largest and the
// median bound ratio, the rtol the cases needed at assert_close's default atol
// (max tightest_rtol), the rtol the derived bound justifies in every case (min bound_rtol), and
// what we recommend for a CI gate. Per whole run: its steps, which pass, and the first that
// fails with its tensor and rank.
#pragma once

#include "compare/compare.hpp"
#include "compare/run_verdict.hpp"

#include <string>
#include <vector>

namespace shardcheck::report {

struct CompareReport {
  std::string command;                      // the command line
  std::string started;                      // ISO 8601, UTC
  std::vector<check::CompareResult> cases;  // every case, the runs' steps included
  // The whole runs among them (run.json), each with its steps in dataflow order and the first
  // that fails (docs/case-format.md, "A whole run").
  std::vector<check::RunResult> runs;
};

// One row of the tolerance table.
struct ToleranceRow {
  std::string op, tensor;
  DType dtype = DType::float32;
  int world = 1;
  int cases = 0, failed = 0;
  double max_ratio = 0, median_ratio = 0;
  double needed_rtol = 0;     // max over cases of tightest_rtol
  double justified_rtol = 0;  // min over cases of bound_rtol
};
std::vector<ToleranceRow> tolerance_table(const CompareReport& r);

std::string to_json(const CompareReport& r);
std::string to_markdown(const CompareReport& r);
// report.html: the cases, the tolerance table and their plots (docs/reports.md).
std::string to_html(const CompareReport& r);

// Writes dir/report.json, dir/report.md and dir/report.html (creating dir), each atomically.
// @throws UsageError naming the path when it cannot be created or written.
void write_compare_report(const CompareReport& r, const std::string& dir);

}  // namespace shardcheck::report
