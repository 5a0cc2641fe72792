#include "engine/verdict.hpp"

#include "engine/collector.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <limits>
#include <utility>

namespace shardcheck::check {

bool CaseVerdict::pass() const {
  if (!failures.empty()) return false;
  for (const auto& t : tensors) {
    if (!t.pass()) return false;
  }
  return true;
}

std::string CaseVerdict::explain() const {
  std::string s =
      op + " " + std::string(name(dtype)) + " P=" + std::to_string(world) + ": " + case_text + "\n";
  for (const auto& f : failures) s += f + "\n";
  for (const auto& t : tensors) {
    if (!t.pass()) s += t.explain();
  }
  s += "All tensors:\n";
  for (const auto& t : tensors) s += "  " + t.summary() + "\n";
  return s;
}

bool begin_verdict(CaseVerdict& v, std::string op, DType dtype, int world, std::string case_text,
                   const std::string& error) {
  v.op = std::move(op);
  v.dtype = dtype;
  v.world = world;
  v.case_text = std::move(case_text);
  if (error.empty()) return true;
  v.failures.push_back("the implementation threw: " + error);
  conclude(v);
  return false;
}

double failure_clarity(const CaseVerdict& v) {
  if (v.pass()) return 0;
  if (!v.failures.empty()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (const auto& t : v.tensors) {
    if (!t.problem.empty() || t.special_mismatches > 0 || !t.divergent_ranks.empty()) {
      return std::numeric_limits<double>::infinity();
    }
    worst = std::max(worst, t.max_ratio);
  }
  return worst;
}

namespace {
ShrinkClarity* open_clarity = nullptr;
}  // namespace

ShrinkClarity::ShrinkClarity() : previous_(open_clarity) { open_clarity = this; }
ShrinkClarity::~ShrinkClarity() { open_clarity = previous_; }
ShrinkClarity* ShrinkClarity::active() { return open_clarity; }

void conclude(const CaseVerdict& v) {
  if (Collector* c = Collector::active()) c->record(v);
  RC_TAG(v.op, std::string(name(v.dtype)), "P=" + std::to_string(v.world));
  if (v.pass()) return;
  if (ShrinkClarity* s = ShrinkClarity::active()) {
    const double clarity = failure_clarity(v);
    if (s->failed && clarity < s->floor) return;  // a less clear candidate: not the one
    if (!s->failed) {
      s->failed = true;
      s->floor = std::min(2.0, clarity);
    }
  }
  RC_FAIL(v.explain());
}

}  // namespace shardcheck::check
