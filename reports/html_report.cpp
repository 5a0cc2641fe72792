// report.html of `shardcheck check` and `shardcheck mutants`: the failures with their replay
// commands, the bound-ratio distributions and assert_close contrast per op x dtype x P, the
// worst cases' per-element errors along the sharded axis, the mutant kill matrix, and the
// properties. Layout and figures: reports/html_page.hpp; what each shows: docs/reports.md.
#include "engine/replay.hpp"
#include "reports/html_page.hpp"
#include "reports/op_rows.hpp"
#include "reports/report.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace shardcheck::report {

std::string replay_command(const Report& r, const std::string& suite, const std::string& property,
                           const std::string& impl) {
  const bool default_dtypes = r.config.dtypes == check::RunConfig{}.dtypes;
  return check::replay_command({suite, impl, property, r.seed, r.cases, r.config.max_world,
                                default_dtypes ? "" : check::dtype_operand(r.config.dtypes)});
}

namespace {

using html::escape;
using html::num;

// The numerics rows (reports/op_rows.hpp), labelled for the page.
std::map<OpRowKey, html::RatioRow> ratio_rows(const check::Collector& c) {
  std::map<OpRowKey, html::RatioRow> rows;
  for (const auto& [k, r] : op_rows(c)) {
    const auto& [impl, op, dtype, world] = k;
    rows[k] = {
        op + " " + std::string(name(static_cast<DType>(dtype))) + " P=" + std::to_string(world),
        r.cases,
        r.failed,
        r.max_err,
        r.max_ratio,
        r.false_alarms,
        r.missed,
        r.histogram};
  }
  return rows;
}

std::string numerics(const check::Collector& c, html::PlotData& plots) {
  std::map<std::string, std::vector<html::RatioRow>> by_impl;
  for (auto& [k, row] : ratio_rows(c)) by_impl[std::get<0>(k)].push_back(row);
  std::string s =
      "<p>Bound ratio = a tensor's largest |error| / its a-priori bound (pass &le; 1; "
      "derivations in docs/tolerances.md), one per tensor checked in a case. assert_close = "
      "torch.testing.assert_close with its default rtol/atol for the dtype.</p>\n";
  int n = 0;
  for (const auto& [impl, rows] : by_impl) {
    s += "<h3>" + escape(impl) + "</h3>\n" +
         html::ratio_section(plots, "numerics-" + std::to_string(n++), impl, rows);
  }
  return s;
}

// A statistic's worst case, for the profiles (grouped by implementation and op).
html::ProfileCase profile_case(const check::StatKey& k, const check::Stat& s) {
  return {std::string(s.failed_cases ? "FAIL " : "") + k.impl + " / " + k.property + ": " + k.op +
              " " + std::string(name(k.dtype)) + " P=" + std::to_string(k.world) + ", tensor " +
              k.tensor,
          s.worst_case,
          &s.worst_profile,
          s.max_ratio,
          s.failed_cases > 0,
          {k.impl, k.op}};
}

// Profiles: every failing statistic, then the worst passing one per (impl, op).
std::string profiles(const check::Collector& c, html::PlotData& plots) {
  std::vector<html::ProfileCase> cases;
  for (const auto& [k, s] : c.stats()) cases.push_back(profile_case(k, s));
  return html::profiles_section(
      plots, cases,
      "<p>The case with the largest bound ratio of each failing tensor (sharded tensors first), "
      "then of each op's worst passing tensor: err/bound of every element along the sharded "
      "axis, rank boundaries as vertical lines (a boundary bug shows as errors at a line).</p>\n",
      "<p>No case recorded a non-zero error.</p>\n");
}

std::string failures(const Report& r) {
  std::string s;
  for (const auto& p : r.properties) {
    if (p.passed) continue;
    s += "<article class=\"failure\">\n<h3>" +
         escape(p.suite + " / " + p.property + " / " + p.impl) + "</h3>\n<pre>" +
         escape(p.message) + "</pre>\n" +
         html::replay(replay_command(r, p.suite, p.property, p.impl)) + "</article>\n";
  }
  for (const auto& m : r.mutants) {
    if (!m.killed) continue;
    s += "<article class=\"failure\">\n<h3>" + escape(m.mutant + " killed by " + m.killed_by) +
         "</h3>\n<p>" + escape(m.description) + "</p>\n<pre>" + escape(m.counterexample) +
         "</pre>\n" + html::replay(replay_command(r, m.suite, m.killed_by, m.mutant)) +
         "</article>\n";
  }
  return s;
}

// One matrix per suite: mutant x property. A cell: the cases the property needed to kill the
// mutant (the failing one included); "passed N" for a property that ran every case without
// killing it; "not run" after the kill (kill_mutant stops there, engine/runner.hpp); "n/a" where
// the property does not apply to the mutant.
std::string mutant_matrix(const Report& r, html::PlotData& plots) {
  std::map<std::string, std::vector<const MutantOutcome*>> by_suite;
  for (const auto& m : r.mutants) by_suite[m.suite].push_back(&m);
  std::string s =
      "<p>Each mutant is a planted bug; the suite's properties run against it in order until "
      R"(one fails (kills it). A cell: the cases that property needed to kill it, "passed" )"
      R"(when every case passed, "not run" after the kill, "n/a" when the property does )"
      "not apply.</p>\n";
  for (const auto& [suite_name, mutants] : by_suite) {
    const auto* suite = check::SuiteRegistry::instance().find(suite_name);
    if (suite == nullptr) continue;
    const auto props = suite->properties();
    std::vector<std::string> header = {"mutant"};
    std::string columns;
    for (const auto& p : props) {
      header.push_back(p.name);
      columns += (columns.empty() ? "" : ",") + html::json_str(p.name);
    }
    std::vector<std::vector<std::string>> body;
    std::string cells, names, kill_cases;
    for (const auto* m : mutants) {
      std::vector<std::string> row = {escape(m->mutant)};
      std::string json_row;
      bool after_kill = false;
      for (const auto& p : props) {
        int code = -1;  // >0 cases to kill, 0 passed, -1 not run, -2 n/a
        std::string text = "not run";
        if (!suite->applies(p.name, m->mutant)) {
          code = -2;
          text = "n/a";
        } else if (m->killed && p.name == m->killed_by) {
          code = m->cases;
          text = "<strong>killed after " + std::to_string(m->cases) + "</strong>";
          after_kill = true;
        } else if (!after_kill) {
          code = 0;
          text = "passed " + std::to_string(r.cases);
        }
        row.push_back(text);
        json_row += (json_row.empty() ? "" : ",") + std::to_string(code);
      }
      body.push_back(std::move(row));
      cells += (cells.empty() ? "[" : ",[") + json_row + "]";
      names += (names.empty() ? "" : ",") + html::json_str(m->mutant);
      kill_cases += (kill_cases.empty() ? "" : ",") + std::to_string(m->killed ? m->cases : 0);
    }
    const std::string id = "mutants-" + suite_name;
    const int height = 80 + 24 * static_cast<int>(mutants.size());
    std::string matrix_json = R"({"type": "kill-matrix", "rows": [)";
    matrix_json.append(names).append(R"(], "cols": [)").append(columns);
    matrix_json.append(R"(], "cells": [)").append(cells).append("]}");
    std::string cases_json = R"({"type": "kill-cases", "rows": [)";
    cases_json.append(names).append(R"(], "cases": [)").append(kill_cases).append("]}");
    s += "<h3>" + escape(suite_name) + "</h3>\n<div class=\"pair\">\n";
    s += plots.figure(id + "-matrix", matrix_json,
                      "Matrix of the " + suite_name +
                          " mutants against its properties, coloured by cases to kill; the "
                          "table below holds every cell.",
                      "Kill matrix: cases to kill (darker: fewer), passed, not run, n/a.",
                      height + 120);
    s += plots.figure(id + "-cases", cases_json,
                      "Bars: cases each " + suite_name +
                          " mutant took to be killed (0: survived); the table below holds them.",
                      "Cases to kill each mutant (log scale; 0: survived).", height);
    s += "</div>\n";
    s +=
        html::table("Mutants of " + suite_name + " against its properties", header, body, "matrix");
  }
  return s;
}

}  // namespace

