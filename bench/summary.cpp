#include "summary.hpp"

#include <array>
#include <cstdint>
#include <iomanip>
#include <set>
#include <sstream>
#include <string_view>

namespace shardcheck::bench {
namespace {

// The goals (issue 2, "Benchmarks").
constexpr int goal_all_reduce_p = 2;
constexpr double goal_all_reduce_bytes = 8.0 * (1 << 20);
constexpr double goal_busbw_pct = 50.0;     // all_reduce busbw >= 50% of memcpy
constexpr double goal_barrier_ratio = 1.5;  // barrier <= 1.5 x omp barrier
constexpr std::array<int, 3> goal_barrier_ps = {2, 8, 16};

constexpr std::array<std::string_view, 3> bandwidth_families = {
    "all_reduce/ring", "all_reduce/sequential", "all_gather"};

std::string size_name(double bytes) {
  const auto b = static_cast<std::int64_t>(bytes);
  if (b >= (1 << 20) && b % (1 << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= (1 << 10) && b % (1 << 10) == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

double counter(const std::map<std::string, double>& c, const std::string& name) {
  const auto it = c.find(name);
  return it == c.end() ? 0.0 : it->second;
}

}  // namespace

void Summary::add(const benchmark::BenchmarkReporter::Run& run) {
  if (run.error_occurred) return;
  const bool median = run.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate;
  if (median && run.aggregate_name != "median") return;
  std::map<std::string, double> values;
  for (const auto& [name, c] : run.counters) values[name] = c.value;
  const auto key = std::make_pair(static_cast<int>(counter(values, "P")), counter(values, "bytes"));
  Row& row = rows_[run.run_name.function_name][key];
  if (row.median && !median) return;
  row = {std::move(values), median};
}

void Summary::print(std::ostream& out) const {
  out << "\n## Summary (shardcheck_bench)\n";

  // Bandwidth: one table per P, rows by size.
  std::set<std::pair<int, double>> points;
  for (const auto family : bandwidth_families) {
    const auto it = rows_.find(std::string(family));
    if (it == rows_.end()) continue;
    for (const auto& [key, row] : it->second) points.insert(key);
  }
  int current_p = -1;
  for (const auto& point : points) {
    if (point.first != current_p) {
      current_p = point.first;
      out << "\n### Bus bandwidth, P = " << current_p
          << " (GB/s: busbw / memcpy measured beside it = ratio)\n\n"
          << "| size | all_reduce ring | all_reduce sequential | all_gather |\n"
          << "|---:|---:|---:|---:|\n";
    }
    out << "| " << size_name(point.second) << " |";
    for (const auto family : bandwidth_families) {
      const auto fit = rows_.find(std::string(family));
      const Row* row = nullptr;
      if (fit != rows_.end()) {
        const auto rit = fit->second.find(point);
        if (rit != fit->second.end()) row = &rit->second;
      }
      if (row == nullptr) {
        out << " – |";
        continue;
      }
      out << " " << fixed(counter(row->counters, "busbw") / 1e9, 2) << " / "
          << fixed(counter(row->counters, "memcpy") / 1e9, 2) << " = "
          << fixed(counter(row->counters, "busbw_pct"), 0) << "% |";
    }
    out << "\n";
  }

  const auto barrier_it = rows_.find("barrier");
  if (barrier_it != rows_.end()) {
    out << "\n### Barrier latency (µs per barrier)\n\n"
        << "| P | comm.barrier() | #pragma omp barrier | ratio |\n|---:|---:|---:|---:|\n";
    for (const auto& [key, row] : barrier_it->second) {
      out << "| " << key.first << " | " << fixed(counter(row.counters, "barrier_us"), 2) << " | "
          << fixed(counter(row.counters, "omp_us"), 2) << " | "
          << fixed(counter(row.counters, "vs_omp_pct") / 100.0, 2) << "× |\n";
    }
  }

  out << "\n### Goals (issue 2)\n\n";
  for (const std::string_view family : {"all_reduce/ring", "all_reduce/sequential"}) {
    const auto fit = rows_.find(std::string(family));
    if (fit == rows_.end()) continue;
    const auto rit = fit->second.find({goal_all_reduce_p, goal_all_reduce_bytes});
    if (rit == fit->second.end()) continue;
    const double pct = counter(rit->second.counters, "busbw_pct");
    out << "- " << family << ", P = " << goal_all_reduce_p << ", "
        << size_name(goal_all_reduce_bytes) << ": busbw "
        << fixed(counter(rit->second.counters, "busbw") / 1e9, 2) << " GB/s = " << fixed(pct, 0)
        << "% of memcpy (goal ≥ " << fixed(goal_busbw_pct, 0)
        << "%): " << (pct >= goal_busbw_pct ? "met" : "NOT met") << "\n";
  }
  if (barrier_it != rows_.end()) {
    for (const int p : goal_barrier_ps) {
      const auto rit = barrier_it->second.find({p, 0.0});
      if (rit == barrier_it->second.end()) continue;
      const double ratio = counter(rit->second.counters, "vs_omp_pct") / 100.0;
      out << "- barrier, P = " << p << ": " << fixed(ratio, 2) << "× OpenMP's (goal ≤ "
          << fixed(goal_barrier_ratio, 1)
          << "×): " << (ratio <= goal_barrier_ratio ? "met" : "NOT met") << "\n";
    }
  }
}

}  // namespace shardcheck::bench
