#include "reports/compare_report.hpp"

#include "reports/atomic_file.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

namespace shardcheck::report {
namespace {

using nlohmann::ordered_json;

// JSON has no infinity: a ratio that is infinite (a NaN where the reference is finite) is null.
ordered_json number(double v) { return std::isfinite(v) ? ordered_json(v) : ordered_json(); }

ordered_json tensor_json(const check::TensorCheck& t) {
  const ordered_json worst = {{"index", t.worst_index},
                              {"rank", t.worst_rank},
                              {"boundary_distance", t.worst_boundary_distance},
                              {"actual", number(t.worst_actual)},
                              {"exact", number(t.worst_exact)},
                              {"bound", number(t.worst_bound)}};
  return {{"tensor", t.name},
          {"shape", t.shape},
          {"placement", t.placement},
          {"passed", t.pass()},
          {"problem", t.problem},
          {"max_abs_error", number(t.max_abs_err)},
          {"max_bound_ratio", number(t.max_ratio)},
          {"max_ulp", number(t.max_ulp)},
          {"over_bound", t.over_bound},
          {"special_mismatches", t.special_mismatches},
          {"assert_close_default_passes", t.fixed_tolerance_pass()},
          {"assert_close_default_failures", t.fixed_tolerance_failures},
          {"tightest_rtol", number(t.tightest_rtol)},
          {"bound_rtol", number(t.bound_rtol)},
          {"worst", worst},
          {"divergent_ranks", t.divergent_ranks}};
}

std::string fmt(double v) {
  if (std::isinf(v)) return "inf";
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

}  // namespace

std::vector<ToleranceRow> tolerance_table(const CompareReport& r) {
  using Key = std::tuple<std::string, DType, int, std::string>;
  std::map<Key, std::vector<const check::TensorCheck*>> groups;
  for (const auto& c : r.cases) {
    for (const auto& t : c.verdict.tensors) {
      groups[{c.verdict.op, c.verdict.dtype, c.verdict.world, t.name}].push_back(&t);
    }
  }
  std::vector<ToleranceRow> rows;
  rows.reserve(groups.size());
  for (const auto& [k, ts] : groups) {
    ToleranceRow row;
    std::tie(row.op, row.dtype, row.world, row.tensor) = k;
    std::vector<double> ratios;
    ratios.reserve(ts.size());
    row.justified_rtol = std::numeric_limits<double>::infinity();
    for (const auto* t : ts) {
      ++row.cases;
      if (!t->pass()) ++row.failed;
      const double ratio =
          t->problem.empty() ? t->max_ratio : std::numeric_limits<double>::infinity();
      ratios.push_back(ratio);
      row.max_ratio = std::max(row.max_ratio, ratio);
      row.needed_rtol = std::max(row.needed_rtol, t->tightest_rtol);
      row.justified_rtol = std::min(row.justified_rtol, t->bound_rtol);
    }
    std::sort(ratios.begin(), ratios.end());
    row.median_ratio = ratios[ratios.size() / 2];
    rows.push_back(row);
  }
  return rows;
}

std::string to_json(const CompareReport& r) {
  ordered_json j;
  j["schema"] = "shardcheck-compare-report/1";
  j["command"] = r.command;
  j["started"] = r.started;
  int failed = 0;
  ordered_json cases = ordered_json::array();
  for (const auto& c : r.cases) {
    const bool pass = c.verdict.pass();
    failed += pass ? 0 : 1;
    ordered_json cj;
    cj["case"] = c.dir;
    cj["op"] = c.verdict.op;
    cj["dtype"] = std::string(name(c.verdict.dtype));
    cj["world"] = c.verdict.world;
    cj["description"] = c.verdict.case_text;
    cj["implementation"] = c.implementation;
    cj["contract"] = c.contract;
    cj["passed"] = pass;
    cj["failures"] = c.verdict.failures;
    ordered_json ts = ordered_json::array();
    for (const auto& t : c.verdict.tensors) {
      ordered_json tj = tensor_json(t);
      if (const auto* b = c.baseline_of(t.name)) {
        tj["baseline"] = tensor_json(*b);
        tj["baseline"]["implementation"] = c.baseline_implementation;
        tj["error_ratio_to_baseline"] = number(check::baseline_error_ratio(t, *b));
      }
      ts.push_back(tj);
    }
    cj["tensors"] = ts;
    if (!pass && c.signatures_tried > 0) {
      ordered_json dj = ordered_json::array();
      for (const auto& d : c.diagnosis) {
        dj.push_back({{"signature", d.signature},
                      {"description", d.description},
                      {"residual", number(d.residual)},
                      {"explained", d.explained},
                      {"unexplained", d.unexplained},
                      {"rank", d.rank}});
      }
      cj["diagnosis"] = {{"signatures_tried", c.signatures_tried}, {"matches", dj}};
      if (!c.diagnosis_cut.empty()) cj["diagnosis"]["cut"] = c.diagnosis_cut;
    }
    cases.push_back(cj);
  }
  j["summary"] = {{"cases", r.cases.size()},
                  {"passed", static_cast<int>(r.cases.size()) - failed},
                  {"failed", failed}};
  j["cases"] = cases;
  ordered_json tol = ordered_json::array();
  for (const auto& row : tolerance_table(r)) {
    tol.push_back({{"op", row.op},
                   {"dtype", std::string(name(row.dtype))},
                   {"world", row.world},
                   {"tensor", row.tensor},
                   {"cases", row.cases},
                   {"failed", row.failed},
                   {"max_bound_ratio", number(row.max_ratio)},
                   {"median_bound_ratio", number(row.median_ratio)},
                   {"needed_rtol", number(row.needed_rtol)},
                   {"justified_rtol", number(row.justified_rtol)},
                   {"default_atol", check::torch_default_tolerance(row.dtype).atol}});
  }
  j["tolerances"] = tol;
  ordered_json runs = ordered_json::array();
  for (const auto& run : r.runs) {
    ordered_json steps = ordered_json::array();
    for (std::size_t k = 0; k < run.steps.size(); ++k) {
      steps.push_back({{"name", run.step_names[k]},
                       {"case", run.steps[k].dir},
                       {"op", run.steps[k].verdict.op},
                       {"passed", run.steps[k].verdict.pass()}});
    }
    ordered_json first;  // null when every step passes
    if (const auto f = run.first_failure()) {
      first = {{"step", f->step + 1},
               {"name", run.step_names[f->step]},
               {"case", run.steps[f->step].dir},
               {"op", run.steps[f->step].verdict.op},
               {"tensor", f->tensor},
               {"where", f->where}};
    }
    ordered_json links = ordered_json::array();
    for (const auto& l : run.links) {
      links.push_back({{"from", l.link.from + 1},
                       {"output", l.link.output},
                       {"to", l.link.to + 1},
                       {"input", l.link.input},
                       {"identical", l.problem.empty()},
                       {"problem", l.problem}});
    }
    runs.push_back({{"run", run.file},
                    {"name", run.name},
                    {"steps", steps},
                    {"links", links},
                    {"failed", run.failed()},
                    {"first_failure", first},
                    {"summary", run.summary()}});
  }
  j["runs"] = runs;
  return j.dump(2) + "\n";
}

std::string to_markdown(const CompareReport& r) {
  std::ostringstream o;
  int failed = 0;
  for (const auto& c : r.cases) failed += c.verdict.pass() ? 0 : 1;
  o << "# shardcheck compare\n\n`" << r.command << "` (" << r.started << ")\n\n"
    << r.cases.size() << " cases: " << r.cases.size() - static_cast<std::size_t>(failed)
    << " passed, " << failed << " failed.\n\n";
  o << "## Cases\n\n| case | op | dtype | P | verdict | worst tensor | bound ratio | assert_close "
       "default | error / baseline's |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& c : r.cases) {
    const check::TensorCheck* worst = nullptr;
    for (const auto& t : c.verdict.tensors) {
      if (worst == nullptr || !t.problem.empty() || t.max_ratio > worst->max_ratio) worst = &t;
    }
    bool fixed = true;
    for (const auto& t : c.verdict.tensors) fixed = fixed && t.fixed_tolerance_pass();
    o << "| " << c.dir << " | " << c.verdict.op << " | " << name(c.verdict.dtype) << " | "
      << c.verdict.world << " | " << (c.verdict.pass() ? "pass" : "**FAIL**") << " | "
      << (worst ? worst->name : "") << " | "
      << (worst ? (worst->problem.empty() ? fmt(worst->max_ratio) : "layout") : "") << " | "
      << (fixed ? "pass" : "fail") << " | ";
    double to_baseline = -1;
    for (const auto& t : c.verdict.tensors) {
      if (const auto* b = c.baseline_of(t.name)) {
        to_baseline = std::max(to_baseline, check::baseline_error_ratio(t, *b));
      }
    }
    o << (to_baseline < 0 ? std::string("-") : fmt(to_baseline)) << " |\n";
  }
  o << "\n## Tolerances\n\nPer op, dtype, world size and tensor over these cases: the largest and "
       "the median bound ratio (pass <= 1), the rtol the cases needed with assert_close's "
       "default atol, and the rtol the derived bound justifies in every case (an assert_close "
       "gate looser than it can pass a wrong result the bound would catch; judging by the "
       "bound itself, with shardcheck compare, is what we recommend).\n\n"
       "| op | dtype | P | tensor | cases | failed | max ratio | median ratio | needed rtol | "
       "justified rtol | atol |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& row : tolerance_table(r)) {
    o << "| " << row.op << " | " << name(row.dtype) << " | " << row.world << " | " << row.tensor
      << " | " << row.cases << " | " << row.failed << " | " << fmt(row.max_ratio) << " | "
      << fmt(row.median_ratio) << " | " << fmt(row.needed_rtol) << " | " << fmt(row.justified_rtol)
      << " | " << fmt(check::torch_default_tolerance(row.dtype).atol) << " |\n";
  }
  if (!r.runs.empty())
    o << "\n## Runs\n\nEach whole run's steps in dataflow order, each judged on its own inputs.\n";
  for (const auto& run : r.runs) {
    o << "\n"
      << run.summary() << "\n\n| step | name | case | op | verdict |\n|---|---|---|---|---|\n";
    for (std::size_t k = 0; k < run.steps.size(); ++k) {
      const auto& c = run.steps[k];
      o << "| " << k + 1 << " | " << run.step_names[k] << " | " << c.dir << " | " << c.verdict.op
        << " | " << (c.verdict.pass() ? "pass" : "**FAIL**") << " |\n";
    }
    if (!run.links.empty()) {
      o << "\n" << run.links.size() << " dataflow links, " << run.broken_links() << " broken.\n";
    }
    for (const auto& l : run.links) {
      if (!l.problem.empty()) o << "\n- Link broken: " << l.problem << "\n";
    }
  }
  bool any = false;
  for (const auto& c : r.cases) {
    if (c.verdict.pass()) continue;
    if (!any) o << "\n## Failures\n";
    any = true;
    o << "\n### " << c.dir << "\n\nContract: " << c.contract << "\n\n";
    for (const auto& d : check::diagnosis_lines(c)) o << "Diagnosis: " << d << "\n\n";
    o << "```\n" << c.verdict.explain() << "\n```\n";
  }
  return o.str();
}

void write_compare_report(const CompareReport& r, const std::string& dir) {
  // Every text first: a failure to render leaves nothing half-written.
  write_report_files(dir, to_json(r), to_markdown(r), to_html(r));
}

}  // namespace shardcheck::report
