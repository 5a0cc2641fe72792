// shardcheck compare's diagnosis on a cut-down case (compare.hpp, diagnosis_cut; docs/compare.md,
// "Diagnosis at real sizes"), forced on moderate linear cases by a threshold of 0 passed as an
// option: every linear signature planted in a case that fails is diagnosed as itself, and the
// cut-down diagnosis names the same signatures, ranks and tensors as the full one; a correct case
// and a bug no signature has (rank 3 wrote rank 2's columns) get no diagnosis; the diagnosis line
// says which part of the case it ran on; the cases the cut would not keep exact run in full.
#include "cases/npy.hpp"
#include "compare/compare.hpp"
#include "ops/op_spec.hpp"
#include "suites/linear/linear_case.hpp"
#include "suites/linear/linear_impl.hpp"
#include "suites/linear/linear_mutants.hpp"
#include "testing/compare_test_util.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardcheck::check::linear_cut_compare_tests {
namespace {

using namespace compare_test;  // case files written and compared (compare_test_util.hpp)

// Every case is "large": 8 token rows and 16 output features kept (4 per rank at P = 4: a
// shard's two boundary elements at each end).
const CompareOptions forced{{.above = 0, .rows = 8, .columns = 16}};

// P = 4, 26 tokens (balanced: 7, 7, 6, 6), in 6 (balanced: 2, 2, 1, 1), out 30 (8, 8, 7, 7).
LinearCase linear_case(LinearLayer layer) {
  ColumnParallelConfig column;
  column.tokens = 26;
  column.out_features = 30;
  column.out_split = column.token_split = SplitPolicy::balanced();
  RowParallelConfig row;
  row.in_split = row.token_split = SplitPolicy::balanced();
  return {.layer = layer,
          .dtype = DType::float32,
          .world = 4,
          .tokens = 26,
          .in = 6,
          .out = 30,
          .has_bias = true,
          .column = column,
          .row = row,
          .profile = gen::Profile::unit,
          .accumulate = std::nullopt};
}

// A case the diagnosis runs on: the layer's config and the outputs it gives, each chosen so that
// a group of signatures fails in it, whether the diagnosis cuts it (not when a tensor it gives
// would not stay exact) and how its words begin (the features a column-parallel cut keeps depend
// on where the worst element falls: 4 or 5 per rank).
struct Setting {
  std::string name;
  LinearCase c;
  std::vector<std::string> outputs;
  bool cuts = true;
  std::string words;
};

std::vector<Setting> settings() {
  std::vector<Setting> s;
  LinearCase row = linear_case(LinearLayer::row_parallel);
  row.row.input_is_parallel = false;  // offsets into x: offset-off-by-one, rank0 shard
  s.push_back({"row_y", row, {"y"}, true, "8 of 26 tokens and 16 of 30 output features,"});
  LinearCase row_sp = linear_case(LinearLayer::row_parallel);
  row_sp.row.sequence_parallel_output = true;  // db from local tokens, db / P
  s.push_back({"row_sp_y_db", row_sp, {"y", "db"}, true, "16 of 30 output features,"});
  LinearCase col = linear_case(LinearLayer::column_parallel);  // dx's reduction
  s.push_back({"column_y_dx", col, {"y", "dx"}, true, "8 of 26 tokens,"});
  LinearCase col_sp = linear_case(LinearLayer::column_parallel);
  col_sp.column.sequence_parallel_input = true;  // uneven tokens: floor-split-loses-rows
  s.push_back({"column_sp_y", col_sp, {"y"}, true, ""});
  LinearCase gather = linear_case(LinearLayer::column_parallel);
  gather.column.gather_output = true;  // gather-wrong-axis: the full case
  s.push_back({"column_gather_y", gather, {"y"}, false, ""});
  s.push_back({"column_dw", col, {"dw"}, false, ""});  // dw-transposed: the full case
  return s;
}

// x, w, b, dy: small integers, exact in float32, so every correct order gives the same values.
LinearData<float> linear_data(const LinearCase& c) {
  const ExactGrid g{7, 13, 9, 1.0F};
  return {exact_values<float>({c.tokens, c.in}, 1, g), exact_values<float>({c.out, c.in}, 2, g),
          exact_values<float>({c.out}, 3, g), exact_values<float>({c.tokens, c.out}, 4, g)};
}

// Writes the inputs and `impl`'s per-rank outputs named in s.outputs as the case in a fresh
// folder; empty when impl cannot run the case.
fs::path write_run(const std::string& name, const Setting& s, const LinearImplementation& impl) {
  const auto data = linear_data(s.c);
  const auto run = run_ranks(impl, s.c, data);
  if (!run.error.empty()) return {};
  fs::path d = fresh_dir("shardcheck_linear_cut_compare_tests_" + name);  // returned by move
  write_tensor(d / "x.npy", data.x);
  write_tensor(d / "w.npy", data.w);
  write_tensor(d / "b.npy", data.b);
  write_tensor(d / "dy.npy", data.dy);
  std::string outputs;
  for (const auto& o : s.outputs) {
    Tensor<float> LinearRankOutputs<float>::*member = &LinearRankOutputs<float>::y;
    if (o == "dx") member = &LinearRankOutputs<float>::dx;
    if (o == "dw") member = &LinearRankOutputs<float>::dw;
    if (o == "db") member = &LinearRankOutputs<float>::db;
    outputs += std::string(outputs.empty() ? "" : ", ") + "\"" + o + R"(": {"ranks": [)";
    for (int r = 0; r < s.c.world; ++r) {
      const std::string file = o + ".rank" + std::to_string(r) + ".npy";
      write_tensor(d / file, run.outputs[static_cast<std::size_t>(r)].*member);
      outputs += std::string(r > 0 ? ", " : "") + "\"" + file + "\"";
    }
    outputs += "]}";
  }
  const auto spec = op_spec(s.c);
  write_text(d / "case.json",
             R"({"shardcheck_case": 1, "op": ")" + spec.op + R"(", "config": )" + spec.config_json +
                 R"(, "sizes": {"tokens": )" + std::to_string(s.c.tokens) + R"(, "in": )" +
                 std::to_string(s.c.in) + R"(, "out": )" + std::to_string(s.c.out) +
                 R"(}, "mesh": {"tp": 4}, "dtype": "float32", )" +
                 R"("inputs": {"x": "x.npy", "w": "w.npy", "b": "b.npy", "dy": "dy.npy"}, )" +
                 R"("outputs": {)" + outputs + "}}");
  return d;
}

const Mutant<LinearImplementation>& mutant(const std::string& name) {
  const auto all = linear_mutants();
  const auto it = std::find_if(all.begin(), all.end(), [&](const Mutant<LinearImplementation>& m) {
    return m.name == name;
  });
  if (it == all.end()) throw std::invalid_argument("no linear mutant " + name);
  return *it;
}

// Every signature planted in a setting where it fails is diagnosed as itself at residual 0 on the
// cut-down case, which names what it kept; the full case gives the same matches (names, ranks,
// explained and unexplained tensors) at residuals no smaller.
TEST(LinearCutCompare, every_planted_signature_is_diagnosed_as_on_the_full_case) {
  const auto found = diagnose_planted(
      settings(), linear_mutants(), forced,
      [](const Setting& s, const Mutant<LinearImplementation>& m) {
        return write_run(s.name + "_" + m.name, s, *m.make());
      },
      [](const Setting& s, const Mutant<LinearImplementation>& m, const CompareResult& cut,
         const CompareResult& full) {
        expect_diagnosed_as(cut, m.name, linear_mutants().size());
        EXPECT_EQ(cut.diagnosis_cut.rfind(s.words, 0), 0U) << cut.diagnosis_cut;
        for (std::size_t k = 0; k < std::min(cut.diagnosis.size(), full.diagnosis.size()); ++k) {
          EXPECT_LE(cut.diagnosis[k].residual, full.diagnosis[k].residual);
        }
      });
  const auto& [diagnosed, diagnosed_cut] = found;
  // Every signature but sp-backward-all-reduce (right values, twice the traffic: no output of
  // it fails) fails in some setting, and all but the two that reshape a tensor by its per-rank
  // shape (their settings run in full) in a cut one.
  const auto in = [](const std::vector<std::string>& v, const std::string& name) {
    return std::find(v.begin(), v.end(), name) != v.end();
  };
  for (const auto& m : linear_mutants()) {
    const std::string name = m.name;
    EXPECT_EQ(in(diagnosed, name), name != "sp-backward-all-reduce") << name;
    EXPECT_EQ(in(diagnosed_cut, name), name != "sp-backward-all-reduce" &&
                                           name != "gather-wrong-axis" && name != "dw-transposed")
        << name;
  }
}

// The library's own outputs pass with no diagnosis; rank 3's columns of y replaced by rank 2's
// (a rank that wrote its neighbour's piece, a bug no signature has) get "no known signature" on
// the cut-down case, as on the full one, and the line names the cut.
TEST(LinearCutCompare, a_correct_case_and_an_unknown_bug_get_no_diagnosis) {
  Setting s{"column_y", linear_case(LinearLayer::column_parallel), {"y"}, true, ""};
  s.c.out = 32;  // 8 features per rank: rank 2's piece has rank 3's shape
  s.c.column.out_features = 32;
  const LinearAdapter<LibraryLinear> library;
  const fs::path d = write_run("library", s, library);
  const auto good = compare_dir(d, forced);
  EXPECT_TRUE(good.verdict.pass()) << good.verdict.explain();
  EXPECT_TRUE(good.diagnosis.empty());
  EXPECT_TRUE(good.diagnosis_cut.empty());
  EXPECT_TRUE(diagnosis_lines(good).empty());

  fs::copy_file(d / "y.rank2.npy", d / "y.rank3.npy", fs::copy_options::overwrite_existing);
  const auto bad = compare_dir(d, forced);
  ASSERT_FALSE(bad.verdict.pass());
  EXPECT_EQ(bad.verdict.tensors.at(0).worst_rank, 3);
  EXPECT_TRUE(bad.diagnosis.empty()) << testing::PrintToString(diagnosis_lines(bad));
  ASSERT_EQ(diagnosis_lines(bad).size(), 1U);
  test::expect_parts(diagnosis_lines(bad).front(),
                     {"no known signature (of 14; diagnosed on 8 of 26 tokens and ",
                      " of 32 output features, every shard boundary and the worst elements kept)"});
  const auto full = compare_dir(d);
  EXPECT_TRUE(full.diagnosis.empty());
  EXPECT_EQ(diagnosis_lines(full), std::vector<std::string>{"no known signature (of 14)"});
}

// A match's line names the cut inside its parenthesis, before the bug's description.
TEST(LinearCutCompare, the_diagnosis_line_names_the_cut) {
  LinearCase c = linear_case(LinearLayer::row_parallel);
  c.row.input_is_parallel = false;
  const Setting s{"row_y", c, {"y"}, true, ""};
  const auto r = compare_dir(write_run("line", s, *mutant("partial-not-reduced").make()), forced);
  ASSERT_FALSE(r.verdict.pass());
  test::expect_parts(diagnosis_lines(r).front(),
                     {"matches partial-not-reduced (residual 0 of the bound; explains y; diagnosed "
                      "on 8 of 26 tokens and 16 "
                      "of 30 output features, every shard boundary and the worst elements kept): "
                      "row_parallel_linear returns each rank's partial product"});
}

// keep_along: both ends of every piece, the must indices, equal counts in pieces of one size, a
// small piece whole, an empty piece empty.
TEST(LinearCutCompare, keep_along_keeps_every_boundary) {
  const auto k = keep_along({10, 10, 3, 0}, 4, {5});
  EXPECT_EQ(k.sizes, (std::vector<std::size_t>{5, 5, 3, 0}));
  EXPECT_EQ(k.index, (std::vector<std::size_t>{0, 1, 5, 8, 9, 10, 11, 15, 18, 19, 20, 21, 22}));
  const auto one = keep_along({100}, 8, {});
  EXPECT_EQ(one.sizes, std::vector<std::size_t>{8});
  EXPECT_EQ(one.index, (std::vector<std::size_t>{0, 1, 12, 37, 62, 87, 98, 99}));
}

}  // namespace
}  // namespace shardcheck::check::linear_cut_compare_tests