std::string to_html(const Report& r) {
  html::PlotData plots;
  const Counts n = count(r);
  std::string intro = R"(<ul class="summary"><li>command: <code>)" + escape(r.command) +
                      "</code></li><li>started: " + escape(r.started) + " (UTC)</li><li>seed " +
                      std::to_string(r.seed) + ", " + cases_text(r) + ", max world " +
                      std::to_string(r.config.max_world) + R"(</li><li class=")" +
                      (n.failed ? "bad" : "good") + R"(">properties: )" + std::to_string(n.passed) +
                      " passed, " + std::to_string(n.failed) + " failed</li>";
  if (!r.mutants.empty()) {
    const auto survived = static_cast<int>(r.mutants.size()) - n.killed;
    intro += R"(<li class=")" + std::string(survived ? "bad" : "good") + R"(">mutants: )" +
             std::to_string(n.killed) + " killed, " + std::to_string(survived) + " survived</li>";
  }
  intro += "</ul>\n";
  std::vector<html::Section> sections;
  if (const std::string f = failures(r); !f.empty()) {
    sections.push_back({"failures", r.mutants.empty() ? "Failures" : "Failures and kills", f});
  }
  if (!r.mutants.empty())
    sections.push_back({"mutants", "Mutant kill matrix", mutant_matrix(r, plots)});
  if (r.collector != nullptr && !r.collector->stats().empty()) {
    sections.push_back({"numerics", "Bound ratios", numerics(*r.collector, plots)});
    sections.push_back(
        {"profiles", "Worst cases along the sharded axis", profiles(*r.collector, plots)});
  }
  if (r.collector != nullptr && !r.collector->axis_stats().empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& w : r.collector->worst_per_axis()) {
      std::string worst;
      for (const auto& [tensor, a] : w.worst) {
        worst += (worst.empty() ? "" : ", ") + escape(tensor) + " (" + num(a.max_ratio) +
                 (a.failed_cases > 0 ? ", " + std::to_string(a.failed_cases) + " failed" : "") +
                 ")";
      }
      rows.push_back({escape(w.suite + "/" + w.property), escape(w.impl), escape(w.axis),
                      std::to_string(w.cases), worst});
    }
    sections.push_back(
        {"mesh-axes", "Worst tensors per mesh axis",
         "<p>For each named mesh axis, the cases where it is above size 1 and the three tensors "
         "with the largest bound ratio among them.</p>\n" +
             html::table("Worst tensors per mesh axis",
                         {"property", "implementation", "axis", "cases", "worst tensors"}, rows)});
  }
  std::vector<std::vector<std::string>> props;
  for (const auto& p : r.properties) {
    props.push_back({escape(p.suite + "/" + p.property), escape(p.impl), std::to_string(p.cases),
                     num(p.max_ratio),
                     p.passed    ? "pass"
                     : p.gave_up ? "gave up"
                                 : "<strong>FAIL</strong>"});
  }
  if (!props.empty()) {
    sections.push_back(
        {"properties", "Properties",
         html::table("Every property run",
                     {"property", "implementation", "passing cases", "max bound ratio", "verdict"},
                     props)});
  }
  return html::document("shardcheck report", intro, sections, plots);
}

}  // namespace shardcheck::report
