// report.json: see docs/report-schema.md. Hand-written (no JSON dependency): strings escaped
// per RFC 8259, numbers the shortest that read back, non-finite numbers written as null.
#include "reports/report.hpp"

#include "ops/op_spec.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace shardcheck::report {
namespace {

// RFC 8259 strings and numbers: the op specs' writers (ops/op_spec.hpp), one escaping for every
// JSON shardcheck prints.
std::string str(const std::string& s) { return spec::json_string(s); }

std::string json_num(double v) { return spec::json_number(v); }

std::string boolean(bool b) { return b ? "true" : "false"; }

}  // namespace

std::string to_json(const Report& r) {
  std::ostringstream o;
  const auto [passed, failed, killed] = count(r);
  o << "{\n  \"schema\": \"shardcheck-report/1\",\n";
  o << "  \"command\": " << str(r.command) << ",\n";
  o << "  \"started\": " << str(r.started) << ",\n";
  o << "  \"seed\": " << r.seed << ",\n  \"cases\": ";
  if (r.time_seconds) {
    o << "null,\n  \"time_seconds\": " << *r.time_seconds << ",\n";
  } else {
    o << r.cases << ",\n";
  }
  o << R"(  "config": {"max_world": )" << r.config.max_world << ", \"dtypes\": [";
  for (std::size_t i = 0; i < r.config.dtypes.size(); ++i) {
    o << (i ? ", " : "") << str(std::string(name(r.config.dtypes[i])));
  }
  o << "]},\n";
  o << R"(  "summary": {"passed": )" << passed << ", \"failed\": " << failed
    << ", \"mutants_killed\": " << killed
    << ", \"mutants_survived\": " << static_cast<int>(r.mutants.size()) - killed << "},\n";
  o << "  \"properties\": [";
  for (std::size_t i = 0; i < r.properties.size(); ++i) {
    const auto& p = r.properties[i];
    o << (i ? "," : "") << "\n    {\"suite\": " << str(p.suite)
      << ", \"property\": " << str(p.property) << ", \"implementation\": " << str(p.impl)
      << ", \"passed\": " << boolean(p.passed) << ", \"gave_up\": " << boolean(p.gave_up)
      << ", \"cases\": " << p.cases << ", \"max_bound_ratio\": " << json_num(p.max_ratio)
      << ", \"message\": " << str(p.message) << ", \"counterexample\": [";
    for (std::size_t k = 0; k < p.counterexample.size(); ++k) {
      o << (k ? ", " : "") << "[" << str(p.counterexample[k].first) << ", "
        << str(p.counterexample[k].second) << "]";
    }
    o << "], \"tags\": [";
    std::size_t k = 0;
    for (const auto& [tags, count] : p.tags) {
      o << (k++ ? ", " : "") << "{\"tags\": [";
      for (std::size_t j = 0; j < tags.size(); ++j) o << (j ? ", " : "") << str(tags[j]);
      o << "], \"count\": " << count << "}";
    }
    o << "]}";
  }
  o << "\n  ],\n  \"mutants\": [";
  for (std::size_t i = 0; i < r.mutants.size(); ++i) {
    const auto& m = r.mutants[i];
    o << (i ? "," : "") << "\n    {\"suite\": " << str(m.suite) << ", \"mutant\": " << str(m.mutant)
      << ", \"description\": " << str(m.description) << ", \"killed\": " << boolean(m.killed)
      << ", \"killed_by\": " << str(m.killed_by) << ", \"cases\": " << m.cases
      << ", \"counterexample\": " << str(m.counterexample) << "}";
  }
  o << "\n  ],\n  \"statistics\": [";
  if (r.collector != nullptr) {
    std::size_t i = 0;
    for (const auto& [k, s] : r.collector->stats()) {
      o << (i++ ? "," : "") << "\n    {\"suite\": " << str(k.suite)
        << ", \"property\": " << str(k.property) << ", \"implementation\": " << str(k.impl)
        << ", \"op\": " << str(k.op) << ", \"dtype\": " << str(std::string(name(k.dtype)))
        << ", \"world\": " << k.world << ", \"tensor\": " << str(k.tensor)
        << ", \"cases\": " << s.cases << ", \"failed_cases\": " << s.failed_cases
        << ", \"max_abs_error\": " << json_num(s.max_abs_err)
        << ", \"max_bound_ratio\": " << json_num(s.max_ratio)
        << ", \"max_ulp\": " << json_num(s.max_ulp)
        << ", \"fixed_tolerance_false_alarms\": " << s.fixed_false_alarms
        << ", \"fixed_tolerance_missed\": " << s.fixed_missed
        << ", \"worst_case\": " << str(s.worst_case) << "}";
    }
  }
  o << "\n  ],\n  \"mesh_axes\": [";
  if (r.collector != nullptr) {
    std::size_t i = 0;
    for (const auto& w : r.collector->worst_per_axis()) {
      o << (i++ ? "," : "") << "\n    {\"suite\": " << str(w.suite)
        << ", \"property\": " << str(w.property) << ", \"implementation\": " << str(w.impl)
        << ", \"axis\": " << str(w.axis) << ", \"cases\": " << w.cases << ", \"worst\": [";
      for (std::size_t k = 0; k < w.worst.size(); ++k) {
        const auto& [tensor, a] = w.worst[k];
        o << (k ? ", " : "") << "{\"tensor\": " << str(tensor) << ", \"cases\": " << a.cases
          << ", \"failed_cases\": " << a.failed_cases
          << ", \"max_bound_ratio\": " << json_num(a.max_ratio)
          << ", \"worst_case\": " << str(a.worst_case) << "}";
      }
      o << "]}";
    }
  }
  o << "\n  ]\n}\n";
  return o.str();
}

}  // namespace shardcheck::report
