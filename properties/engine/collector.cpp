#include "engine/collector.hpp"

#include "engine/format_number.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardcheck::check {
namespace {
Collector* g_active = nullptr;  // the main thread's; cases run on the main thread only
}  // namespace

std::size_t ratio_bin(double ratio) {
  if (!(ratio > 0)) return std::isnan(ratio) ? kRatioBins - 1 : 0;
  const auto* edge = std::lower_bound(kRatioEdges.begin() + 1, kRatioEdges.end(), ratio);
  return static_cast<std::size_t>(edge - kRatioEdges.begin());
}

std::string ratio_bin_label(std::size_t bin) {
  if (bin == 0) return "0";
  if (bin >= kRatioEdges.size()) return "> " + format_number(kRatioEdges.back());
  return "(" + format_number(kRatioEdges[bin - 1]) + ", " + format_number(kRatioEdges[bin]) + "]";
}

Collector* Collector::active() { return g_active; }

ActiveCollector::ActiveCollector(Collector& c) : previous_(g_active) { g_active = &c; }
ActiveCollector::~ActiveCollector() { g_active = previous_; }

void Collector::set_context(std::string suite, std::string property, std::string impl) {
  suite_ = std::move(suite);
  property_ = std::move(property);
  impl_ = std::move(impl);
}

void Collector::record(const CaseVerdict& v) {
  for (const auto& t : v.tensors) {
    Stat& s = stats_[{suite_, property_, impl_, v.op, v.dtype, v.world, t.name}];
    ++s.cases;
    if (!t.pass()) ++s.failed_cases;
    s.max_abs_err = std::max(s.max_abs_err, t.max_abs_err);
    s.max_ulp = std::max(s.max_ulp, t.max_ulp);
    if (!t.fixed_tolerance_pass() && t.pass()) ++s.fixed_false_alarms;
    if (t.fixed_tolerance_pass() && !t.pass()) ++s.fixed_missed;
    const double ratio = t.problem.empty() ? t.max_ratio : std::numeric_limits<double>::infinity();
    ++s.ratio_histogram.at(ratio_bin(ratio));
    if (t.max_ratio >= s.max_ratio || s.worst_case.empty()) {
      s.max_ratio = std::max(s.max_ratio, t.max_ratio);
      s.worst_case = v.case_text + " | " + t.summary();
      s.worst_profile = t.profile;
    }
    for (const auto& axis : v.mesh_axes) {
      AxisStat& a = axis_stats_[{suite_, property_, impl_, axis, t.name}];
      ++a.cases;
      if (!t.pass()) ++a.failed_cases;
      if (ratio >= a.max_ratio || a.worst_case.empty()) {
        a.max_ratio = std::max(a.max_ratio, ratio);
        a.worst_case = v.case_text + " | " + t.summary();
      }
    }
  }
}

std::vector<AxisWorst> Collector::worst_per_axis(std::size_t most) const {
  std::vector<AxisWorst> out;
  for (const auto& [k, a] : axis_stats_) {
    if (out.empty() || out.back().suite != k.suite || out.back().property != k.property ||
        out.back().impl != k.impl || out.back().axis != k.axis) {
      out.push_back({k.suite, k.property, k.impl, k.axis, 0, {}});
    }
    out.back().cases = std::max(out.back().cases, a.cases);
    out.back().worst.emplace_back(k.tensor, a);
  }
  for (auto& w : out) {
    std::stable_sort(w.worst.begin(), w.worst.end(), [](const auto& x, const auto& y) {
      return x.second.max_ratio > y.second.max_ratio;
    });
    if (w.worst.size() > most) w.worst.resize(most);
  }
  return out;
}

double Collector::max_ratio(const std::string& suite, const std::string& property,
                            const std::string& impl) const {
  double m = 0;
  for (const auto& [k, s] : stats_) {
    if (k.suite == suite && k.property == property && k.impl == impl) {
      m = std::max(m, s.max_ratio);
    }
  }
  return m;
}

}  // namespace shardcheck::check
