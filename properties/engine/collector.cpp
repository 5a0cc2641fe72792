#include "engine/collector.hpp"

#include <algorithm>

namespace shardcheck::check {
namespace {
Collector* g_active = nullptr;  // the main thread's; cases run on the main thread only
}  // namespace

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
    if (t.max_ratio >= s.max_ratio || s.worst_case.empty()) {
      s.max_ratio = std::max(s.max_ratio, t.max_ratio);
      s.worst_case = v.case_text + " | " + t.summary();
    }
  }
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
