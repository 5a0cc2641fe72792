#include "compare/run_verdict.hpp"

#include "cases/case_manifest.hpp"
#include "cases/npy.hpp"
#include "engine/format_number.hpp"
#include "runtime/dtype.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>
#include <utility>

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

namespace {

// The elements of a consuming case's input, as doubles (every element type converts exactly).
std::vector<double> input_values(const cases::CaseManifest& m, const std::string& input,
                                 Shape& shape) {
  const std::string path = m.path(m.input(input)->files.at(0));
  const cases::NpyArray a = cases::read_npy(path);
  std::vector<double> out;
  visit_dtype(m.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bfloat16> ||
                  std::is_same_v<T, float16>) {
      const Tensor<T> t = cases::to_tensor<T>(a, m.dtype, path);
      shape = t.shape();
      out.reserve(t.size());
      for (std::size_t i = 0; i < t.size(); ++i) out.push_back(static_cast<double>(t[i]));
    }
  });
  return out;
}

// Row-major index i of `shape`, as "[2, 0, 3]".
std::string index_text(std::size_t i, const Shape& shape) {
  Shape at(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    at[d] = shape[d] == 0 ? 0 : i % shape[d];
    i = shape[d] == 0 ? 0 : i / shape[d];
  }
  return format_shape(at);
}

// What differs between the producing step's output `t` and the consuming step's input, or "".
std::string link_problem(const cases::RunLink& l, const std::string& from, const TensorCheck& t,
                         const std::string& to, const std::vector<double>& in,
                         const Shape& in_shape) {
  const std::string what = to + "'s " + l.input + " is not " + from + "'s " + l.output;
  if (!t.problem.empty()) {
    return to + "'s " + l.input + " cannot be checked against " + from + "'s " + l.output +
           ", which was not compared (" + t.problem + ")";
  }
  if (t.values.size() != in.size()) {
    return what + ": it has " + std::to_string(in.size()) + " elements " + format_shape(in_shape) +
           ", the output " + std::to_string(t.values.size()) + " " + format_shape(t.shape);
  }
  std::size_t differ = 0, first = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (std::bit_cast<std::uint64_t>(in[i]) != std::bit_cast<std::uint64_t>(t.values[i])) {
      if (differ++ == 0) first = i;
    }
  }
  if (differ == 0) return "";
  return what + ": " + std::to_string(differ) + " of " + std::to_string(in.size()) +
         " elements differ, the first at " + index_text(first, in_shape) + " (" + l.input + " " +
         format_number(in[first], 9) + ", " + l.output + " " + format_number(t.values[first], 9) +
         "); the dump changed the tensor between the ops";
}

}  // namespace

RunResult judge_run(const cases::RunManifest& m) {
  std::vector<cases::CaseManifest> manifests;
  for (const auto& step : m.steps) manifests.push_back(cases::read_case_manifest(step.dir));
  for (std::size_t k = 0; k < m.links.size(); ++k) {
    const cases::RunLink& l = m.links[k];
    const std::string at = m.file + ": links." + std::to_string(k) + ".";
    cases::CaseManifest& from = manifests[l.from];
    const cases::CaseManifest& to = manifests[l.to];
    if (from.output(l.output) == nullptr) {
      throw cases::CaseError(at + "output: " + l.output + " is not among the outputs " + from.file +
                             " gives; link an output the producing step's case has");
    }
    if (to.input(l.input) == nullptr) {
      throw cases::CaseError(at + "input: " + l.input + " is not among the inputs " + to.file +
                             " gives; link an input the consuming step's case has");
    }
    from.keep_values.push_back(l.output);
  }
  RunResult run;
  run.file = m.file;
  run.name = m.name;
  for (std::size_t k = 0; k < m.steps.size(); ++k) {
    run.step_names.push_back(m.steps[k].name);
    run.steps.push_back(compare_case(manifests[k]));
    run.steps.back().dir = m.steps[k].dir;
  }
  for (const auto& l : m.links) {
    const CompareResult& from = run.steps[l.from];
    const auto t = std::find_if(from.verdict.tensors.begin(), from.verdict.tensors.end(),
                                [&](const TensorCheck& x) { return x.name == l.output; });
    Shape shape;
    const auto in = input_values(manifests[l.to], l.input, shape);
    const std::string from_name =
        "step " + std::to_string(l.from + 1) + " (" + m.steps[l.from].name + ")";
    const std::string to_name =
        "step " + std::to_string(l.to + 1) + " (" + m.steps[l.to].name + ")";
    std::string problem;
    if (t == from.verdict.tensors.end()) {
      problem = to_name;
      problem += "'s " + l.input + " cannot be checked: ";
      problem += from_name;
      problem += " did not judge " + l.output;
    } else {
      problem = link_problem(l, from_name, *t, to_name, in, shape);
    }
    run.links.push_back({l, std::move(problem)});
  }
  // The kept values served the links; the report does not need them.
  for (auto& s : run.steps) {
    for (auto& t : s.verdict.tensors) t.values = {};
  }
  return run;
}

std::size_t RunResult::broken_links() const {
  std::size_t n = 0;
  for (const auto& l : links) n += l.problem.empty() ? 0 : 1;
  return n;
}

std::optional<RunResult::FirstFailure> RunResult::first_failure() const {
  for (std::size_t k = 0; k < steps.size(); ++k) {
    for (const auto& l : links) {
      if (l.link.to == k && !l.problem.empty()) return FirstFailure{k, l.link.input, l.problem};
    }
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
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const bool broken = std::any_of(links.begin(), links.end(), [&](const LinkCheck& l) {
      return l.link.to == k && !l.problem.empty();
    });
    n += broken || !steps[k].verdict.pass() ? 1 : 0;
  }
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
