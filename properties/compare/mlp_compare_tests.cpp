// shardcheck compare on parallel_mlp cases written to disk here: the library's own ranks pass
// (per-rank pieces of every output, swiglu with bias and gelu without, float32 and bfloat16, with
// and without sequence parallelism), global outputs pass, b_down added on every rank before the
// reduction fails on y only, a piece of the wrong local shape is a layout failure naming the
// rank, every bad input is a CaseError whose message is pinned, and an MLP whose projections
// accumulate in bfloat16 fails the default contract and passes a declared "accumulate".
#include "cases/case_manifest.hpp"
#include "cases/npy.hpp"
#include "compare/compare.hpp"
#include "layout/materialize.hpp"
#include "suites/mlp/mlp_accumulate_emulation.hpp"
#include "suites/mlp/mlp_case.hpp"
#include "suites/mlp/mlp_impl.hpp"
#include "testing/compare_test_util.hpp"
#include "testing/ops_test_util.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace shardcheck::check::mlp_compare_tests {
namespace {

using namespace compare_test;  // case files written and compared (compare_test_util.hpp)

// P = 3, tokens 4, hidden 3, ffn 5 (chunk: 2, 2, 1).
constexpr int world = 3;
constexpr std::size_t tokens = 4, hidden = 3, ffn = 5;

struct MlpFiles {
  Activation activation = Activation::swiglu;
  bool bias = true;
  bool sequence_parallel = false;
};

MlpCase mlp_case(const MlpFiles& f) {
  MlpCase c;
  c.world = world;
  c.tokens = tokens;
  c.hidden = hidden;
  c.has_bias = f.bias;
  c.cfg.activation = f.activation;
  c.cfg.ffn_features = ffn;
  c.cfg.tokens = tokens;
  c.cfg.sequence_parallel = f.sequence_parallel;
  return c;
}

// Values k/4 for small integers k: exact in every element type.
template <class T>
Tensor<T> quarters(Shape s, int seed) {
  return exact_values<T>(std::move(s), seed, {3, 7, 11, 4.0F});
}

std::string mlp_manifest(const MlpFiles& f, const std::string& dtype, const std::string& outputs,
                         const std::string& config_extra = "", std::string inputs = "") {
  const bool gate = f.activation == Activation::swiglu;
  if (inputs.empty()) {
    for (const std::string n :
         {"x", "w_gate", "w_up", "w_down", "b_gate", "b_up", "b_down", "dy"}) {
      if ((n == "w_gate" || n == "b_gate") && !gate) continue;
      if (n[0] == 'b' && !f.bias) continue;
      inputs.append(inputs.empty() ? "{" : ", ").append(R"(")").append(n).append(R"(": ")");
      inputs.append(n).append(R"(.npy")");
    }
    inputs += "}";
  }
  return R"({"shardcheck_case": 1, "op": "parallel_mlp", "config": {"activation": ")" +
         std::string(name(f.activation)) + R"(", "sequence_parallel": )" +
         (f.sequence_parallel ? "true" : "false") + config_extra +
         R"(}, "sizes": {"tokens": 4, "hidden": 3, "ffn": 5}, "mesh": {"tp": 3}, "dtype": ")" +
         dtype + R"(", "inputs": )" + inputs + R"(, "outputs": )" + outputs + "}";
}

template <class T>
using Out = Tensor<T> MlpRankOutputs<T>::*;

// The outputs the case has, by name.
template <class T>
std::vector<std::pair<std::string, Out<T>>> outputs_of(const MlpFiles& f) {
  using O = MlpRankOutputs<T>;
  std::vector<std::pair<std::string, Out<T>>> out = {
      {"y", &O::y}, {"dx", &O::dx}, {"dw_up", &O::dw_up}, {"dw_down", &O::dw_down}};
  if (f.activation == Activation::swiglu) out.emplace_back("dw_gate", &O::dw_gate);
  if (f.bias) {
    out.emplace_back("db_up", &O::db_up);
    out.emplace_back("db_down", &O::db_down);
    if (f.activation == Activation::swiglu) out.emplace_back("db_gate", &O::db_gate);
  }
  return out;
}

