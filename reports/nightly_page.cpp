// summary.html of scripts/nightly (reports/nightly_page.hpp). The numbers come from each night's
// summary.json as scripts/nightly.d/summary.py writes it; a harness or suite absent from a night
// is a gap (null) in its series and "-" in the tables.
#include "reports/nightly_page.hpp"

#include "reports/html_page.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <initializer_list>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardcheck::report {
namespace {

using html::escape;
using html::num;
using nlohmann::json;

struct Night {
  std::string from, date, verdict;
  int new_findings = 0;
  json summary;
};

Night parse(const std::string& from, const std::string& text) {
  json s;
  try {
    s = json::parse(text);
  } catch (const json::exception& e) {
    throw std::invalid_argument(from + ": not JSON (" + e.what() + ")");
  }
  if (!s.is_object() || s.value("schema", "") != "shardcheck-nightly/1") {
    throw std::invalid_argument(from +
                                ": schema: not a shardcheck-nightly/1 summary "
                                "(scripts/nightly's summary.json)");
  }
  for (const char* key : {"date", "verdict"}) {
    if (!s.contains(key) || !s[key].is_string()) {
      throw std::invalid_argument(from + ": " + key + ": missing or not a string");
    }
  }
  if (!s.contains("harnesses") || !s["harnesses"].is_array()) {
    throw std::invalid_argument(from + ": harnesses: missing or not an array");
  }
  const int findings = s.value("new_findings", 0);
  return Night{from, s["date"].get<std::string>(), s["verdict"].get<std::string>(), findings,
               std::move(s)};
}

// A number at path a.b.c of j, or NaN (a gap) when any part is missing or not a number.
double at(const json& j, std::initializer_list<const char*> path) {
  const json* p = &j;
  for (const char* k : path) {
    if (!p->is_object() || !p->contains(k)) return std::nan("");
    p = &(*p)[k];
  }
  return p->is_number() ? p->get<double>() : std::nan("");
}

double covered_lines(const json& h) {
  const double c = at(h, {"coverage", "lines", "covered"});
  const double n = at(h, {"coverage", "lines", "count"});
  return n > 0 ? 100.0 * c / n : std::nan("");
}

// The series of one quantity per harness over the nights, as a figure and its static table.
std::string per_harness(html::PlotData& plots, const std::vector<Night>& nights,
                        const std::set<std::string>& harnesses, const std::string& id,
                        const std::string& what, const std::string& y_title, bool log,
                        double (*value)(const json&)) {
  std::string x, series, caption = what + " per harness, one point per night";
  std::vector<std::vector<std::string>> rows;
  for (const auto& n : nights) x += (x.empty() ? "" : ",") + html::json_str(n.date);
  for (const auto& name : harnesses) {
    std::string values;
    std::vector<std::string> row = {escape(name)};
    for (const auto& n : nights) {
      double v = std::nan("");
      for (const auto& h : n.summary["harnesses"]) {
        if (h.value("name", "") == name) v = value(h);
      }
      values += (values.empty() ? "" : ",") + html::json_num(v);
      row.push_back(std::isnan(v) ? "-" : num(v));
    }
    series += std::string(series.empty() ? "" : ",") + R"({"name":)" + html::json_str(name) +
              R"(,"values":[)" + values + "]}";
    rows.push_back(std::move(row));
  }
  const std::string spec = R"({"type":"series","x":[)" + x + R"(],"series":[)" + series +
                           R"(],"x_title":"night","y_title":)" + html::json_str(y_title) +
                           R"(,"log":)" + (log ? "true" : "false") + "}";
  std::vector<std::string> header = {"harness"};
  for (const auto& n : nights) header.push_back(escape(n.date));
  return plots.figure(id, spec, what + " of each harness over the last nights", caption, 320) +
         html::table(what + " per harness and night", header, rows);
}

double exec_per_s(const json& h) { return at(h, {"fuzz", "exec_per_s"}); }
double corpus_after(const json& h) { return at(h, {"corpus", "after"}); }

std::string findings(html::PlotData& plots, const std::vector<Night>& nights) {
  std::string x, crashes, counterexamples;
  std::vector<std::vector<std::string>> rows;
  for (const auto& n : nights) {
    int c = 0;
    for (const auto& h : n.summary["harnesses"]) {
      c += h.contains("new_crashes") ? static_cast<int>(h["new_crashes"].size()) : 0;
    }
    const int total = n.new_findings;
    x += (x.empty() ? "" : ",") + html::json_str(n.date);
    crashes += (crashes.empty() ? "" : ",") + std::to_string(c);
    counterexamples += (counterexamples.empty() ? "" : ",") + std::to_string(total - c);
    rows.push_back(
        {escape(n.date), escape(n.verdict), std::to_string(c), std::to_string(total - c)});
  }
  const std::string spec = R"({"type":"series","x":[)" + x +
                           R"(],"series":[{"name":"new crashes","values":[)" + crashes +
                           R"(]},{"name":"new counterexamples","values":[)" + counterexamples +
                           R"(]}],"x_title":"night","y_title":"new findings","log":false})";
  return plots.figure("findings", spec, "new crashes and new counterexamples per night",
                      "New findings per night (0 on a clean night)", 260) +
         html::table("New findings per night",
                     {"night", "verdict", "new crashes", "new counterexamples"}, rows);
}

std::string tonight(const Night& n) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& h : n.summary["harnesses"]) {
    const double cov = covered_lines(h);
    rows.push_back({escape(h.value("name", "?")), num(exec_per_s(h)),
                    num(at(h, {"fuzz", "executions"})), num(at(h, {"fuzz", "edges"})),
                    std::isnan(cov) ? "not measured" : num(cov) + " %",
                    num(at(h, {"corpus", "before"})) + " &rarr; " + num(corpus_after(h)),
                    std::to_string(h.contains("new_crashes") ? h["new_crashes"].size() : 0)});
  }
  std::string body =
      "<p>Verdict: <strong>" + escape(n.verdict) + "</strong>, " + std::to_string(n.new_findings) +
      " new findings (" + escape(n.from) + ").</p>\n" +
      html::table(
          "The harnesses tonight",
          {"harness", "exec/s", "executions", "edges", "lines covered", "corpus", "new crashes"},
          rows);
  for (const auto& h : n.summary["harnesses"]) {
    for (const auto& c : h.value("new_crashes", json::array())) {
      body += "<article><h3>" + escape(h.value("name", "?")) + ": " + escape(c.value("slug", "?")) +
              "</h3>\n<p>" + escape(c.value("kind", "")) + "</p>\n" +
              html::replay(c.value("replay", "")) + "</article>\n";
    }
  }
  const json& p = n.summary.value("properties", json());
  if (p.is_object() && p.contains("suites") && p["suites"].is_object()) {
    std::vector<std::vector<std::string>> srows;
    for (const auto& [name, s] : p["suites"].items()) {
      std::string failed;
      for (const auto& f : s.value("failed", json::array())) {
        failed += (failed.empty() ? "" : ", ") + f.get<std::string>();
      }
      srows.push_back({escape(name), num(at(s, {"properties"})), num(at(s, {"cases"})),
                       num(at(s, {"worst_bound_ratio"})), failed.empty() ? "-" : escape(failed),
                       std::to_string(s.value("new_counterexamples", json::array()).size())});
    }
    body += html::table(
        "The property campaign tonight",
        {"suite", "properties", "cases", "worst bound ratio", "failed", "new counterexamples"},
        srows);
  }
  return body;
}

}  // namespace

