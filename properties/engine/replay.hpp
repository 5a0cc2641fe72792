// The command line that replays one property of `shardcheck check` exactly: the same suite,
// implementation, property, seed, case count, largest world and element types draw the same
// cases and shrink to the same counterexample. Written once for every place that prints it (the
// terminal, report.html, the replay database of timed campaigns).
#pragma once

#include "runtime/dtype.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace shardcheck::check {

struct ReplaySpec {
  std::string suite, impl, property;
  std::uint64_t seed = 0;
  long long cases = 0;
  int max_world = 1;
  std::string dtypes;  // the --dtype operand ("float64,float32", dtype_operand); empty: none
};

// "float64,float32": the --dtype operand.
inline std::string dtype_operand(const std::vector<DType>& dtypes) {
  std::string s;
  for (const DType t : dtypes) s += (s.empty() ? "" : ",") + std::string(name(t));
  return s;
}

// "shardcheck check SUITE --impl IMPL --property P --seed S --cases N --max-world W
// [--dtype T,...]".
inline std::string replay_command(const ReplaySpec& r) {
  std::string s = "shardcheck check " + r.suite + " --impl " + r.impl + " --property " +
                  r.property + " --seed " + std::to_string(r.seed) + " --cases " +
                  std::to_string(r.cases) + " --max-world " + std::to_string(r.max_world);
  if (!r.dtypes.empty()) s += " --dtype " + r.dtypes;
  return s;
}

}  // namespace shardcheck::check
