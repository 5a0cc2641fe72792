// What the compare tests (properties/compare/*_compare_tests.cpp) share: a fresh case directory,
// writing its manifest and .npy files, judging it, and the CaseError a bad case gives.
#pragma once

#include "cases/case_manifest.hpp"
#include "cases/npy.hpp"
#include "compare/compare.hpp"
#include "tensor/tensor.hpp"

#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

namespace shardcheck::check::compare_test {

// temp/<name>, emptied and created.
inline std::filesystem::path fresh_dir(const std::string& name) {
  std::filesystem::path d = std::filesystem::temp_directory_path() / name;
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
inline CompareResult compare_dir(const std::filesystem::path& d) {
  return compare_case(cases::read_case_manifest(d.string()));
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

}  // namespace shardcheck::check::compare_test
