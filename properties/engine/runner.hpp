// Running properties: one property against one implementation for a number of cases, with a
// seed, through RapidCheck (generation, classification, shrinking), collecting the statistics.
// The command line and the tests both run properties through here, so a failure in either
// replays in the other with the same seed.
#pragma once

#include "engine/collector.hpp"
#include "engine/suite.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::check {

struct RunParams {
  std::uint64_t seed = 1;
  int cases = 100;     // RapidCheck's max_success
  int max_size = 100;  // RapidCheck's max_size (keep <= 100: docs/building.md)
  bool shrink = true;
  // When set, every case drawn after this moment (but the first) passes at once without running (so
  // RapidCheck finishes its max_success quickly) and is not counted in PropertyOutcome::cases; a
  // failure found before it is shrunk in full (the deadline no longer applies once a case failed).
  // A run that stops at the deadline replays exactly with the same seed and cases: the failing case
  // comes before any skipped one.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

struct PropertyOutcome {
  std::string suite, property, impl;
  bool passed = false;
  bool gave_up = false;       // too many discarded cases
  int cases = 0;              // cases that ran and passed (before the failure, if any)
  bool hit_deadline = false;  // RunParams::deadline passed before max_success cases ran
  std::string message;        // failure: the shrunk case explained; gave up: why
  std::vector<std::pair<std::string, std::string>> counterexample;  // RapidCheck's
  std::map<std::vector<std::string>, int> tags;                     // RC_TAG distribution
  double max_ratio = 0;  // the largest bound ratio any case of this property recorded
};

// @throws UsageError for an unknown property or implementation of `suite`.
PropertyOutcome run_property(const Suite& suite, const std::string& property,
                             const std::string& impl, const RunConfig& config,
                             const RunParams& params, Collector& collector);

// What running a mutant against its suite found.
struct MutantKill {
  bool killed = false;
  std::string killed_by;       // the property that failed
  int cases = 0;               // cases of that property, the failing one included
  std::string counterexample;  // the shrunk failing case, explained
};

// Runs `suite`'s properties that apply to implementation `impl` (a mutant), in the suite's order,
// until one fails: the mutant-kill loop of `shardcheck mutants` and the tests, written once.
// @throws UsageError for an implementation `suite` does not have.
MutantKill kill_mutant(const Suite& suite, const std::string& impl, const RunConfig& config,
                       const RunParams& params, Collector& collector);

}  // namespace shardcheck::check
