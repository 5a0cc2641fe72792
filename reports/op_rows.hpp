// The numerics tables of report.md and report.html: the collector's statistics summed over
// properties and tensors per (impl, op, dtype, P), one row each, so both reports count the same.
#pragma once

#include "engine/collector.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <tuple>

namespace shardcheck::report {

using OpRowKey = std::tuple<std::string, std::string, int, int>;  // impl, op, dtype, P

struct OpRow {
  int cases = 0, failed = 0;
  double max_err = 0, max_ratio = 0, max_ulp = 0;
  int false_alarms = 0, missed = 0;  // assert_close's, for contrast (check::Stat)
  std::array<int, check::kRatioBins> histogram{};
  std::string worst;  // "<tensor>: <its worst case>", of the tensor with the largest ratio
};

inline std::map<OpRowKey, OpRow> op_rows(const check::Collector& c) {
  std::map<OpRowKey, OpRow> rows;
  for (const auto& [k, s] : c.stats()) {
    OpRow& row = rows[{k.impl, k.op, static_cast<int>(k.dtype), k.world}];
    row.cases += s.cases;
    row.failed += s.failed_cases;
    row.max_err = std::max(row.max_err, s.max_abs_err);
    row.max_ulp = std::max(row.max_ulp, s.max_ulp);
    row.false_alarms += s.fixed_false_alarms;
    row.missed += s.fixed_missed;
    if (s.max_ratio >= row.max_ratio || row.worst.empty()) {
      row.max_ratio = std::max(row.max_ratio, s.max_ratio);
      row.worst = k.tensor + ": " + s.worst_case;
    }
    for (std::size_t b = 0; b < s.ratio_histogram.size(); ++b) {
      row.histogram.at(b) += s.ratio_histogram.at(b);
    }
  }
  return rows;
}

}  // namespace shardcheck::report
