// report.html of `shardcheck compare`: the failing cases with the command that re-judges each,
// the whole runs (each step in dataflow order with its verdict, the first failure and the broken
// dataflow links), the bound-ratio distribution and assert_close contrast per op x dtype x P over
// the cases, the worst tensors' per-element errors along the sharded axis, and the cases and
// tolerance tables.
#include "reports/compare_report.hpp"
#include "reports/html_page.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

namespace shardcheck::report {
namespace {

using html::escape;
using html::num;

double ratio_of(const check::TensorCheck& t) {
  return t.problem.empty() ? t.max_ratio : std::numeric_limits<double>::infinity();
}

std::string numerics(const CompareReport& r, html::PlotData& plots) {
  std::map<std::tuple<std::string, int, int>, html::RatioRow> rows;
  for (const auto& c : r.cases) {
    const auto& v = c.verdict;
    auto& row = rows[{v.op, static_cast<int>(v.dtype), v.world}];
    row.label = v.op + " " + std::string(name(v.dtype)) + " P=" + std::to_string(v.world);
    for (const auto& t : v.tensors) {
      ++row.cases;
      row.failed += t.pass() ? 0 : 1;
      row.max_err = std::max(row.max_err, t.max_abs_err);
      row.max_ratio = std::max(row.max_ratio, ratio_of(t));
      row.false_alarms += !t.fixed_tolerance_pass() && t.pass() ? 1 : 0;
      row.missed += t.fixed_tolerance_pass() && !t.pass() ? 1 : 0;
      ++row.histogram.at(check::ratio_bin(ratio_of(t)));
    }
  }
  std::vector<html::RatioRow> list;
  list.reserve(rows.size());
  for (auto& [k, row] : rows) list.push_back(row);
  return "<p>Bound ratio = a tensor's largest |error| / its a-priori bound (pass &le; 1), one per "
         "output tensor of a case. assert_close = torch.testing.assert_close with its default "
         "rtol/atol for the dtype.</p>\n" +
         html::ratio_section(plots, "numerics", "the cases", list);
}

// A case's tensor, for the profiles (grouped by op).
html::ProfileCase profile_case(const check::CompareResult& c, const check::TensorCheck& t) {
  return {std::string(t.pass() ? "" : "FAIL ") + c.dir + ": " + t.name,
          c.verdict.case_text + " | " + t.summary(),
          &t.profile,
          ratio_of(t),
          !t.pass(),
          {c.verdict.op}};
}

// Failing tensors, then each op's worst passing tensor.
std::string profiles(const CompareReport& r, html::PlotData& plots) {
  std::vector<html::ProfileCase> cases;
  for (const auto& c : r.cases) {
    for (const auto& t : c.verdict.tensors) cases.push_back(profile_case(c, t));
  }
  return html::profiles_section(
      plots, cases,
      "<p>err/bound of every element along the sharded axis, rank boundaries as vertical "
      "lines: failing tensors first (sharded ones first), then each op's worst passing "
      "tensor.</p>\n",
      "<p>No case had a non-zero error.</p>\n");
}

std::string cases_table(const CompareReport& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : r.cases) {
    const check::TensorCheck* worst = nullptr;
    bool fixed = true;
    for (const auto& t : c.verdict.tensors) {
      if (worst == nullptr || ratio_of(t) > ratio_of(*worst)) worst = &t;
      fixed = fixed && t.fixed_tolerance_pass();
    }
    rows.push_back({escape(c.dir), escape(c.verdict.op), std::string(name(c.verdict.dtype)),
                    std::to_string(c.verdict.world),
                    c.verdict.pass() ? "pass" : "<strong>FAIL</strong>",
                    worst ? escape(worst->name) : "", worst ? num(ratio_of(*worst)) : "",
                    fixed ? "pass" : "fail"});
  }
  return html::table("Every case",
                     {"case", "op", "dtype", "P", "verdict", "worst tensor", "bound ratio",
                      "assert_close default"},
                     rows);
}

// Each run: its line (the first failure, or that every step passed), its steps' table and its
// broken links, with the command that re-judges it.
std::string runs(const CompareReport& r) {
  std::string out =
      "<p>Each whole run's steps in dataflow order, each judged on its own inputs; a step also "
      "fails when an input its dataflow link names is not the output it links to "
      "(docs/case-format.md, \"A whole run\").</p>\n";
  for (const auto& run : r.runs) {
    const bool ok = !run.first_failure().has_value();
    out += "<article class=\"run\">\n<h3>" + escape(run.name.empty() ? run.file : run.name) +
           "</h3>\n<p class=\"" + (ok ? "good" : "bad") + "\">" + escape(run.summary()) + "</p>\n";
    std::vector<std::vector<std::string>> rows;
    for (std::size_t k = 0; k < run.steps.size(); ++k) {
      const auto& c = run.steps[k];
      bool broken = false;
      for (const auto& l : run.links) broken = broken || (l.link.to == k && !l.problem.empty());
      rows.push_back({std::to_string(k + 1), escape(run.step_names[k]), escape(c.dir),
                      escape(c.verdict.op), c.verdict.pass() ? "pass" : "<strong>FAIL</strong>",
                      broken ? "<strong>broken</strong>" : "-"});
    }
    out += html::table("The steps of " + escape(run.file),
                       {"step", "name", "case", "op", "verdict", "link into it"}, rows);
    if (!run.links.empty()) {
      out += "<p>" + std::to_string(run.links.size()) + " dataflow links, " +
             std::to_string(run.broken_links()) + " broken.</p>\n";
    }
    for (const auto& l : run.links) {
      if (!l.problem.empty())
        out += "<p class=\"bad\">Link broken: " + escape(l.problem) + "</p>\n";
    }
    out += html::replay("shardcheck compare " + run.file) + "</article>\n";
  }
  return out;
}

std::string tolerances(const CompareReport& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : tolerance_table(r)) {
    rows.push_back({escape(t.op + " " + std::string(name(t.dtype)) +
                           " P=" + std::to_string(t.world) + " " + t.tensor),
                    std::to_string(t.cases), std::to_string(t.failed), num(t.max_ratio),
                    num(t.median_ratio), num(t.needed_rtol), num(t.justified_rtol),
                    num(check::torch_default_tolerance(t.dtype).atol)});
  }
  return "<p>The rtol the cases needed with assert_close's default atol, and the rtol the "
         "derived bound justifies in every case (docs/compare.md).</p>\n" +
         html::table("Tolerances per op, dtype, world size and tensor",
                     {"op / dtype / P / tensor", "cases", "failed", "max ratio", "median ratio",
                      "needed rtol", "justified rtol", "atol"},
                     rows, "numbers");
}

}  // namespace

