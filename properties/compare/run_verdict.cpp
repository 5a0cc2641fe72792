#include "compare/run_verdict.hpp"

#include "cases/case_manifest.hpp"
#include "engine/format_number.hpp"

namespace shardcheck::check {

std::string failure_place(const TensorCheck& t) {
  if (!t.problem.empty()) return t.problem;
  if (!t.divergent_ranks.empty()) {
    std::string s = "replicated, but the copies of ranks";
    for (std::size_t k = 0; k < t.divergent_ranks.size(); ++k) {
      s += (k == 0 ? " " : ", ") + std::to_string(t.divergent_ranks[k]);
    }
    return s + " differ in some bit";
  }
  std::string s = "worst element " + format_shape(t.worst_index);
  s += t.worst_rank < 0 ? " (every rank holds it)" : " on rank " + std::to_string(t.worst_rank);
  if (t.special_mismatches > 0) {
    s += ", " + std::to_string(t.special_mismatches) + " NaN/Inf where the reference differs";
  } else {
    s += ", " + format_number(t.max_ratio, 3) + " of the bound";
  }
  return s;
}

RunResult judge_run(const cases::RunManifest& m) {
  std::vector<cases::CaseManifest> manifests;
  for (const auto& step : m.steps) manifests.push_back(cases::read_case_manifest(step.dir));
  RunResult run;
  run.file = m.file;
  run.name = m.name;
  for (std::size_t k = 0; k < m.steps.size(); ++k) {
    run.step_names.push_back(m.steps[k].name);
    run.steps.push_back(compare_case(manifests[k]));
    run.steps.back().dir = m.steps[k].dir;
  }
  return run;
}

std::optional<RunResult::FirstFailure> RunResult::first_failure() const {
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const CaseVerdict& v = steps[k].verdict;
    if (v.pass()) continue;
    for (const auto& t : v.tensors) {
      if (!t.pass()) return FirstFailure{k, t.name, failure_place(t)};
    }
    return FirstFailure{k, "", v.failures.empty() ? "fails" : v.failures.front()};
  }
  return std::nullopt;
}

std::size_t RunResult::failed() const {
  std::size_t n = 0;
  for (const auto& s : steps) n += s.verdict.pass() ? 0 : 1;
  return n;
}

std::string RunResult::summary() const {
  const std::size_t n = steps.size();
  std::string s = "run " + (name.empty() ? std::string() : name + " ") + "(" + file + "): ";
  const auto f = first_failure();
  if (!f) return s + "every one of its " + std::to_string(n) + " steps passed";
  const std::size_t k = f->step;
  s += std::to_string(n) + " steps; ";
  if (k == 0) {
    s += "the first failure is step 1";
  } else {
    s += (k == 1 ? "step 1 passed" : "steps 1-" + std::to_string(k) + " passed") +
         ", the first failure is step " + std::to_string(k + 1);
  }
  const CompareResult& c = steps[k];
  s += " of " + std::to_string(n) + ", " + step_names[k] + " (" + c.dir + "): " + c.verdict.op;
  s += f->tensor.empty() ? "" : " " + f->tensor;
  s += ": " + f->where;
  const std::size_t after = n - k - 1;
  if (after > 0) {
    s += "; after it " + std::to_string(failed() - 1) + " of " + std::to_string(after) +
         (after == 1 ? " step fails" : " steps fail");
  }
  return s;
}

}  // namespace shardcheck::check
