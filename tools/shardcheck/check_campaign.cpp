#include "tools/shardcheck/check_campaign.hpp"

#include "engine/replay.hpp"
#include "runtime/errors.hpp"

#include <algorithm>
#include <ostream>

namespace shardcheck::cli {
namespace {

constexpr DType all_dtypes[] = {DType::float64, DType::float32, DType::bfloat16, DType::float16};

const check::Suite* registered(const ReplayEntry& e) {
  const auto* s = check::SuiteRegistry::instance().find(e.suite);
  if (s == nullptr) return nullptr;
  bool has_property = false;
  bool has_impl = false;
  for (const auto& p : s->properties()) has_property |= p.name == e.property;
  for (const auto& i : s->implementations()) has_impl |= i.name == e.impl;
  return has_property && has_impl ? s : nullptr;
}

}  // namespace

std::string dtype_list(const std::vector<DType>& dtypes) { return check::dtype_operand(dtypes); }

std::vector<DType> parse_dtypes(const std::string& text) {
  std::vector<DType> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    bool found = false;
    for (const DType t : all_dtypes) {
      if (item == name(t)) {
        out.push_back(t);
        found = true;
      }
    }
    if (!found) {
      throw UsageError("--dtype: unknown element type '" + item +
                       "'; use a comma-separated list of " +
                       dtype_list({std::begin(all_dtypes), std::end(all_dtypes)}));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::uint64_t batch_seed(std::uint64_t seed, int batch) {
  return seed + static_cast<std::uint64_t>(batch) * 0x9E3779B97F4A7C15ULL;
}

TimedOutcome run_property_until(const check::Suite& suite, const std::string& property,
                                const std::string& impl, const check::RunConfig& config,
                                std::uint64_t seed, bool shrink,
                                std::chrono::steady_clock::time_point deadline,
                                check::Collector& collector) {
  const auto start = std::chrono::steady_clock::now();
  TimedOutcome t;
  int cases = 0;
  for (;; ++t.batches) {
    check::RunParams params;
    params.seed = batch_seed(seed, t.batches);
    params.cases = timed_batch_cases;
    params.shrink = shrink;
    params.deadline = deadline;  // the engine always runs a batch's first case
    t.seed = params.seed;
    auto r = check::run_property(suite, property, impl, config, params, collector);
    cases += r.cases;
    const bool stop = !r.passed || r.hit_deadline || std::chrono::steady_clock::now() >= deadline;
    if (t.batches > 0) {
      for (const auto& [tag, n] : t.outcome.tags) r.tags[tag] += n;
      r.max_ratio = std::max(r.max_ratio, t.outcome.max_ratio);
    }
    t.outcome = std::move(r);
    if (stop) break;
  }
  ++t.batches;
  t.outcome.cases = cases;
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return t;
}

ReplayTally replay_entries(const std::vector<ReplayEntry>& entries, bool shrink,
                           check::Collector& collector, std::ostream& out) {
  ReplayTally tally;
  for (const auto& e : entries) {
    const std::string what = e.suite + "/" + e.property + " [" + e.impl + "]";
    const auto* suite = registered(e);
    if (suite == nullptr) {
      ++tally.not_registered;
      out << "REPLAY SKIP   " << what
          << "  not registered in this program (suite, property or implementation)\n";
      continue;
    }
    check::RunConfig config;
    config.max_world = e.max_world;
    config.dtypes = parse_dtypes(e.dtypes);
    check::RunParams params;
    params.seed = e.seed;
    params.cases = e.cases;
    params.shrink = shrink;
    const auto r = check::run_property(*suite, e.property, e.impl, config, params, collector);
    if (r.passed) {
      ++tally.fixed;
      out << "REPLAY FIXED  " << what << "  no longer fails (" << r.cases << " cases pass; found "
          << e.found << "): " << replay_command(e) << "\n";
    } else {
      ++tally.still_failing;
      out << "REPLAY FAIL   " << what << "  fails again after " << r.cases
          << " passing cases (found " << e.found << "):\n"
          << indent(r.message) << "\n  replay: " << replay_command(e) << "\n";
    }
  }
  return tally;
}

std::string indent(const std::string& text) {
  std::string out = "    ";
  for (const char c : text) {
    out += c;
    if (c == '\n') out += "    ";
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '\n')) out.pop_back();
  return out;
}

}  // namespace shardcheck::cli
