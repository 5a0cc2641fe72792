// Collects what the cases of a run measured, for the summary lines and the reports: per
// (suite, property, implementation, op, dtype, P, tensor) the number of cases, the largest
// error, bound ratio and ULP distance, how often a fixed assert_close tolerance disagreed with
// the bound's verdict, the distribution of the cases' bound ratios, and the worst case in words
// with its per-element error profile (engine/tensor_check.hpp, at most 4096 cells); and per
// named mesh axis (pp, dp, cp, tp of the model) each tensor's worst case among the cases with that
// axis above size 1, so a report says along which axis the error grows.
#pragma once

#include "engine/verdict.hpp"

#include <array>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace shardcheck::check {

struct StatKey {
  std::string suite, property, impl, op;
  DType dtype;
  int world;
  std::string tensor;
  auto tie() const { return std::tie(suite, property, impl, op, dtype, world, tensor); }
  friend bool operator<(const StatKey& a, const StatKey& b) { return a.tie() < b.tie(); }
};

// The bins of the bound-ratio histogram: a case's ratio (its tensor's largest err/bound) falls in
// bin k when kRatioEdges[k-1] < ratio <= kRatioEdges[k] (bin 0: ratio == 0, an exact result; the
// last bin: above 10, NaN/Inf mismatches included). Bins 0-6 pass (ratio <= 1), 7-8 fail.
constexpr std::array<double, 8> kRatioEdges = {0, 1e-4, 1e-3, 1e-2, 0.1, 0.5, 1, 10};
constexpr std::size_t kRatioBins = kRatioEdges.size() + 1;
std::size_t ratio_bin(double ratio);
// "0", "(0, 1e-4]", ..., "(1, 10]", "> 10"
std::string ratio_bin_label(std::size_t bin);

struct Stat {
  int cases = 0;
  int failed_cases = 0;
  double max_abs_err = 0;
  double max_ratio = 0;
  double max_ulp = 0;
  // assert_close's defaults, for contrast: cases it would fail although the bound passes
  // (a false alarm) and cases it would pass although the bound fails (a missed bug).
  int fixed_false_alarms = 0;
  int fixed_missed = 0;
  std::array<int, kRatioBins> ratio_histogram{};  // cases per bin of their bound ratio
  std::string worst_case;                         // explanation of the case with the largest ratio
  ErrorProfile worst_profile;  // that case's per-element errors along the sharded axis
};

// Per mesh axis (CaseVerdict::mesh_axes): a tensor's cases with that axis above size 1.
struct AxisKey {
  std::string suite, property, impl, axis, tensor;
  auto tie() const { return std::tie(suite, property, impl, axis, tensor); }
  friend bool operator<(const AxisKey& a, const AxisKey& b) { return a.tie() < b.tie(); }
};

struct AxisStat {
  int cases = 0;
  int failed_cases = 0;
  double max_ratio = 0;    // +inf when a case had a NaN/Inf mismatch or a wrong shape
  std::string worst_case;  // the case with the largest ratio, explained
};

// One row of the report's "worst tensors per mesh axis": the `most` tensors with the largest
// ratio among the cases with `axis` above 1, largest first, with the number of such cases.
struct AxisWorst {
  std::string suite, property, impl, axis;
  int cases = 0;  // cases with the axis above 1 (the most any one tensor saw)
  std::vector<std::pair<std::string, AxisStat>> worst;
};

class Collector {
 public:
  // The collector cases record to, or null. Set for the duration of a run by ActiveCollector.
  static Collector* active();

  void set_context(std::string suite, std::string property, std::string impl);
  void record(const CaseVerdict& v);

  const std::map<StatKey, Stat>& stats() const { return stats_; }
  const std::map<AxisKey, AxisStat>& axis_stats() const { return axis_stats_; }
  // Per (suite, property, impl, axis), in that order: the `most` worst tensors.
  std::vector<AxisWorst> worst_per_axis(std::size_t most = 3) const;
  // Largest bound ratio recorded for (suite, property, impl); 0 when nothing was recorded.
  double max_ratio(const std::string& suite, const std::string& property,
                   const std::string& impl) const;

 private:
  std::string suite_, property_, impl_;
  std::map<StatKey, Stat> stats_;
  std::map<AxisKey, AxisStat> axis_stats_;
};

// Makes `c` the active collector while in scope.
class ActiveCollector {
 public:
  explicit ActiveCollector(Collector& c);
  ~ActiveCollector();
  ActiveCollector(const ActiveCollector&) = delete;
  ActiveCollector& operator=(const ActiveCollector&) = delete;
  ActiveCollector(ActiveCollector&&) = delete;
  ActiveCollector& operator=(ActiveCollector&&) = delete;

 private:
  Collector* previous_;
};

}  // namespace shardcheck::check