std::string to_html(const CompareReport& r) {
  html::PlotData plots;
  int failed = 0;
  std::string fails;
  for (const auto& c : r.cases) {
    if (c.verdict.pass()) continue;
    ++failed;
    fails += "<article class=\"failure\">\n<h3>" + escape(c.dir) +
             "</h3>\n<p>Contract: " + escape(c.contract) + "</p>\n<pre>" +
             escape(c.verdict.explain()) + "</pre>\n" +
             html::replay("shardcheck compare " + c.dir) + "</article>\n";
  }
  const std::string intro = R"(<ul class="summary"><li>command: <code>)" + escape(r.command) +
                            "</code></li><li>started: " + escape(r.started) +
                            R"( (UTC)</li><li class=")" + (failed ? "bad" : "good") + R"(">)" +
                            std::to_string(r.cases.size()) +
                            " cases: " + std::to_string(static_cast<int>(r.cases.size()) - failed) +
                            " passed, " + std::to_string(failed) + " failed</li></ul>\n";
  std::vector<html::Section> sections;
  if (!fails.empty()) sections.push_back({"failures", "Failures", fails});
  if (!r.runs.empty()) sections.push_back({"runs", "Runs", runs(r)});
  sections.push_back({"numerics", "Bound ratios", numerics(r, plots)});
  sections.push_back({"profiles", "Worst cases along the sharded axis", profiles(r, plots)});
  sections.push_back({"cases", "Cases", cases_table(r)});
  sections.push_back({"tolerances", "Tolerances", tolerances(r)});
  return html::document("shardcheck compare", intro, sections, plots);
}

}  // namespace shardcheck::report
