// A whole run judged op by op (cases/run_manifest.hpp, compare/run_verdict.hpp): three steps of
// a row-parallel linear dump written to disk, the middle one with the bias added on every rank:
// the run names step 2, its tensor y and its worst element's rank, says step 1 passed and what
// came after; a run where every step passes says so; each bad run.json is a CaseError naming
// the file and the field.
#include "cases/case_manifest.hpp"
#include "cases/run_manifest.hpp"
#include "compare/compare.hpp"
#include "compare/run_verdict.hpp"
#include "ops/linear/linear.hpp"
#include "testing/compare_test_util.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace shardcheck::check::run_compare_tests {
namespace {

using namespace compare_test;  // case files written and compared (compare_test_util.hpp)

// A dense row-parallel linear case (P = 3, tokens 5, in 4, out 7) in dir: y from the dense
// layer with the bias multiplied by bias_scale (3: the bias added on every rank).
void write_linear_step(const fs::path& dir, float bias_scale) {
  fs::create_directories(dir);
  const ExactGrid grid{7, 13, 9, 1.0F};
  const auto x = exact_values<float>({5, 4}, 1, grid), w = exact_values<float>({7, 4}, 2, grid);
  auto b = exact_values<float>({7}, 3, grid);
  write_tensor(dir / "x.npy", x);
  write_tensor(dir / "w.npy", w);
  write_tensor(dir / "b.npy", b);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] *= bias_scale;
  write_tensor(dir / "y.npy", linear(x, w, b));
  write_text(dir / "case.json",
             R"({"shardcheck_case": 1, "op": "row_parallel_linear", )"
             R"("config": {"input_is_parallel": false}, )"
             R"("sizes": {"tokens": 5, "in": 4, "out": 7}, "mesh": {"tp": 3}, )"
             R"("dtype": "float32", "inputs": {"x": "x.npy", "w": "w.npy", "b": "b.npy"}, )"
             R"("outputs": {"y": "y.npy"}})");
}

// A run directory with three steps; step 2 (index 1) carries the bug when `bug`.
fs::path write_run(const std::string& name, bool bug) {
  fs::path d = fresh_dir("shardcheck_run_compare_tests_" + name);  // not const: returned by move
  write_linear_step(d / "00_in_proj", 1.0F);
  write_linear_step(d / "01_mid", bug ? 3.0F : 1.0F);
  write_linear_step(d / "02_out_proj", 1.0F);
  write_text(d / "run.json", R"({"shardcheck_run": 1, "name": "block 0", "steps": )"
                             R"(["00_in_proj", {"case": "01_mid", "name": "layer 0 mid"}, )"
                             R"("02_out_proj"]})");
  return d;
}

RunResult judge(const fs::path& d) { return judge_run(cases::read_run_manifest(d.string())); }

TEST(CompareRun, the_first_failing_step_is_named_with_its_tensor_and_rank) {
  const RunResult run = judge(write_run("bug", true));
  ASSERT_EQ(run.steps.size(), 3U);
  EXPECT_EQ(run.step_names[1], "layer 0 mid");
  EXPECT_EQ(run.step_names[2], "02_out_proj");  // no name: the path
  EXPECT_EQ(run.failed(), 1U);
  const auto f = run.first_failure();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->step, 1U);
  EXPECT_EQ(f->tensor, "y");
  expect_parts(f->where, {"worst element [", "of the bound"});
  expect_parts(run.summary(),
               {"run block 0 (",
                "run.json): 3 steps; step 1 passed, the first failure is step 2 "
                "of 3, layer 0 mid (",
                "01_mid): row_parallel_linear y: worst element", "after it 0 of 1 step fails"});
}

TEST(CompareRun, a_run_whose_steps_all_pass_says_so) {
  const RunResult run = judge(write_run("ok", false));
  EXPECT_FALSE(run.first_failure().has_value());
  expect_parts(run.summary(), {"every one of its 3 steps passed"});
}

