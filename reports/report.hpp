// The report of one `shardcheck check` or `shardcheck mutants` run, and its writers:
// report.json (schema: docs/report-schema.md) and report.md (tables per op x dtype x P).
#pragma once

#include "engine/collector.hpp"
#include "engine/runner.hpp"
#include "engine/suite.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardcheck::report {

struct MutantOutcome {
  std::string suite;
  std::string mutant;       // "mutant:bias-on-every-rank"
  std::string description;  // the bug
  bool killed = false;
  std::string killed_by;       // the property that failed
  int cases = 0;               // cases of that property up to and including the failing one
  std::string counterexample;  // the shrunk failing case, explained
};

struct Report;
// "100 cases per property", or "a timed campaign of 600 s" (under --time).
std::string cases_text(const Report& r);

struct Report {
  std::string command;  // the command line that produced it
  std::string started;  // ISO 8601, UTC
  std::uint64_t seed = 0;
  int cases = 0;  // cases per property (--cases); 0 for a timed campaign
  // --time: the campaign's budget in seconds; each property's own `cases` says how many ran.
  std::optional<long long> time_seconds;
  check::RunConfig config;
  std::vector<check::PropertyOutcome> properties;
  std::vector<MutantOutcome> mutants;
  const check::Collector* collector = nullptr;  // per (op, dtype, P, tensor) statistics
};

// Writes dir/report.json, dir/report.md and dir/report.html (creating dir), each atomically.
// @throws UsageError naming the path when it cannot be created or written.
void write_report(const Report& r, const std::string& dir);

// The summary every format opens with: properties passed and failed, mutants killed.
struct Counts {
  int passed = 0, failed = 0, killed = 0;
};
inline Counts count(const Report& r) {
  Counts n;
  for (const auto& p : r.properties) (p.passed ? n.passed : n.failed) += 1;
  for (const auto& m : r.mutants) n.killed += m.killed ? 1 : 0;
  return n;
}

std::string to_json(const Report& r);
std::string to_markdown(const Report& r);
// report.html: one self-contained page (plots inlined, no network; docs/reports.md).
std::string to_html(const Report& r);

// The command that replays property `property` of `suite` on implementation `impl` as run in
// `r` (its seed, cases, max world and, unless they are the default, dtypes):
// "shardcheck check SUITE --impl IMPL --property P --seed S --cases N --max-world W".
std::string replay_command(const Report& r, const std::string& suite, const std::string& property,
                           const std::string& impl);

}  // namespace shardcheck::report
