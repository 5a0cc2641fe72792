// A whole run judged op by op (cases/run_manifest.hpp, compare/run_verdict.hpp): three steps of
// a row-parallel linear dump written to disk, the middle one with the bias added on every rank:
// the run names step 2, its tensor y and its worst element's rank, says step 1 passed and what
// came after; a run where every step passes says so; a dataflow link holds when the input is
// the output bit for bit and names the element where it is not; each bad run.json is a
// CaseError naming the file and the field.
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
#include <utility>
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
// ---------------------------------------------------------------- dataflow links

// A two-step run: step 1 a row-parallel linear x [5, 4] -> y [5, 7]; step 2 one whose input x
// [5, 7] is step 1's y with `nudge` added to its element [2, 3] (0: handed on as it was), and
// run.json linking the two.
fs::path write_linked_run(const std::string& name, float nudge) {
  fs::path d = fresh_dir("shardcheck_run_compare_tests_" + name);  // not const: returned by move
  write_linear_step(d / "00_up", 1.0F);
  const ExactGrid grid{7, 13, 9, 1.0F};
  auto x = linear(exact_values<float>({5, 4}, 1, grid), exact_values<float>({7, 4}, 2, grid),
                  exact_values<float>({7}, 3, grid));
  x(2, 3) += nudge;
  const auto w = exact_values<float>({3, 7}, 4, grid);
  const fs::path s = d / "01_down";
  fs::create_directories(s);
  write_tensor(s / "x.npy", x);
  write_tensor(s / "w.npy", w);
  write_tensor(s / "y.npy", linear(x, w, Tensor<float>()));
  write_text(s / "case.json", R"({"shardcheck_case": 1, "op": "row_parallel_linear", )"
                              R"("config": {"input_is_parallel": false}, )"
                              R"("sizes": {"tokens": 5, "in": 7, "out": 3}, "mesh": {"tp": 3}, )"
                              R"("dtype": "float32", "inputs": {"x": "x.npy", "w": "w.npy"}, )"
                              R"("outputs": {"y": "y.npy"}})");
  write_text(d / "run.json",
             R"({"shardcheck_run": 1, "steps": ["00_up", "01_down"], "links": )"
             R"([{"from": "00_up", "output": "y", "to": "01_down", "input": "x"}]})");
  return d;
}

TEST(CompareRunLinks, an_input_handed_on_as_it_was_keeps_the_link) {
  const RunResult run = judge(write_linked_run("link_ok", 0.0F));
  ASSERT_EQ(run.links.size(), 1U);
  EXPECT_EQ(run.links[0].problem, "");
  EXPECT_EQ(run.broken_links(), 0U);
  EXPECT_FALSE(run.first_failure().has_value());
  for (const auto& step : run.steps) {
    for (const auto& t : step.verdict.tensors) EXPECT_TRUE(t.values.empty()) << "kept no values";
  }
}

// Each op right on what it was given, so every step passes on its own; the dump changed one
// element of y on its way to step 2, and the link names it.
TEST(CompareRunLinks, an_input_changed_between_the_ops_breaks_the_link_at_its_element) {
  const RunResult run = judge(write_linked_run("link_broken", 0.5F));
  for (const auto& step : run.steps) EXPECT_TRUE(step.verdict.pass()) << step.verdict.explain();
  ASSERT_EQ(run.links.size(), 1U);
  EXPECT_EQ(run.broken_links(), 1U);
  expect_parts(run.links[0].problem,
               {"step 2 (01_down)'s x is not step 1 (00_up)'s y: 1 of 35 elements differ, the "
                "first at [2, 3] (x ",
                "the dump changed the tensor between the ops"});
  EXPECT_EQ(run.failed(), 1U);
  const auto f = run.first_failure();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->step, 1U);
  EXPECT_EQ(f->tensor, "x");
  expect_parts(run.summary(), {"step 1 passed, the first failure is step 2 of 2",
                               "row_parallel_linear x: step 2 (01_down)'s x is not"});
}

TEST(CompareRunLinks, a_link_to_a_tensor_the_cases_lack_is_bad_input) {
  const fs::path d = write_linked_run("link_bad", 0.0F);
  for (const auto& [json, part] : std::vector<std::pair<std::string, std::string>>{
           {R"({"from": "00_up", "output": "dx", "to": "01_down", "input": "x"})",
            "links.0.output: dx is not among the outputs "},
           {R"({"from": "00_up", "output": "y", "to": "01_down", "input": "dy"})",
            "links.0.input: dy is not among the inputs "}}) {
    write_text(d / "run.json",
               R"({"shardcheck_run": 1, "steps": ["00_up", "01_down"], "links": [)" + json + "]}");
    std::string msg = "no error";
    try {
      (void)judge(d);
    } catch (const cases::CaseError& e) {
      msg = e.what();
    }
    expect_parts(msg, {"shardcheck_run_compare_tests_link_bad/run.json: ", part});
  }
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
           {R"({"shardcheck_run": 1, "steps": ["00_in_proj"], "links": {}})",
            {R"(links: give an array of {"from": step, "output": name, "to": step)"}},
           {R"({"shardcheck_run": 1, "steps": ["00_in_proj"], "links": [3]})",
            {R"(links.0: give {"from": step)"}},
           {R"({"shardcheck_run": 1, "steps": ["00_in_proj", "01_mid"], "links": [)"
            R"({"from": "00_in_proj", "output": "y", "to": "02_x", "input": "x"}]})",
            {"links.0.to: is 02_x, which is not a step of the run; give one of 00_in_proj, "
             "01_mid"}},
           {R"({"shardcheck_run": 1, "steps": ["00_in_proj", "01_mid"], "links": [)"
            R"({"from": "01_mid", "output": "y", "to": "./00_in_proj", "input": "x"}]})",
            {"links.0: runs from step 2 to step 1; a link runs along the dataflow"}},
           {R"({"shardcheck_run": 1, "steps": ["00_in_proj", "01_mid"], "links": [)"
            R"({"from": "00_in_proj", "output": "y", "to": "01_mid"}]})",
            {"links.0.input"}},
           {R"({"shardcheck_run": 1, "steps": ["00_in_proj", "01_mid"], "links": [)"
            R"({"from": "00_in_proj", "output": "y", "to": "01_mid", "input": "x", "at": 1}]})",
            {"links.0: unknown field at"}},
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
