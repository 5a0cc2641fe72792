// The example database of `shardcheck check --replay-db FILE`: every failing case a run found,
// one JSON object per line (JSON Lines), so that the next run replays it first, as Hypothesis
// replays its example database (https://hypothesis.readthedocs.io/en/latest/database.html).
// A RapidCheck run replays exactly from its seed, case count, max size (fixed at 100 by the
// engine) and the run's configuration (max-world, dtypes): an entry stores those, and the shrunk
// counterexample it gave, as text. One line:
//
//   {"suite": "linear", "property": "matches_reference", "impl": "mutant:bias-on-every-rank",
//    "seed": 1, "cases": 100, "max_world": 8, "dtypes": "float32,float64",
//    "counterexample": "row_parallel_linear float32 P=3 ...", "found": "2026-12-02T03:00:00Z"}
//
// The file is append-only: a new failure is appended when no entry has the same suite,
// property, implementation and counterexample text; an entry that no longer fails stays (it
// guards the fix). Deleting a line forgets it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardcheck::cli {

struct ReplayEntry {
  std::string suite, property, impl;
  std::uint64_t seed = 1;
  int cases = 100;
  int max_world = 8;
  std::string dtypes;          // comma-separated, as --dtype takes them
  std::string counterexample;  // the shrunk failing case, as `check` printed it
  std::string found;           // ISO 8601 UTC time of the run that found it
};

// The entries of `path`, in file order; a missing file has none. Blank lines are skipped.
// @throws UsageError "--replay-db: 'FILE' line N: ..." for a line that is not a JSON object with
//         every field above of the right type, or "--replay-db: cannot read 'FILE'" for a file
//         that exists and cannot be read (a directory included).
std::vector<ReplayEntry> read_replay_db(const std::string& path);

// Checks that `path` can be appended to (creating it, empty, if missing), before a run starts.
// @throws UsageError "--replay-db: cannot write 'FILE': <reason>; pass a writable file".
void require_writable_replay_db(const std::string& path);

// Appends e as one line to `path` and flushes it, so an entry survives a run killed later.
// @throws UsageError "--replay-db: cannot write 'FILE'" when the append fails.
void append_replay_entry(const std::string& path, const ReplayEntry& e);

// Whether a and b are the same finding: suite, property, implementation and counterexample.
bool same_finding(const ReplayEntry& a, const ReplayEntry& b);

// The command that replays e: "shardcheck check SUITE --impl I --property P --seed S --cases N
// --max-world W --dtype LIST".
std::string replay_command(const ReplayEntry& e);

}  // namespace shardcheck::cli
