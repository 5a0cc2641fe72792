#include "engine/verdict.hpp"

#include "engine/collector.hpp"

#include <rapidcheck.h>

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

void conclude(const CaseVerdict& v) {
  if (Collector* c = Collector::active()) c->record(v);
  RC_TAG(v.op, std::string(name(v.dtype)), "P=" + std::to_string(v.world));
  if (!v.pass()) RC_FAIL(v.explain());
}

}  // namespace shardcheck::check
