// parallel_mlp's diagnosis on a cut-down case (mlp_compare.cpp's diagnosis_cut; docs/compare.md,
// "Diagnosis at real sizes"), forced by a threshold of 0: a case that gives y and dx is cut to
// some token rows, and every mlp signature that fails in it is diagnosed as itself, with the same
// matches as on the full case; a case that gives a weight gradient keeps the full run.
#include "compare/compare.hpp"
#include "engine/slicing.hpp"
#include "ops/op_spec.hpp"
#include "suites/mlp/mlp_case.hpp"
#include "suites/mlp/mlp_impl.hpp"
#include "suites/mlp/mlp_mutants.hpp"
#include "testing/compare_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace shardcheck::check::mlp_cut_compare_tests {
namespace {

using namespace compare_test;  // case files written and compared (compare_test_util.hpp)

const CompareOptions forced{{.above = 0, .rows = 8, .columns = 16}};

// P = 3, 26 tokens (balanced under sequence parallelism: 9, 9, 8), hidden 3, ffn 6 (2 per rank:
// activation-on-partial-sum all_reduces the ranks' activations, so their shapes must agree).
MlpCase mlp_case(Activation activation, bool sequence_parallel) {
  MlpCase c;
  c.world = 3;
  c.tokens = c.cfg.tokens = 26;
  c.hidden = 3;
  c.cfg.ffn_features = 6;
  c.cfg.activation = activation;
  c.cfg.sequence_parallel = sequence_parallel;
  c.cfg.token_split = SplitPolicy::balanced();
  return c;
}

// The inputs (k/4 for small integers k) and `impl`'s per-rank `outputs`, written as a case;
// empty when impl cannot run it.
fs::path write_run(const std::string& name, const MlpCase& c, const MlpImplementation& impl,
                   const std::vector<std::string>& outputs) {
  const bool gate = c.cfg.activation == Activation::swiglu;
  const ExactGrid g{3, 7, 11, 4.0F};
  const std::size_t fc1 = (gate ? 2 : 1) * c.ffn();
  MlpData<float> d{exact_values<float>({c.tokens, c.hidden}, 1, g),
                   exact_values<float>({fc1, c.hidden}, 2, g),
                   exact_values<float>({fc1}, 4, g),
                   exact_values<float>({c.hidden, c.ffn()}, 3, g),
                   exact_values<float>({c.hidden}, 5, g),
                   exact_values<float>({c.tokens, c.hidden}, 6, g)};
  const auto run = run_ranks(impl, c, d);
  if (!run.error.empty()) return {};
  fs::path dir = fresh_dir("shardcheck_mlp_cut_compare_tests_" + name);  // returned by move
  std::string inputs = R"("x": "x.npy", "w_up": "w_up.npy", "b_up": "b_up.npy", )"
                       R"("w_down": "w_down.npy", "b_down": "b_down.npy", "dy": "dy.npy")";
  write_tensor(dir / "x.npy", d.x);
  write_tensor(dir / "w_up.npy", gate ? rows(d.w_up, c.ffn(), c.ffn()) : d.w_up);
  write_tensor(dir / "b_up.npy", gate ? rows(d.b_up, c.ffn(), c.ffn()) : d.b_up);
  write_tensor(dir / "w_down.npy", d.w_down);
  write_tensor(dir / "b_down.npy", d.b_down);
  write_tensor(dir / "dy.npy", d.dy);
  if (gate) {
    write_tensor(dir / "w_gate.npy", rows(d.w_up, 0, c.ffn()));
    write_tensor(dir / "b_gate.npy", rows(d.b_up, 0, c.ffn()));
    inputs += R"(, "w_gate": "w_gate.npy", "b_gate": "b_gate.npy")";
  }
  std::string outs;
  for (const auto& o : outputs) {
    Tensor<float> MlpRankOutputs<float>::*member = &MlpRankOutputs<float>::y;
    if (o == "dx") member = &MlpRankOutputs<float>::dx;
    if (o == "dw_down") member = &MlpRankOutputs<float>::dw_down;
    outs += std::string(outs.empty() ? "" : ", ") + "\"" + o + R"(": {"ranks": [)";
    for (int r = 0; r < c.world; ++r) {
      const std::string file = o + ".rank" + std::to_string(r) + ".npy";
      write_tensor(dir / file, run.outputs[static_cast<std::size_t>(r)].*member);
      outs += std::string(r > 0 ? ", " : "") + "\"" + file + "\"";
    }
    outs += "]}";
  }
  write_text(dir / "case.json",
             R"({"shardcheck_case": 1, "op": "parallel_mlp", "config": )" + op_spec(c).config_json +
                 R"(, "sizes": {"tokens": 26, "hidden": 3, "ffn": 6}, "mesh": {"tp": 3}, )" +
                 R"("dtype": "float32", "inputs": {)" + inputs + R"(}, "outputs": {)" + outs +
                 "}}");
  return dir;
}

std::vector<std::string> names(const CompareResult& r) {
  std::vector<std::string> out;
  for (const auto& d : r.diagnosis) {
    out.push_back(d.signature + " " + std::to_string(d.rank) + " " +
                  std::to_string(d.explained.size()) + " " + std::to_string(d.unexplained.size()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// swiglu and gelu (sequence-parallel), y and dx given: every signature that fails is diagnosed as
// itself on some of the 26 tokens (8, or 4 or 5 per rank under sequence parallelism), with the
// full diagnosis's matches; with dw_down given the full case runs.
TEST(MlpCutCompare, a_planted_signature_is_diagnosed_on_some_tokens_as_on_all) {
  std::vector<std::string> diagnosed;
  for (const bool sp : {false, true}) {
    const MlpCase c = mlp_case(sp ? Activation::gelu : Activation::swiglu, sp);
    for (const auto& m : mlp_mutants()) {
      for (const bool weights : {false, true}) {
        SCOPED_TRACE(std::string(m.name) + (sp ? " sp" : "") + (weights ? " dw_down" : ""));
        const std::vector<std::string> outputs = weights ? std::vector<std::string>{"y", "dw_down"}
                                                         : std::vector<std::string>{"y", "dx"};
        const fs::path d =
            write_run(std::string(m.name) + (sp ? "_sp" : "") + (weights ? "_dw" : ""), c,
                      *m.make(), outputs);
        if (d.empty()) continue;
        const auto cut = compare_dir(d, forced);
        if (cut.verdict.pass()) continue;
        // Itself, explaining every failing tensor, first; its residual a rounding away from 0 (a
        // ring all_reduce's chunks follow the buffer's length, so a cut sums in another order).
        EXPECT_EQ(cut.signatures_tried, mlp_mutants().size());
        ASSERT_FALSE(cut.diagnosis.empty());
        const auto self = std::find_if(cut.diagnosis.begin(), cut.diagnosis.end(),
                                       [&](const Diagnosis& x) { return x.signature == m.name; });
        ASSERT_NE(self, cut.diagnosis.end()) << testing::PrintToString(diagnosis_lines(cut));
        EXPECT_LE(self->residual, 1.0);
        EXPECT_TRUE(self->unexplained.empty());
        EXPECT_EQ(names(cut), names(compare_dir(d)));
        if (weights) {
          EXPECT_TRUE(cut.diagnosis_cut.empty()) << cut.diagnosis_cut;
        } else {
          EXPECT_NE(cut.diagnosis_cut.find(" of 26 tokens, every shard boundary"),
                    std::string::npos)
              << cut.diagnosis_cut;
          diagnosed.emplace_back(m.name);
        }
      }
    }
  }
  // All but sp-up-backward-all-reduce (right values, twice the traffic).
  for (const auto& m : mlp_mutants()) {
    const bool found = std::find(diagnosed.begin(), diagnosed.end(), m.name) != diagnosed.end();
    EXPECT_EQ(found, std::string(m.name) != "sp-up-backward-all-reduce") << m.name;
  }
}

}  // namespace
}  // namespace shardcheck::check::mlp_cut_compare_tests