std::string nightly_page(const std::vector<std::pair<std::string, std::string>>& texts) {
  if (texts.empty()) throw std::invalid_argument("nightly_page: no summary.json given");
  std::vector<Night> nights;
  nights.reserve(texts.size());
  for (const auto& [from, text] : texts) nights.push_back(parse(from, text));
  std::set<std::string> harnesses;
  for (const auto& n : nights) {
    for (const auto& h : n.summary["harnesses"]) harnesses.insert(h.value("name", "?"));
  }
  const Night& last = nights.back();
  html::PlotData plots;
  std::vector<html::Section> sections = {
      {"tonight", "Tonight (" + last.date + ")", tonight(last)},
      {"speed", "Executions per second",
       per_harness(plots, nights, harnesses, "speed", "Executions per second",
                   "executions per second (log scale)", true, &exec_per_s)},
      {"coverage", "Coverage",
       per_harness(plots, nights, harnesses, "coverage", "Lines covered (%)",
                   "lines covered (%, clang source-based coverage)", false, &covered_lines)},
      {"corpus", "Corpus",
       per_harness(plots, nights, harnesses, "corpus", "Corpus inputs",
                   "inputs in the kept corpus after the night", false, &corpus_after)},
      {"findings", "Findings", findings(plots, nights)}};
  const std::string intro = "<p>" + std::to_string(nights.size()) + " nights, " +
                            escape(nights.front().date) + " to " + escape(last.date) +
                            ": scripts/nightly's summaries (docs/nightly.md).</p>";
  return html::document("shardcheck nightly " + last.date, intro, sections, plots);
}

}  // namespace shardcheck::report