TEST(CompareRun, the_place_of_a_failure_names_layout_divergence_or_the_worst_rank) {
  TensorCheck t;
  t.problem = "layout: rank 1's piece of dw is [3] but ...";
  EXPECT_EQ(failure_place(t), t.problem);
  t.problem.clear();
  t.divergent_ranks = {1, 3};
  EXPECT_EQ(failure_place(t), "replicated, but the copies of ranks 1, 3 differ in some bit");
  t.divergent_ranks.clear();
  t.worst_index = {2, 0};
  t.worst_rank = 2;
  t.max_ratio = 1.75;
  EXPECT_EQ(failure_place(t), "worst element [2, 0] on rank 2, 1.75 of the bound");
  t.worst_rank = -1;
  t.special_mismatches = 4;
  EXPECT_EQ(failure_place(t),
            "worst element [2, 0] (every rank holds it), 4 NaN/Inf where the reference differs");
}

TEST(CompareRunBadInput, every_error_names_the_file_and_the_field) {
  const fs::path d = write_run("bad", false);
  struct Bad {
    std::string json;
    std::vector<std::string> parts;
  };
  for (const auto& b : std::vector<Bad>{
           {R"({"shardcheck_run": 1, "steps": [)", {"run.json: JSON: malformed at byte"}},
           {R"({"shardcheck_run": 2, "steps": ["00_in_proj"]})",
            {"shardcheck_run: is 2 but this shardcheck reads version 1"}},
           {R"({"steps": ["00_in_proj"]})", {"shardcheck_run"}},
           {R"({"shardcheck_run": 1, "steps": []})",
            {"steps: give a non-empty array of case directories in dataflow order"}},
           {R"({"shardcheck_run": 1, "steps": "00_in_proj"})", {"steps: give a non-empty array"}},
           {R"({"shardcheck_run": 1, "steps": [3]})",
            {"steps.0: give the step's case directory, or {\"case\": path"}},
           {R"({"shardcheck_run": 1, "steps": [""]})", {"steps.0: is an empty path"}},
           {R"({"shardcheck_run": 1, "steps": ["/tmp/x"]})",
            {"steps.0: is the absolute path /tmp/x; give the case directory relative"}},
           {R"({"shardcheck_run": 1, "steps": ["a/../../x"]})",
            {"steps.0: is a/../../x, which leaves the run's directory"}},
           {R"({"shardcheck_run": 1, "steps": ["00_in_proj", "./00_in_proj"]})",
            {"steps.1: is ./00_in_proj again; each case is one step of the run"}},
           {R"({"shardcheck_run": 1, "steps": ["00_in_proj", "00_in_proj/."]})",
            {"steps.1: is 00_in_proj/. again"}},
           {R"({"shardcheck_run": 1, "steps": ["./"]})",
            {"steps.0: is ./, the run's own directory"}},
           {R"({"shardcheck_run": 1, "steps": [{"name": "x"}]})", {"steps.0.case"}},
           {R"({"shardcheck_run": 1, "steps": [{"case": "00_in_proj", "op": "x"}]})",
            {"steps.0: unknown field op"}},
           {R"({"shardcheck_run": 1, "steps": ["00_in_proj"], "seed": 1})", {"unknown field seed"}},
       }) {
    SCOPED_TRACE(b.json);
    write_text(d / "run.json", b.json);
    std::string msg = "no error";
    try {
      (void)cases::read_run_manifest(d.string());
    } catch (const cases::CaseError& e) {
      msg = e.what();
    }
    expect_parts(msg, b.parts);
    expect_parts(msg, {"shardcheck_run_compare_tests_bad/run.json"});
  }
  fs::remove(d / "run.json");
  EXPECT_FALSE(cases::is_run_dir(d.string()));
  std::string missing;
  try {
    (void)cases::read_run_manifest(d.string());
  } catch (const cases::CaseError& e) {
    missing = e.what();
  }
  expect_parts(missing, {"run.json: cannot be read; give a run directory holding run.json"});
}

}  // namespace
}  // namespace shardcheck::check::run_compare_tests