// The library's ranks in T: the inputs global, each output one file per rank or, `global`, the
// whole tensor materialized by the spec's placement. `bias_every_rank` adds b_down P - 1 more
// times to y (each rank adding it before the reduction).
template <class T>
fs::path write_mlp_case(const std::string& dir, const MlpFiles& f, const std::string& dtype,
                        bool global = false, bool bias_every_rank = false) {
  fs::path d = fresh_dir("shardcheck_mlp_compare_tests_" + dir);  // not const: returned by move
  const auto save = [&](const std::string& file, const Tensor<T>& t) { write_tensor(d / file, t); };
  const MlpCase c = mlp_case(f);
  const bool gate = f.activation == Activation::swiglu;
  MlpData<T> data;
  data.x = quarters<T>({tokens, hidden}, 1);
  data.w_up = quarters<T>({(gate ? 2 : 1) * ffn, hidden}, 2);
  data.w_down = quarters<T>({hidden, ffn}, 3);
  if (f.bias) {
    data.b_up = quarters<T>({(gate ? 2 : 1) * ffn}, 4);
    data.b_down = quarters<T>({hidden}, 5);
  }
  data.dy = quarters<T>({tokens, hidden}, 6);
  auto run = run_ranks(MlpAdapter<LibraryMlp>{}, c, data);
  EXPECT_TRUE(run.error.empty()) << run.error;
  save("x.npy", data.x);
  save("w_down.npy", data.w_down);
  save("dy.npy", data.dy);
  save("w_up.npy", gate ? rows(data.w_up, ffn, ffn) : data.w_up);
  if (gate) save("w_gate.npy", rows(data.w_up, 0, ffn));
  if (f.bias) {
    save("b_up.npy", gate ? rows(data.b_up, ffn, ffn) : data.b_up);
    if (gate) save("b_gate.npy", rows(data.b_up, 0, ffn));
    save("b_down.npy", data.b_down);
  }
  const auto s = op_spec(c);
  std::string outputs = "{";
  for (const auto& [out, member] : outputs_of<T>(f)) {
    outputs += std::string(outputs.size() > 1 ? ", " : "") + "\"" + out + "\": ";
    std::vector<Tensor<T>> pieces;
    for (auto& o : run.outputs) {
      if (bias_every_rank && out == "y") {
        for (std::size_t i = 0; i < o.y.size(); ++i) {
          const auto b = static_cast<float>(data.b_down[i % hidden]);
          o.y[i] = T(static_cast<float>(o.y[i]) + static_cast<float>(world - 1) * b);
        }
      }
      pieces.push_back(o.*member);
    }
    if (global) {
      save(out + ".npy",
           materialize(pieces, s.tensor(out).placement(), s.tensor(out).shape).global);
      outputs += "\"" + out + ".npy\"";
      continue;
    }
    outputs += "{\"ranks\": [";
    for (int r = 0; r < world; ++r) {
      const std::string file = out + "." + std::to_string(r) + ".npy";
      save(file, pieces[static_cast<std::size_t>(r)]);
      outputs += std::string(r ? ", " : "") + "\"" + file + "\"";
    }
    outputs += "]}";
  }
  std::ofstream(d / "case.json") << mlp_manifest(f, dtype, outputs + "}");
  return d;
}

TEST(CompareMlp, the_library_ranks_pass_per_rank_and_global) {
  for (const MlpFiles f : {MlpFiles{}, MlpFiles{Activation::gelu, false, false},
                           MlpFiles{Activation::swiglu, true, true}}) {
    SCOPED_TRACE(std::string(name(f.activation)) + (f.sequence_parallel ? " sp" : ""));
    for (const auto& d : {write_mlp_case<float>("f32", f, "float32"),
                          write_mlp_case<bfloat16>("bf16", f, "bfloat16"),
                          write_mlp_case<float>("f32_global", f, "float32", true)}) {
      const auto r = compare_dir(d);
      EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
      EXPECT_EQ(r.verdict.tensors.size(), outputs_of<float>(f).size());
    }
  }
}

TEST(CompareMlp, b_down_added_on_every_rank_fails_on_y_only) {
  const auto r = compare_dir(write_mlp_case<float>("bias", MlpFiles{}, "float32", true, true));
  ASSERT_FALSE(r.verdict.pass());
  for (const auto& t : r.verdict.tensors) EXPECT_EQ(t.pass(), t.name != "y") << t.summary();
  expect_parts(r.verdict.explain(), {"y: worst element", "of the bound"});
}

