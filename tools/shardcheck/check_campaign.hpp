// The campaign parts of `shardcheck check` (docs/cli.md, "check"): a property run for a time
// budget instead of a fixed case count (--time), and the replay of an example database
// (--replay-db, replay_db.hpp) before the run. Both go through check::run_property, so every
// finding replays with `shardcheck check ... --seed S --cases N`.
#pragma once

#include "engine/collector.hpp"
#include "engine/runner.hpp"
#include "engine/suite.hpp"
#include "tools/shardcheck/replay_db.hpp"

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace shardcheck::cli {

// The element types of a comma-separated list ("float32,bfloat16").
// @throws UsageError "--dtype: unknown element type 'x'; use a comma-separated list of ...".
std::vector<DType> parse_dtypes(const std::string& text);

// The list parse_dtypes reads back: "float64,float32".
std::string dtype_list(const std::vector<DType>& dtypes);

// Cases per batch of a timed run: RapidCheck's default max_success, so batch 0 of seed S is the
// run `--seed S --cases 100`.
constexpr int timed_batch_cases = 100;

// The seed of batch j of a timed run with seed S: S + j * 0x9E3779B97F4A7C15 (mod 2^64; the
// 64-bit golden-ratio increment of SplitMix64, Steele et al., OOPSLA 2014), so batch 0 is S
// itself and the runs of seeds S and S + 1 share no batch.
std::uint64_t batch_seed(std::uint64_t seed, int batch);

struct TimedOutcome {
  check::PropertyOutcome outcome;  // cases: the sum over the batches; a failure: its batch's
  std::uint64_t seed = 0;          // the seed of the last batch run (the failing one)
  int batches = 0;                 // batches started
  double seconds = 0;              // wall time spent
};

// Runs `property` of `suite` on `impl` in batches of timed_batch_cases cases, batch j with
// batch_seed(seed, j), until `deadline` (the batch running then stops at its next case:
// RunParams::deadline) or a failure. Always runs at least one case.
// @throws UsageError as check::run_property.
TimedOutcome run_property_until(const check::Suite& suite, const std::string& property,
                                const std::string& impl, const check::RunConfig& config,
                                std::uint64_t seed, bool shrink,
                                std::chrono::steady_clock::time_point deadline,
                                check::Collector& collector);

struct ReplayTally {
  int still_failing = 0;   // the entry's command fails again
  int fixed = 0;           // it passes now
  int not_registered = 0;  // its suite, property or implementation is not in this program
};

// Replays every entry (in file order) with its own seed, cases, max-world and dtypes, printing
// one line each: "REPLAY FAIL" (with the shrunk case and its replay command), "REPLAY FIXED" (no
// longer failing, with the command) or "REPLAY SKIP" (not registered).
// @throws UsageError for an entry whose dtypes do not parse.
ReplayTally replay_entries(const std::vector<ReplayEntry>& entries, bool shrink,
                           check::Collector& collector, std::ostream& out);

// The text `check` prints under a FAIL line: every line of text indented by four spaces.
std::string indent(const std::string& text);

}  // namespace shardcheck::cli
