// shardcheck compare on softmax_merge cases written to disk here: the library's merge and a
// correct chain of two-way steps pass (float64 and float32, global and per-rank outputs), a chain
// that loses mass at lse offsets of 1e30 fails the declared n-way contract and passes the tree's,
// every mutant of the suite whose outputs fail is diagnosed as itself, an output no known bug
// makes gets no signature, a piece of the wrong shape is a layout failure, and every bad input is
// a CaseError whose message is pinned.
#include "cases/case_manifest.hpp"
#include "cases/npy.hpp"
#include "compare/compare.hpp"
#include "ops/softmax_merge/softmax_merge.hpp"
#include "suites/softmax_merge/softmax_merge_impl.hpp"
#include "suites/softmax_merge/softmax_merge_mutants.hpp"
#include "testing/compare_test_util.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::check::softmax_merge_compare_tests {
namespace {

using namespace compare_test;  // case files written and compared (compare_test_util.hpp)

// 4 partials of 5 rows of width 3.
constexpr std::size_t n_parts = 4, rows = 5, width = 3;

template <class A>
constexpr A kInf = std::numeric_limits<A>::infinity();

// Partials with what the conventions are about: ordinary offsets (rows 0 and 1), an lse of 1000
// (row 2: exp(lse) overflows in both types), an empty part in rows 1 and 2 whose out holds NaN or
// +inf, a row with one non-empty part (row 3), and a row whose every part is empty (row 4). Part
// 0 is never empty where another part is not (the local-lse mutant's reference part).
template <class A>
std::vector<SoftmaxPartial<A>> partials() {
  const A lse[n_parts][rows] = {{A(0.5), A(-1.25), A(1000), A(2), -kInf<A>},
                                {A(1.75), -kInf<A>, A(998.5), -kInf<A>, -kInf<A>},
                                {A(-0.25), A(0.75), -kInf<A>, -kInf<A>, -kInf<A>},
                                {A(1.125), A(-2.5), A(1001.25), -kInf<A>, -kInf<A>}};
  std::vector<SoftmaxPartial<A>> parts;
  for (std::size_t j = 0; j < n_parts; ++j) {
    SoftmaxPartial<A> p{exact_values<A>({rows, width}, static_cast<int>(j) + 1, {5, 3, 13, 8.0F}),
                        Tensor<A>(Shape{rows})};
    for (std::size_t i = 0; i < rows; ++i) {
      p.lse[i] = lse[j][i];
      if (lse[j][i] != -kInf<A>) continue;
      for (std::size_t e = 0; e < width; ++e) {
        p.out(i, e) = j == 1 ? std::numeric_limits<A>::quiet_NaN() : j == 2 ? kInf<A> : A(0);
      }
    }
    parts.push_back(std::move(p));
  }
  return parts;
}

struct MergeFiles {
  std::string dtype;
  bool per_rank;         // out and lse as {"ranks": [...]} (one rank)
  std::string contract;  // the manifest's "contract", or none
  std::string extra;     // more top-level fields
};

MergeFiles files(std::string dtype, bool per_rank = false, std::string contract = "",
                 std::string extra = "") {
  return {std::move(dtype), per_rank, std::move(contract), std::move(extra)};
}

std::string merge_manifest(
    const MergeFiles& f, std::size_t parts, const std::string& config = "{}",
    const std::string& inputs = R"({"out_parts": "out_parts.npy", "lse_parts": "lse_parts.npy"})") {
  const std::string out =
      f.per_rank ? R"({"ranks": ["out.rank0.npy"], "placement": "R"})" : R"("out.npy")";
  const std::string lse = f.per_rank ? R"({"ranks": ["lse.rank0.npy"]})" : R"("lse.npy")";
  return R"({"shardcheck_case": 1, "op": "softmax_merge", "config": )" + config +
         R"(, "sizes": {"parts": )" + std::to_string(parts) +
         R"(, "rows": 5, "width": 3}, "dtype": ")" + f.dtype + R"(")" +
         (f.contract.empty() ? "" : R"(, "contract": ")" + f.contract + R"(")") + f.extra +
         R"(, "inputs": )" + inputs + R"(, "outputs": {"out": )" + out + R"(, "lse": )" + lse +
         "}}";
}

// Writes the case of `parts` with `merged` as the implementation's result.
template <class A>
fs::path write_merge_case(const std::string& dir, const MergeFiles& f,
                          const std::vector<SoftmaxPartial<A>>& parts,
                          const SoftmaxPartial<A>& merged) {
  fs::path d = fresh_dir("shardcheck_softmax_merge_compare_tests_" + dir);
  Tensor<A> out_parts(Shape{parts.size(), rows, width}), lse_parts(Shape{parts.size(), rows});
  for (std::size_t j = 0; j < parts.size(); ++j) {
    std::copy_n(parts[j].out.data(), rows * width, out_parts.data() + j * rows * width);
    std::copy_n(parts[j].lse.data(), rows, lse_parts.data() + j * rows);
  }
  write_tensor(d / "out_parts.npy", out_parts);
  write_tensor(d / "lse_parts.npy", lse_parts);
  write_tensor(d / (f.per_rank ? "out.rank0.npy" : "out.npy"), merged.out);
  write_tensor(d / (f.per_rank ? "lse.rank0.npy" : "lse.npy"), merged.lse);
  write_text(d / "case.json", merge_manifest(f, parts.size()));
  return d;
}

template <class A>
SoftmaxPartial<A> merged_by(const SoftmaxMergeImplementation& impl,
                            const std::vector<SoftmaxPartial<A>>& parts) {
  return impl.merge(std::span<const SoftmaxPartial<A>>(parts), rows, width);
}

template <class A>
SoftmaxPartial<A> library_merge(const std::vector<SoftmaxPartial<A>>& parts) {
  return merged_by(SoftmaxMergeAdapter<LibrarySoftmaxMerge>{}, parts);
}

TEST(CompareSoftmaxMerge, the_library_and_a_correct_chain_pass_global_and_per_rank) {
  const SoftmaxMergeAdapter<ChainedSoftmaxMerge> chain;
  for (const bool per_rank : {false, true}) {
    SCOPED_TRACE(per_rank ? "per rank" : "global");
    const auto p64 = partials<double>();
    const auto p32 = partials<float>();
    for (const auto& d :
         {write_merge_case<double>("f64", files("float64", per_rank), p64, library_merge(p64)),
          write_merge_case<float>("f32", files("float32", per_rank), p32, library_merge(p32)),
          write_merge_case<float>("f32_chain", files("float32", per_rank), p32,
                                  merged_by(chain, p32)),
          write_merge_case<double>("f64_nway", files("float64", per_rank, "nway"), p64,
                                   library_merge(p64))}) {
      const auto r = compare_dir(d);
      EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
      EXPECT_EQ(r.verdict.tensors.size(), 2U);
      EXPECT_TRUE(r.diagnosis.empty());
      EXPECT_EQ(r.verdict.op, "softmax_merge");
      expect_parts(r.verdict.case_text, {"parts=4 rows=5 width=3"});
    }
  }
}

// Three equal partials at lse 1e30 in float32, chained: lse = fl(1e30 + log 2) = 1e30 after the
// first step, so the third gets weight 1/2 (docs/softmax_merge.md, "Chained merges"). A correct
// chain: the tree bound (and the default, the larger of both) accepts it, the n-way one does not.
TEST(CompareSoftmaxMerge, a_chain_that_loses_mass_at_1e30_is_judged_by_the_declared_contract) {
  std::vector<SoftmaxPartial<float>> parts;
  for (int j = 0; j < 3; ++j) {
    SoftmaxPartial<float> p{Tensor<float>(Shape{rows, width}), Tensor<float>(Shape{rows})};
    std::fill(p.lse.values().begin(), p.lse.values().end(), 1e30F);
    std::fill(p.out.values().begin(), p.out.values().end(), j == 2 ? 0.0F : 1.0F);
    parts.push_back(std::move(p));
  }
  const auto chained = merged_by(SoftmaxMergeAdapter<ChainedSoftmaxMerge>{}, parts);
  ASSERT_EQ(chained.out(0, 0), 0.5F);  // 1/4 + 1/4 + 0/2, where the exact merge is 2/3

  const auto nway =
      compare_dir(write_merge_case<float>("nway", files("float32", false, "nway"), parts, chained));
  EXPECT_FALSE(nway.verdict.pass());
  expect_parts(nway.contract, {"contract nway", "one rounding of the lse"});
  for (const std::string contract : {"two_way_tree", ""}) {
    SCOPED_TRACE("contract " + contract);
    const auto r = compare_dir(
        write_merge_case<float>("tree", files("float32", false, contract), parts, chained));
    EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
    expect_parts(r.contract, {contract.empty() ? "the larger bound" : "contract two_way_tree"});
  }
}

// The diagnosis (compare.hpp): every mutant whose outputs fail is named as a signature they
// match, at residual 0 (the same code on the same inputs), with no rank (the merge's outputs
// are replicated on its one rank); outputs no known bug makes get "no known signature".
TEST(CompareSoftmaxMerge, a_failing_case_is_diagnosed_by_the_signature_it_carries) {
  const std::size_t signatures = softmax_merge_mutants().size();
  std::size_t diagnosed = 0;
  for (const bool f64 : {true, false}) {
    for (const auto& m : softmax_merge_mutants()) {
      SCOPED_TRACE(std::string(f64 ? "float64 " : "float32 ") + m.name);
      const auto impl = m.make();
      const auto d =
          f64 ? write_merge_case<double>(std::string("diag_") + m.name, files("float64"),
                                         partials<double>(), merged_by(*impl, partials<double>()))
              : write_merge_case<float>(std::string("diag_") + m.name, files("float32"),
                                        partials<float>(), merged_by(*impl, partials<float>()));
      const auto r = compare_dir(d);
      if (r.verdict.pass()) continue;  // the bug does not show on this case
      ++diagnosed;
      expect_diagnosed_as(r, m.name, signatures);
      for (const auto& dg : r.diagnosis) EXPECT_EQ(dg.rank, -1) << dg.signature;
      EXPECT_EQ(diagnosis_lines(r).front().find(" at rank "), std::string::npos);
    }
  }
  // Every mutant fails this case in both types (the chained ones fold merge_into in merge()).
  EXPECT_EQ(diagnosed, 2 * signatures);

  const auto p = partials<float>();
  SoftmaxPartial<float> wrong = library_merge(p);
  std::fill(wrong.out.values().begin(), wrong.out.values().end(), 123.0F);
  const auto unknown =
      compare_dir(write_merge_case<float>("diag_unknown", files("float32"), p, wrong));
  ASSERT_FALSE(unknown.verdict.pass());
  EXPECT_TRUE(unknown.diagnosis.empty());
  EXPECT_EQ(diagnosis_lines(unknown),
            std::vector<std::string>{"no known signature (of " + std::to_string(signatures) + ")"});
}

TEST(CompareSoftmaxMerge, a_piece_of_the_wrong_shape_is_a_layout_failure) {
  const auto p = partials<double>();
  const fs::path d =
      write_merge_case<double>("layout", files("float64", true), p, library_merge(p));
  write_tensor(d / "out.rank0.npy", Tensor<double>(Shape{rows, width - 1}));
  const auto r = compare_dir(d);
  ASSERT_FALSE(r.verdict.pass());
  for (const auto& t : r.verdict.tensors) EXPECT_EQ(t.pass(), t.name != "out") << t.summary();
  expect_parts(r.verdict.explain(), {"layout: rank 0's piece of out", "[5, 2]", "holds [5, 3]"});
}

TEST(CompareSoftmaxMergeBadInput, every_error_names_the_file_and_the_field) {
  const auto p = partials<float>();
  const fs::path d = write_merge_case<float>("bad_input", files("float32"), p, library_merge(p));
  const MergeFiles f = files("float32");
  const BadCase cases[] = {
      {"bfloat16",
       merge_manifest(files("bfloat16"), n_parts),
       {"dtype: is bfloat16 but softmax_merge merges partials in the attention kernel's "
        "accumulator, float64 or float32"}},
      {"a config field",
       merge_manifest(f, n_parts, R"({"parts": 4})"),
       {"config: unknown field parts; this object takes no fields"}},
      {"unknown contract",
       merge_manifest(files("float32", false, "chain"), n_parts),
       {R"(contract: is "chain" but softmax_merge knows "nway")", R"("two_way_tree")"}},
      {"size missing",
       with(merge_manifest(f, n_parts), R"("rows": 5, )", ""),
       {"sizes.rows: missing; softmax_merge needs it"}},
      {"a mesh",
       merge_manifest(files("float32", false, "", R"(, "mesh": {"tp": 2})"), n_parts),
       {"mesh: is {tp=2} but softmax_merge at this config runs on {}"}},
      {"lse_parts missing",
       merge_manifest(f, n_parts, "{}", R"({"out_parts": "out_parts.npy"})"),
       {"inputs.lse_parts: missing; softmax_merge needs it (shape [4, 5])"}},
      {"parts other than the files'",
       merge_manifest(f, 3),
       {"out_parts.npy: shape: is [4, 5, 3] but softmax_merge's out_parts is [3, 5, 3]"}},
      {"a tensor the op does not have",
       merge_manifest(
           f, n_parts, "{}",
           R"({"out_parts": "out_parts.npy", "lse_parts": "lse_parts.npy", "dout": "out.npy"})"),
       {"tensors: softmax_merge has no tensor dout", "out_parts, lse_parts, out, lse"}},
  };
  for (const auto& c : cases) {
    expect_case_error(d, c, "shardcheck_softmax_merge_compare_tests_bad_input/");
  }
}

}  // namespace
}  // namespace shardcheck::check::softmax_merge_compare_tests