TEST(CompareMlp, a_piece_of_the_wrong_shape_is_a_layout_failure_naming_the_rank) {
  const fs::path d = write_mlp_case<float>("layout", MlpFiles{}, "float32");
  // Rank 2's dw_up with a row too many: chunk gives it [1, 3].
  cases::write_npy((d / "dw_up.2.npy").string(), cases::from_tensor(Tensor<float>(Shape{2, 3})));
  const auto r = compare_dir(d);
  ASSERT_FALSE(r.verdict.pass());
  for (const auto& t : r.verdict.tensors) EXPECT_EQ(t.pass(), t.name != "dw_up") << t.summary();
  expect_parts(r.verdict.explain(), {"layout: rank 2's piece of dw_up", "[2, 3]", "holds [1, 3]"});
}

// A gelu MLP with bias, tokens 16, hidden 64, ffn 32 on two ranks (16 features each), whose
// projections accumulate in bfloat16 (mlp_accumulate_emulation.hpp; torch's CPU path for small
// bfloat16 matmuls, docs/compare.md "PyTorch, measured"), as global outputs.
std::string sixteen_bit_manifest(const std::string& extra) {
  return R"({"shardcheck_case": 1, "op": "parallel_mlp", "config": {"activation": "gelu"}, )"
         R"("sizes": {"tokens": 16, "hidden": 64, "ffn": 32}, "mesh": {"tp": 2}, )"
         R"("dtype": "bfloat16", "inputs": {"x": "x.npy", "w_up": "w_up.npy", "w_down": )"
         R"("w_down.npy", "b_up": "b_up.npy", "b_down": "b_down.npy", "dy": "dy.npy"}, )"
         R"("outputs": {"y": "y.npy", "dx": "dx.npy", "dw_up": "dw_up.npy", "dw_down": )"
         R"("dw_down.npy", "db_up": "db_up.npy", "db_down": "db_down.npy"})" +
         extra + "}";
}

fs::path write_sixteen_bit_case() {
  constexpr std::size_t n = 16, hid = 64, f = 32;
  // ±(1 + f)·2^e over 8 binades (ops_test_util.hpp), rounded to bfloat16.
  const auto fill = [](Shape s, std::uint64_t seed) {
    return test::random_tensor<bfloat16>(std::move(s), seed);
  };
  const auto x = fill({n, hid}, 1), w_up = fill({f, hid}, 2), w_down = fill({hid, f}, 3),
             b_up = fill({f}, 4), b_down = fill({hid}, 5), dy = fill({n, hid}, 6);
  const std::vector<std::size_t> parts = {16, 16};
  const auto o = mlp_emulation::emulate_mlp<bfloat16>(x, w_up, b_up, w_down, b_down, dy,
                                                      Activation::gelu, parts);
  fs::path d = fresh_dir("shardcheck_mlp_compare_tests_sixteen_bit");
  const std::pair<const char*, const Tensor<bfloat16>*> files[] = {
      {"x", &x},           {"w_up", &w_up},
      {"w_down", &w_down}, {"b_up", &b_up},
      {"b_down", &b_down}, {"dy", &dy},
      {"y", &o.y},         {"dx", &o.dx},
      {"dw_up", &o.dw_up}, {"dw_down", &o.dw_down},
      {"db_up", &o.db_up}, {"db_down", &o.db_down}};
  for (const auto& [name, t] : files) write_tensor(d / (std::string(name) + ".npy"), *t);
  return d;
}

TEST(CompareMlp, bfloat16_accumulation_fails_the_default_and_passes_when_declared) {
  const fs::path d = write_sixteen_bit_case();
  write_text(d / "case.json", sixteen_bit_manifest(""));
  const auto by_default = compare_dir(d);
  EXPECT_FALSE(by_default.verdict.pass()) << "bfloat16 accumulation judged as float32's";
  EXPECT_THAT(by_default.contract, testing::HasSubstr("default: "));
  double worst_default = 0;
  for (const auto& t : by_default.verdict.tensors)
    worst_default = std::max(worst_default, t.max_ratio);
  write_text(d / "case.json", sixteen_bit_manifest(R"(, "accumulate": "bfloat16")"));
  const auto declared = compare_dir(d);
  EXPECT_TRUE(declared.verdict.pass()) << declared.verdict.explain();
  EXPECT_THAT(declared.contract,
              testing::HasSubstr("declared accumulate: inputs and outputs in bfloat16, every "
                                 "dot product and sum accumulated in bfloat16"));
  EXPECT_THAT(declared.verdict.case_text, testing::HasSubstr("accumulate=bfloat16"));
  double worst_declared = 0;
  for (const auto& t : declared.verdict.tensors) {
    worst_declared = std::max(worst_declared, t.max_ratio);
  }
  std::printf("mlp bfloat16 accumulation: worst |err|/bound %.3g (default), %.3g (declared)\n",
              worst_default, worst_declared);
}

