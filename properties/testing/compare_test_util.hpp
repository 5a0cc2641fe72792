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
