// Per-dimension placements (cases/dim_placement.hpp) in a case: the library's row-parallel
// ranks, each piece a file, declared as a trainer's dump writes them ("o i(tp)") pass; a
// declaration that is not the op's (another dimension, zigzag where the layout is contiguous,
// partial where the result is replicated) is a layout failure that shows both in the case's own
// dimension names; a declaration that cannot be the tensor's (another number of dimensions, an
// axis the mesh lacks, bad syntax) is a CaseError naming the file and the field.
#include "cases/case_manifest.hpp"
#include "compare/compare.hpp"
#include "ops/linear/linear.hpp"
#include "suites/linear/linear_case.hpp"
#include "suites/linear/linear_impl.hpp"
#include "testing/compare_test_util.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::check::placement_compare_tests {
namespace {

using namespace compare_test;  // case files written and compared (compare_test_util.hpp)

// row_parallel_linear on P = 3 (input_is_parallel, in = 4 over 3: pieces 2, 1, 1), tokens 5,
// out 7, float32; the library's ranks write y (replicated) and dw (S(1)) per rank.
class RowCase {
 public:
  RowCase() : dir_(fresh_dir("shardcheck_placement_compare_tests")) {
    LinearCase c;
    c.layer = LinearLayer::row_parallel;
    c.world = 3;
    c.tokens = 5;
    c.in = 4;
    c.out = 7;
    c.row.input_is_parallel = true;
    LinearData<float> d;
    d.x = exact_values<float>({5, 4}, 1, {7, 13, 9, 1.0F});
    d.w = exact_values<float>({7, 4}, 2, {7, 13, 9, 1.0F});
    d.b = exact_values<float>({7}, 3, {7, 13, 9, 1.0F});
    d.dy = exact_values<float>({5, 7}, 4, {7, 13, 9, 1.0F});
    const auto run = run_ranks(LinearAdapter<LibraryLinear>{}, c, d);
    EXPECT_TRUE(run.error.empty()) << run.error;
    write_tensor(dir_ / "x.npy", d.x);
    write_tensor(dir_ / "w.npy", d.w);
    write_tensor(dir_ / "b.npy", d.b);
    write_tensor(dir_ / "dy.npy", d.dy);
    for (int r = 0; r < 3; ++r) {
      const auto& o = run.outputs[static_cast<std::size_t>(r)];
      write_tensor(dir_ / ("y." + std::to_string(r) + ".npy"), o.y);
      write_tensor(dir_ / ("dw." + std::to_string(r) + ".npy"), o.dw);
    }
  }
  // Writes case.json with these placements of y and dw.
  const fs::path& with(const std::string& y, const std::string& dw) const {
    const auto ranks = [](const std::string& name, const std::string& placement) {
      return R"({"ranks": [")" + name + R"(.0.npy", ")" + name + R"(.1.npy", ")" + name +
             R"(.2.npy"], "placement": ")" + placement + R"("})";
    };
    write_text(dir_ / "case.json",
               R"({"shardcheck_case": 1, "op": "row_parallel_linear", )"
               R"("config": {"input_is_parallel": true}, )"
               R"("sizes": {"tokens": 5, "in": 4, "out": 7}, "mesh": {"tp": 3}, )"
               R"("dtype": "float32", )"
               R"("inputs": {"x": "x.npy", "w": "w.npy", "b": "b.npy", "dy": "dy.npy"}, )"
               R"("outputs": {"y": )" +
                   ranks("y", y) + R"(, "dw": )" + ranks("dw", dw) + "}}");
    return dir_;
  }

 private:
  fs::path dir_;
};

TEST(PerDimensionPlacement, the_ops_placements_written_per_dimension_pass) {
  const RowCase c;
  for (const auto& [y, dw] : {std::pair{"t h", "o i(tp)"}, std::pair{"t  h", "out in(tp)"},
                              std::pair{"R", "o i(tp)"}, std::pair{"t h", "S(1)"}}) {
    SCOPED_TRACE(std::string(y) + " / " + dw);
    const auto r = compare_dir(c.with(y, dw));
    EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
    EXPECT_EQ(r.verdict.tensors.size(), 2U);
  }
}

TEST(PerDimensionPlacement, another_placement_is_a_layout_failure_in_the_cases_own_words) {
  const RowCase c;
  struct Wrong {
    std::string y, dw, tensor, declared, spec;
  };
  for (const auto& w : std::vector<Wrong>{
           {"t h", "o(tp) i", "dw", "placed o(tp) i", "places it o i(tp) (S(1))"},
           {"t h", "o i(tp,zigzag)", "dw", "placed o i(tp,zigzag)", "places it o i(tp) (S(1))"},
           {"t(tp) h", "o i(tp)", "y", "placed t(tp) h", "places it t h (R)"},
           {"t h(tp,partial)", "o i(tp)", "y", "placed t h(tp,partial)", "places it t h (R)"},
       }) {
    SCOPED_TRACE(w.y + " / " + w.dw);
    const auto r = compare_dir(c.with(w.y, w.dw));
    ASSERT_FALSE(r.verdict.pass());
    for (const auto& t : r.verdict.tensors) EXPECT_EQ(t.pass(), t.name != w.tensor) << t.summary();
    expect_parts(r.verdict.explain(),
                 {"the case declares " + w.tensor + " " + w.declared,
                  "but row_parallel_linear " + w.spec, "the pieces were not compared"});
  }
}

TEST(PerDimensionPlacement, a_placement_that_cannot_be_the_tensors_is_a_case_error) {
  const RowCase c;
  struct Bad {
    std::string dw;
    std::vector<std::string> parts;
  };
  for (const auto& b : std::vector<Bad>{
           {"o", {"outputs.dw.placement: \"o\" has 1 dimensions", "dw is [7, 4] (2)"}},
           {"o i j(tp)", {"has 3 dimensions", "write one token per dimension"}},
           {"o i(cp)",
            {"outputs.dw.placement: \"o i(cp)\" names the mesh axis cp",
             "row_parallel_linear's mesh has tp"}},
           {"o i(tp",
            {"outputs.dw.placement: \"o i(tp\" at character 6 (the end)",
             "expected ')' or ',' after tp", "DTensor's words"}},
           {"o i()", {"at character 4 (')'): expected a mesh axis, zigzag or partial"}},
           {"o(tp) i(tp)", {"axis tp named twice; an axis acts on one dimension"}},
           {"o i(zigzag)", {"i(...): names no mesh axis; write the axis beside zigzag"}},
           {"o i(tp,zigzag,partial)", {"zigzag and partial together"}},
           {"o i(Tp)", {"at character 4 ('T'): expected a mesh axis"}},
           {"o,i", {"at character 1 (','): expected ' ' between dimensions, or '('"}},
       }) {
    SCOPED_TRACE(b.dw);
    const std::string msg = case_error_of(c.with("t h", b.dw));
    expect_parts(msg, b.parts);
    expect_parts(msg, {"shardcheck_placement_compare_tests/case.json"});
  }
}

}  // namespace
}  // namespace shardcheck::check::placement_compare_tests