TEST(CompareMlpBadInput, every_error_names_the_file_and_the_field) {
  const MlpFiles f;
  const fs::path d = write_mlp_case<float>("bad_input", f, "float32", true);
  const std::string outs = R"({"y": "y.npy", "dw_up": "dw_up.npy"})";
  const BadCase cases[] = {
      {"config field misspelt",
       mlp_manifest(f, "float32", outs, R"(, "sequence_paralel": true)"),
       {"config: unknown field sequence_paralel", "sequence_parallel"}},
      {"unknown activation",
       mlp_manifest(f, "float32", outs, R"(, "activation": "relu")"),
       {"config.activation", "relu", "gelu, gelu_tanh, swiglu"}},
      {"config field of the wrong type",
       mlp_manifest(f, "float32", outs, R"(, "ffn_split": "chunk")"),
       {"config.ffn_split: is a string"}},
      {"ffn_features other than sizes.ffn",
       mlp_manifest(f, "float32", outs, R"(, "ffn_features": 4)"),
       {"config.ffn_features: is 4 but sizes.ffn is 5"}},
      {"size missing",
       with(mlp_manifest(f, "float32", outs), ", \"ffn\": 5", ""),
       {"sizes.ffn: missing; parallel_mlp needs it"}},
      {"w_gate missing for swiglu",
       mlp_manifest(
           f, "float32", outs, "",
           R"({"x": "x.npy", "w_up": "w_up.npy", "w_down": "w_down.npy", "dy": "dy.npy"})"),
       {"inputs.w_gate: missing; parallel_mlp needs it (shape [5, 3])"}},
      {"input of the wrong shape",
       mlp_manifest(
           f, "float32", outs, "",
           R"({"x": "x.npy", "w_gate": "w_gate.npy", "w_up": "w_down.npy", "w_down": "w_down.npy", "b_gate": "b_gate.npy", "b_up": "b_up.npy", "b_down": "b_down.npy", "dy": "dy.npy"})"),
       {"w_down.npy: shape: is [3, 5] but parallel_mlp's w_up is [5, 3]"}},
      {"gradient without dy",
       mlp_manifest(
           f, "float32", R"({"dw_down": "dw_down.npy"})", "",
           R"({"x": "x.npy", "w_gate": "w_gate.npy", "w_up": "w_up.npy", "w_down": "w_down.npy", "b_gate": "b_gate.npy", "b_up": "b_up.npy", "b_down": "b_down.npy"})"),
       {"inputs.dy: missing; the case gives dw_down"}},
      {"accumulate that does not hold the dtype",
       with(mlp_manifest(f, "float32", outs), R"("dtype": "float32")",
            R"("dtype": "float32", "accumulate": "bfloat16")"),
       {"accumulate: is bfloat16 but an accumulator must hold every float32 value and round no "
        "finer; give one of float32, float64 (docs/compare.md, \"Contract\")"}},
      {"accumulate too narrow for the contraction's length",
       with(with(mlp_manifest(f, "bfloat16", outs), R"("dtype": "bfloat16")",
                 R"("dtype": "bfloat16", "accumulate": "bfloat16")"),
            R"("ffn": 5)", R"("ffn": 200)"),
       {"accumulate: is bfloat16 but the longest contraction has 400 terms (the largest of "
        "tokens, hidden, and ffn (twice ffn for swiglu)) and a dot accumulated in bfloat16 has "
        "an a-priori bound only up to 255 terms (γ_n needs n·u < 1, u = 2^-8); give a wider "
        "accumulator, or omit the field (docs/compare.md, \"Contract\")"}},
  };
  for (const auto& c : cases) {
    expect_case_error(d, c, "shardcheck_mlp_compare_tests_bad_input/");
  }
}

}  // namespace
}  // namespace shardcheck::check::mlp_compare_tests
