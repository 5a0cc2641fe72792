// report.md: what a user reads. Per op x dtype x P (over tensors and properties): cases, the
// largest error, bound ratio and ULP distance, what torch.testing.assert_close's default
// tolerance would have said, and the worst case; then the properties and the mutants.
#include "reports/report.hpp"

#include "reports/atomic_file.hpp"
#include "reports/op_rows.hpp"
#include "runtime/errors.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

namespace shardcheck::report {
namespace {

std::string md_num(double v) {
  if (std::isinf(v)) return "inf";
  if (std::isnan(v)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// Table cells may not hold newlines or pipes.
std::string cell(std::string s) {
  for (auto& c : s) {
    if (c == '\n') c = ' ';
    if (c == '|') c = '/';
  }
  return s;
}

}  // namespace

std::string cases_text(const Report& r) {
  if (r.time_seconds) {
    return "a timed campaign of " + std::to_string(*r.time_seconds) +
           " s (each property's cases below)";
  }
  return std::to_string(r.cases) + " cases per property";
}

std::string to_markdown(const Report& r) {
  std::ostringstream o;
  const Counts n = count(r);
  o << "# shardcheck report\n\n";
  o << "- command: `" << r.command << "`\n- started: " << r.started << " (UTC)\n- seed: " << r.seed
    << ", " << cases_text(r) << ", max world: " << r.config.max_world
    << "\n- properties: " << n.passed << " passed, " << n.failed << " failed\n";
  if (!r.mutants.empty()) {
    o << "- mutants: " << n.killed << " killed, " << r.mutants.size() - n.killed << " survived\n";
  }
  o << "\nBound ratio = max |error| / a-priori bound (pass <= 1; derivations in "
       "docs/tolerances.md). assert_close = torch.testing.assert_close with its default rtol/atol "
       "for the dtype, for contrast: \"false alarm\" counts correct cases it would fail, "
       "\"missed\" failing cases it would pass.\n";

  if (r.collector != nullptr && !r.collector->stats().empty()) {
    const auto rows = op_rows(*r.collector);
    std::string impl;
    for (const auto& [key, row] : rows) {
      const auto& [row_impl, op, dtype, world] = key;
      if (row_impl != impl) {
        impl = row_impl;
        o << "\n## Numerics: " << impl << "\n\n"
          << "| op | dtype | P | tensor checks | failed | max error | max bound ratio | max ULP "
             "| assert_close | worst case |\n|---|---|---|---|---|---|---|---|---|---|\n";
      }
      std::string verdict = "agrees";
      if (row.false_alarms != 0 || row.missed != 0) {
        verdict = std::to_string(row.false_alarms) + " false alarms, " +
                  std::to_string(row.missed) + " missed";
      }
      o << "| " << op << " | " << name(static_cast<DType>(dtype)) << " | " << world << " | "
        << row.cases << " | " << row.failed << " | " << md_num(row.max_err) << " | "
        << md_num(row.max_ratio) << " | " << md_num(row.max_ulp) << " | " << verdict << " | "
        << cell(row.worst) << " |\n";
    }
  }

  if (r.collector != nullptr && !r.collector->axis_stats().empty()) {
    o << "\n## Worst tensors per mesh axis\n\nFor each named mesh axis, the cases where it is "
         "above size 1 and the three tensors with the largest bound ratio among them: where "
         "the error grows as that axis partitions the step.\n\n"
         "| suite | property | implementation | axis | cases | worst tensors (bound ratio) |\n"
         "|---|---|---|---|---|---|\n";
    for (const auto& w : r.collector->worst_per_axis()) {
      std::string worst;
      for (const auto& [tensor, a] : w.worst) {
        worst += (worst.empty() ? "" : ", ") + tensor + " (" + md_num(a.max_ratio) +
                 (a.failed_cases > 0 ? ", " + std::to_string(a.failed_cases) + " failed" : "") +
                 ")";
      }
      o << "| " << w.suite << " | " << w.property << " | " << w.impl << " | " << w.axis << " | "
        << w.cases << " | " << cell(worst) << " |\n";
    }
  }

  o << "\n## Properties\n\n| suite | property | implementation | cases | max bound ratio | "
       "verdict |\n|---|---|---|---|---|---|\n";
  for (const auto& p : r.properties) {
    o << "| " << p.suite << " | " << p.property << " | " << p.impl << " | " << p.cases << " | "
      << md_num(p.max_ratio) << " | "
      << (p.passed    ? "pass"
          : p.gave_up ? "gave up"
                      : "**FAIL**")
      << " |\n";
  }
  if (!r.mutants.empty()) {
    o << "\n## Mutants\n\n| mutant | verdict | killed by | after cases | the bug |\n"
         "|---|---|---|---|---|\n";
    for (const auto& m : r.mutants) {
      o << "| " << m.mutant << " | " << (m.killed ? "killed" : "**SURVIVED**") << " | "
        << m.killed_by << " | " << m.cases << " | " << cell(m.description) << " |\n";
    }
  }
  bool any_failure = false;
  for (const auto& p : r.properties) any_failure |= !p.passed;
  if (any_failure) {
    o << "\n## Failures\n";
    for (const auto& p : r.properties) {
      if (p.passed) continue;
      o << "\n### " << p.suite << " / " << p.property << " / " << p.impl << "\n\n```\n"
        << p.message << "\n```\n";
    }
  }
  return o.str();
}

void write_report(const Report& r, const std::string& dir) {
  // Every text first: a failure to render leaves nothing half-written.
  write_report_files(dir, to_json(r), to_markdown(r), to_html(r));
}

}  // namespace shardcheck::report
