#include "tools/shardcheck/compare_command.hpp"

#include "cases/case_manifest.hpp"
#include "cases/run_manifest.hpp"
#include "compare/compare.hpp"
#include "compare/run_verdict.hpp"
#include "reports/compare_report.hpp"
#include "runtime/errors.hpp"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <system_error>
#include <vector>

namespace shardcheck::cli {
namespace {

struct CompareArgs {
  std::vector<std::string> operands;
  std::optional<std::string> report_dir;
};

// The case manifests an operand names: itself (a manifest, or a directory holding case.json),
// or each subdirectory holding case.json, in name order.
std::vector<std::string> cases_of(const std::string& operand) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(operand);
  if (!fs::exists(p, ec)) {
    throw UsageError("compare: " + operand +
                     ": no such file or directory; give a case "
                     "directory, its case.json, or a directory of case directories");
  }
  if (!fs::is_directory(p, ec) || fs::exists(p / "case.json", ec)) return {operand};
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(p, ec)) {
    if (e.is_directory() && fs::exists(e.path() / "case.json")) found.push_back(e.path().string());
  }
  if (found.empty()) {
    throw UsageError("compare: " + operand +
                     ": holds no case.json, and no subdirectory does; "
                     "write cases with python/shardcheck_case.py (docs/case-format.md)");
  }
  std::sort(found.begin(), found.end());
  return found;
}

// Whether an operand is a whole run: a directory holding run.json, or run.json itself.
bool is_run(const std::string& operand) {
  return cases::is_run_dir(operand) || std::filesystem::path(operand).filename() == "run.json";
}

void print_case(std::ostream& out, const check::CompareResult& r) {
  const auto& v = r.verdict;
  out << (v.pass() ? "PASS " : "FAIL ") << r.dir << ": " << v.op << " " << name(v.dtype)
      << " P=" << v.world;
  if (!r.implementation.empty()) out << " [" << r.implementation << "]";
  out << "\n  case: " << v.case_text << "\n  contract: " << r.contract << "\n";
  for (const auto& t : v.tensors) {
    out << "  " << (t.pass() ? "ok   " : "FAIL ") << t.summary() << "\n";
    if (const auto* b = r.baseline_of(t.name)) {
      out << "       baseline"
          << (r.baseline_implementation.empty() ? "" : " [" + r.baseline_implementation + "]")
          << ": " << b->summary() << "; the implementation's error is "
          << check::baseline_error_ratio(t, *b) << "x the baseline's\n";
    }
  }
  for (const auto& f : v.failures) out << "  FAIL " << f << "\n";
  for (const auto& d : check::diagnosis_lines(r)) out << "  diagnosis: " << d << "\n";
  if (!v.pass()) {
    for (const auto& t : v.tensors) {
      if (t.pass()) continue;
      std::string e = t.explain();
      if (!e.empty() && e.back() != '\n') e += '\n';
      out << "  " << e;
    }
  }
}

}  // namespace

Command compare_command() {
  const auto a = std::make_shared<CompareArgs>();
  Command c;
  c.name = "compare";
  c.summary =
      "judge cases an outside implementation wrote (.npy + case.json) against the reference";
  c.description =
      "Reads each case (a directory with case.json and .npy files, docs/case-format.md), computes "
      "the op's high-precision reference from the case's inputs, and judges every output and "
      "gradient the case gives under the derived bound, as the op's suite judges its own runs: "
      "per tensor the bound ratio, ulps, NaN/Inf placement, the worst element with the rank that "
      "owns it and its distance to the nearest shard boundary, and what assert_close's default "
      "tolerance would say. Per-rank outputs are also checked for layout (each rank's piece must "
      "have the local shape the op's spec gives it). When a tensor fails, the diagnosis names the "
      "known bug signatures (the suite's mutants, run on the case's inputs) the outputs match "
      "(docs/compare.md, \"Diagnosis\"). Every case is read before anything is printed or "
      "written. A whole run (a directory holding run.json: a dump's cases in dataflow order, "
      "docs/case-format.md) is judged step by step, each op on its own inputs, its dataflow "
      "links (run.json's \"links\") are checked bit for bit, and the first step that fails is "
      "named with its tensor and rank.";
  c.operands = "CASE...";
  c.operands_help =
      "case directories, case.json files, directories of case directories, or run directories "
      "(run.json) (required)";
  c.options = {{"--report", "DIR",
                "write DIR/report.md, DIR/report.json and DIR/report.html (every case, every "
                "tensor, and the tolerance table per op x dtype x P x tensor), each atomically",
                "none", [a](const std::string& v) { a->report_dir = v; }}};
  c.exit_status =
      "0 every tensor of every case passed; 1 a tensor failed or a run's dataflow link is "
      "broken; 2 bad input (a malformed or "
      "missing file, an unknown op or config field, a wrong shape or element type), on one line "
      "naming the file and the field, with nothing written.";
  c.examples = {"shardcheck compare cases/linear_ok",
                "shardcheck compare cases/ --report reports/out/compare",
                "shardcheck compare dumps/step3   # a whole run: dumps/step3/run.json"};
  c.operand = [a](const std::string& v) { a->operands.push_back(v); };
  c.run = [a](std::ostream& out, const std::string& command_line) {
    if (a->operands.empty()) throw UsageError("compare needs at least one CASE");
    report::CompareReport rep;
    rep.command = command_line;
    rep.started = now_utc();
    for (const auto& operand : a->operands) {
      if (is_run(operand)) {
        rep.runs.push_back(check::judge_run(cases::read_run_manifest(operand)));
        for (const auto& step : rep.runs.back().steps) rep.cases.push_back(step);
        continue;
      }
      for (const auto& dir : cases_of(operand)) {
        rep.cases.push_back(check::compare_case(cases::read_case_manifest(dir)));
        rep.cases.back().dir = dir;
      }
    }
    int failed = 0;
    for (const auto& r : rep.cases) {
      print_case(out, r);
      failed += r.verdict.pass() ? 0 : 1;
    }
    std::size_t broken = 0;
    for (const auto& run : rep.runs) {
      for (const auto& l : run.links) {
        if (!l.problem.empty()) out << "link broken: " << l.problem << "\n";
      }
      broken += run.broken_links();
      out << run.summary() << "\n";
    }
    out << "compare: " << rep.cases.size() << " cases, " << rep.cases.size() - failed << " passed, "
        << failed << " failed";
    if (broken > 0) out << "; " << broken << (broken == 1 ? " link" : " links") << " broken";
    out << "\n";
    if (a->report_dir) {
      report::write_compare_report(rep, *a->report_dir);
      out << "report: " << *a->report_dir << "/report.md, " << *a->report_dir << "/report.json, "
          << *a->report_dir << "/report.html\n";
    }
    return failed == 0 && broken == 0 ? 0 : 1;
  };
  return c;
}

}  // namespace shardcheck::cli
