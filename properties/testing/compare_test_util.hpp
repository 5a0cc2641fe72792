// What the compare tests (properties/compare/*_compare_tests.cpp) share: a fresh case directory,
// writing its manifest and .npy files, judging it, and the CaseError a bad case gives.
#pragma once

#include "cases/case_manifest.hpp"
#include "cases/npy.hpp"
#include "compare/compare.hpp"
#include "tensor/tensor.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace shardcheck::check::compare_test {

// What every compare test names, with `using namespace compare_test`: the case folders' paths and
// the message check.
namespace fs = std::filesystem;
using test::expect_parts;

// temp/shardcheck-test-<pid>/<name>, emptied and created. Under the process's own folder: ctest
// runs each test in its own process, two at a time, and the tests of one file share a name (a
// shared temp/<name> let one test's case.json be rewritten under another, a flaky parse error).
// The folder is removed when the process ends.
inline std::filesystem::path fresh_dir(const std::string& name) {
  struct ProcessFolder {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("shardcheck-test-" + std::to_string(::getpid()));
    ProcessFolder() = default;
    ProcessFolder(const ProcessFolder&) = delete;
    ProcessFolder& operator=(const ProcessFolder&) = delete;
    ProcessFolder(ProcessFolder&&) = delete;
    ProcessFolder& operator=(ProcessFolder&&) = delete;
    ~ProcessFolder() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const ProcessFolder folder;
  std::filesystem::path d = folder.path / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Small multiples of 1/denominator, exact in every element type (so a case's inputs are the
// values written) and not all equal along a row: element i of the tensor is k/denominator with
// k = ((i·stride + seed·seed_stride) mod levels) − (levels − 1)/2.
struct ExactGrid {
  std::size_t stride, seed_stride;
  int levels;
  float denominator;
};
template <class T>
Tensor<T> exact_values(Shape s, int seed, const ExactGrid& g) {
  Tensor<T> t(std::move(s));
  const auto levels = static_cast<std::size_t>(g.levels);
  for (std::size_t i = 0; i < t.size(); ++i) {
    const int k =
        static_cast<int>((i * g.stride + static_cast<std::size_t>(seed) * g.seed_stride) % levels) -
        (g.levels - 1) / 2;
    t[i] = T(static_cast<float>(k) / g.denominator);
  }
  return t;
}

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

template <class T>
void write_tensor(const std::filesystem::path& p, const Tensor<T>& t) {
  cases::write_npy(p.string(), cases::from_tensor(t));
}

// The case in directory d, judged.
inline CompareResult compare_dir(const std::filesystem::path& d,
                                 const CompareOptions& options = {}) {
  return compare_case(cases::read_case_manifest(d.string()), options);
}

// The CaseError's message judging d gives; "not a CaseError: ..." for another exception, "no
// error" when it is judged.
inline std::string case_error_of(const std::filesystem::path& d) {
  try {
    compare_dir(d);
  } catch (const cases::CaseError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a CaseError: ") + e.what();
  }
  return "no error";
}

// Expects the failing case r to be diagnosed as the mutant `name` of a family whose catalog has
// `signatures` mutants: every signature tried, `name` matched at residual 0 (the same code on the
// same inputs) explaining every failing tensor, and the first line a match.
inline void expect_diagnosed_as(const CompareResult& r, const std::string& name,
                                std::size_t signatures) {
  EXPECT_EQ(r.signatures_tried, signatures);
  const auto self = std::find_if(r.diagnosis.begin(), r.diagnosis.end(),
                                 [&](const Diagnosis& d) { return d.signature == name; });
  ASSERT_NE(self, r.diagnosis.end()) << testing::PrintToString(diagnosis_lines(r));
  EXPECT_EQ(self->residual, 0.0);
  EXPECT_FALSE(self->explained.empty());
  EXPECT_TRUE(self->unexplained.empty());
  EXPECT_EQ(diagnosis_lines(r).front().rfind("matches ", 0), 0U);
}

// A diagnosis as names, ranks and tensors, one string per match ("S at rank 3 explains y; not
// db"), sorted (the order is by residual, which a cut-down case may lower): what the cut-down
// diagnosis must keep of the full one.
inline std::vector<std::string> diagnosis_matches(const CompareResult& r) {
  std::vector<std::string> out;
  for (const auto& d : r.diagnosis) {
    std::string m = d.signature + " at rank " + std::to_string(d.rank) + " explains";
    for (const auto& t : d.explained) m += " " + t;
    m += "; not";
    for (const auto& t : d.unexplained) m += " " + t;
    out.push_back(m);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// What a cut-down diagnosis test found (properties/compare/*_cut_compare_tests.cpp): the
// signatures diagnosed in some setting, and those diagnosed on a cut-down case.
struct PlantedDiagnoses {
  std::vector<std::string> diagnosed, diagnosed_cut;
};

// Every signature of `catalog` planted in every setting (write(setting, signature): the case's
// folder, empty when the signature cannot run the setting) and judged with `forced` (a cut
// forced) and in full. For each case that fails and is comparable (no layout problem): the checks
// every family's cut shares (a cut exactly where setting.cuts says, none in full, the same
// matches on both), then fn(setting, signature, cut, full) for the family's own.
template <class Settings, class Catalog, class Write, class Fn>
PlantedDiagnoses diagnose_planted(const Settings& settings, const Catalog& catalog,
                                  const CompareOptions& forced, Write write, Fn fn) {
  PlantedDiagnoses found;
  for (const auto& s : settings) {
    for (const auto& m : catalog) {
      SCOPED_TRACE(s.name + " " + m.name);
      const std::filesystem::path d = write(s, m);
      if (d.empty()) continue;
      const auto cut = compare_dir(d, forced);
      const auto full = compare_dir(d);
      EXPECT_EQ(cut.verdict.pass(), full.verdict.pass());
      const bool layout = std::any_of(cut.verdict.tensors.begin(), cut.verdict.tensors.end(),
                                      [](const TensorCheck& t) { return !t.problem.empty(); });
      if (cut.verdict.pass() || full.verdict.pass() || layout) continue;
      found.diagnosed.emplace_back(m.name);
      if (!cut.diagnosis_cut.empty()) found.diagnosed_cut.emplace_back(m.name);
      EXPECT_EQ(cut.diagnosis_cut.empty(), !s.cuts) << cut.diagnosis_cut;
      EXPECT_TRUE(full.diagnosis_cut.empty());
      EXPECT_EQ(diagnosis_matches(cut), diagnosis_matches(full));
      fn(s, m, cut, full);
    }
  }
  return found;
}

// A correct case judged with a cut forced: it passes, with no diagnosis and no cut.
inline void expect_no_diagnosis(const CompareResult& good) {
  EXPECT_TRUE(good.verdict.pass()) << good.verdict.explain();
  EXPECT_TRUE(good.diagnosis.empty());
  EXPECT_TRUE(good.diagnosis_cut.empty());
  EXPECT_TRUE(diagnosis_lines(good).empty());
}

// The case in d, a bug no signature has, judged with a cut forced and in full: it fails, its
// tensor number `tensor` worst at `rank`, with no match on either; its one line "no known
// signature (of N; diagnosed on ...)" holds `parts`, and in full "no known signature (of N)".
inline void expect_unknown_bug(const std::filesystem::path& d, const CompareOptions& forced,
                               std::size_t tensor, int rank, std::size_t signatures,
                               const std::vector<std::string>& parts) {
  const auto cut = compare_dir(d, forced);
  ASSERT_FALSE(cut.verdict.pass());
  EXPECT_EQ(cut.verdict.tensors.at(tensor).worst_rank, rank);
  EXPECT_TRUE(cut.diagnosis.empty()) << testing::PrintToString(diagnosis_lines(cut));
  ASSERT_EQ(diagnosis_lines(cut).size(), 1U);
  test::expect_parts(diagnosis_lines(cut).front(), parts);
  const auto full = compare_dir(d);
  EXPECT_TRUE(full.diagnosis.empty());
  EXPECT_EQ(diagnosis_lines(full),
            std::vector<std::string>{"no known signature (of " + std::to_string(signatures) + ")"});
}

// The outputs of case c (its family's for_each_output) named in `names`, each written to d one
// file a rank (<name>.rank<r>.npy) from run's per-rank outputs; their entries of the manifest's
// "outputs" object, without the braces.
template <class T, class Case, class Run>
std::string write_rank_outputs(const std::filesystem::path& d, const Case& c, const Run& run,
                               const std::vector<std::string>& names) {
  std::string json;
  for_each_output<T>(c, [&](const std::string& out, auto member, auto /*expected*/) {
    if (std::find(names.begin(), names.end(), out) == names.end()) return;
    json += std::string(json.empty() ? "" : ", ") + "\"" + out + R"(": {"ranks": [)";
    for (int r = 0; r < c.world; ++r) {
      const std::string file = out + ".rank" + std::to_string(r) + ".npy";
      write_tensor(d / file, run.outputs.at(static_cast<std::size_t>(r)).*member);
      json += std::string(r > 0 ? ", " : "") + "\"" + file + "\"";
    }
    json += "]}";
  });
  return json;
}

// `json` with its first `from` replaced by `to`: a good manifest made bad in one place (a
// failure of the test when `from` is not in it).
inline std::string with(std::string json, const std::string& from, const std::string& to) {
  const auto at = json.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? json : json.replace(at, from.size(), to);
}

// One bad input of a family's bad-input test, and the parts of the message it must give.
struct BadCase {
  std::string what;
  std::string json;                // the manifest
  std::vector<std::string> parts;  // pinned parts of the message
};

// Writes c.json as d's case.json and expects the CaseError judging d gives to hold c.parts and
// `folder` (the message names the file with its folder, shardcheck_<test>_...).
inline void expect_case_error(const std::filesystem::path& d, const BadCase& c,
                              const std::string& folder) {
  SCOPED_TRACE(c.what);
  write_text(d / "case.json", c.json);
  const std::string msg = case_error_of(d);
  test::expect_parts(msg, c.parts);
  test::expect_parts(msg, {folder});
}

}  // namespace shardcheck::check::compare_test
