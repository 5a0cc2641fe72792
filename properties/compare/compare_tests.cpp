// shardcheck compare on cases written to disk here: a correct implementation passes (global and
// per-rank outputs, every dtype), a planted bug fails on the tensor it breaks, a piece of the
// wrong local shape is a layout failure naming the rank, and every bad input is a CaseError whose
// message names the file and the field (the command turns it into exit status 2).
#include "cases/case_manifest.hpp"
#include "cases/npy.hpp"
#include "compare/compare.hpp"
#include "ops/linear/linear.hpp"
#include "suites/linear/linear_case.hpp"
#include "suites/linear/linear_impl.hpp"
#include "testing/compare_test_util.hpp"
#include "testing/ops_test_util.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace shardcheck::check::compare_tests {
namespace {

using namespace compare_test;  // case files written and compared (compare_test_util.hpp)
using ::testing::HasSubstr;

fs::path case_dir(const std::string& name) { return fresh_dir("shardcheck_compare_tests_" + name); }

// Small integers: exact in every element type, so the case's inputs are the values written.
template <class T>
Tensor<T> ints(Shape s, int seed) {
  return exact_values<T>(std::move(s), seed, {7, 13, 9, 1.0F});
}

// A linear case: the layer, P = 3, tokens 5, in 4, out 7 (uneven over 3 ranks).
struct LinearFiles {
  LinearLayer layer = LinearLayer::row_parallel;
  int world = 3;
  std::size_t tokens = 5, in = 4, out = 7;
};

template <class T>
LinearData<T> linear_data(const LinearFiles& f) {
  LinearData<T> d;
  d.x = ints<T>({f.tokens, f.in}, 1);
  d.w = ints<T>({f.out, f.in}, 2);
  d.b = ints<T>({f.out}, 3);
  d.dy = ints<T>({f.tokens, f.out}, 4);
  return d;
}

// The manifest of a linear case: `config` (default: gather_output for the column-parallel layer,
// input_is_parallel false for the row-parallel one), the inputs, the outputs and `extra` fields.
std::string manifest(
    const LinearFiles& f, const std::string& dtype, const std::string& outputs,
    const std::string& extra = "",
    const std::string& inputs = R"({"x": "x.npy", "w": "w.npy", "b": "b.npy", "dy": "dy.npy"})",
    std::string config = "") {
  const bool column = f.layer == LinearLayer::column_parallel;
  if (config.empty()) {
    config = column ? R"({"gather_output": true})" : R"({"input_is_parallel": false})";
  }
  std::string m = R"({"shardcheck_case": 1, "op": ")";
  m += column ? "column_parallel_linear" : "row_parallel_linear";
  m += R"(", "config": )" + config;
  m += R"(, "sizes": {"tokens": )" + std::to_string(f.tokens);
  m += R"(, "in": )" + std::to_string(f.in);
  m += R"(, "out": )" + std::to_string(f.out);
  m += R"(}, "mesh": {"tp": )" + std::to_string(f.world);
  m += R"(}, "dtype": ")" + dtype;
  m += R"(", "inputs": )" + inputs;
  m += R"(, "outputs": )" + outputs;
  m += extra + "}";
  return m;
}

// Writes the inputs and the dense layer's outputs in T (a correct implementation: the dense
// evaluation is one of the orders the parallel bound covers), global.
template <class T>
fs::path write_dense_case(const std::string& name, const LinearFiles& f, const std::string& dtype,
                          T bias_scale = T(1)) {
  fs::path d = case_dir(name);
  const auto data = linear_data<T>(f);
  write_tensor(d / "x.npy", data.x);
  write_tensor(d / "w.npy", data.w);
  write_tensor(d / "b.npy", data.b);
  write_tensor(d / "dy.npy", data.dy);
  Tensor<T> b = data.b;
  for (std::size_t i = 0; i < b.size(); ++i)
    b[i] = T(static_cast<float>(b[i]) * static_cast<float>(bias_scale));
  write_tensor(d / "y.npy", linear(data.x, data.w, b));
  const auto g = linear_backward(data.x, data.w, true, data.dy);
  write_tensor(d / "dx.npy", g.dx);
  write_tensor(d / "dw.npy", g.dw);
  write_tensor(d / "db.npy", g.db);
  write_text(
      d / "case.json",
      manifest(f, dtype, R"({"y": "y.npy", "dx": "dx.npy", "dw": "dw.npy", "db": "db.npy"})"));
  return d;
}

TEST(Compare, a_correct_dense_implementation_passes_in_every_dtype) {
  for (auto layer : {LinearLayer::row_parallel, LinearLayer::column_parallel}) {
    LinearFiles f;
    f.layer = layer;
    const auto check = [&](const fs::path& d) {
      const auto r = compare_dir(d);
      EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
      EXPECT_EQ(r.verdict.tensors.size(), 4U);
      EXPECT_EQ(r.verdict.world, 3);
    };
    check(write_dense_case<double>("f64", f, "float64"));
    check(write_dense_case<float>("f32", f, "float32"));
    check(write_dense_case<bfloat16>("bf16", f, "bfloat16"));
    check(write_dense_case<float16>("f16", f, "float16"));
  }
}

TEST(Compare, the_bias_added_on_every_rank_fails_on_y_only) {
  LinearFiles f;  // row-parallel, P = 3: the bias added before the all_reduce counts 3 times
  const auto r = compare_dir(write_dense_case<float>("bias_every_rank", f, "float32", 3.0F));
  ASSERT_FALSE(r.verdict.pass());
  for (const auto& t : r.verdict.tensors) EXPECT_EQ(t.pass(), t.name != "y") << t.summary();
  expect_parts(r.verdict.explain(), {"y: worst element", "of the bound"});
}

// The library's own ranks, each rank's pieces written as its own file.
TEST(Compare, per_rank_pieces_of_the_library_pass_and_a_wrong_piece_is_a_layout_failure) {
  for (auto layer : {LinearLayer::column_parallel, LinearLayer::row_parallel}) {
    LinearCase c;
    c.layer = layer;
    c.world = 3;
    c.tokens = 5;
    c.in = 4;
    c.out = 7;
    c.row.input_is_parallel = true;
    const auto data = linear_data<float>({layer, 3, 5, 4, 7});
    const auto run = run_ranks(LinearAdapter<LibraryLinear>{}, c, data);
    ASSERT_TRUE(run.error.empty()) << run.error;
    const fs::path d = case_dir(layer == LinearLayer::column_parallel ? "ranks_col" : "ranks_row");
    write_tensor(d / "x.npy", data.x);
    write_tensor(d / "w.npy", data.w);
    write_tensor(d / "b.npy", data.b);
    write_tensor(d / "dy.npy", data.dy);
    std::string outputs = "{";
    for (const auto& [name, member] : {std::pair{"y", &LinearRankOutputs<float>::y},
                                       std::pair{"dw", &LinearRankOutputs<float>::dw}}) {
      if (outputs.size() > 1) outputs += ", ";
      outputs += R"(")";
      outputs += name;
      outputs += R"(": {"ranks": [)";
      for (int r = 0; r < 3; ++r) {
        std::string file = name;
        file += "." + std::to_string(r) + ".npy";
        write_tensor(d / file, run.outputs[static_cast<std::size_t>(r)].*member);
        if (r > 0) outputs += ", ";
        outputs += R"(")" + file + R"(")";
      }
      outputs += "]}";
    }
    outputs += "}";
    const bool column = layer == LinearLayer::column_parallel;
    write_text(d / "case.json",
               manifest({layer, 3, 5, 4, 7}, "float32", outputs, "",
                        R"({"x": "x.npy", "w": "w.npy", "b": "b.npy", "dy": "dy.npy"})",
                        column ? "{}" : R"({"input_is_parallel": true})"));
    const auto ok = compare_dir(d);
    EXPECT_TRUE(ok.verdict.pass()) << ok.verdict.explain();
    EXPECT_EQ(ok.verdict.tensors.size(), 2U);  // only what the case gives is judged

    // Rank 1's dw with a row too few: a layout failure naming rank 1 and both shapes.
    auto dw1 = run.outputs[1].dw;
    Shape s = dw1.shape();
    s[0] -= 1;
    write_tensor(d / "dw.1.npy", Tensor<float>(s));
    const auto bad = compare_dir(d);
    ASSERT_FALSE(bad.verdict.pass());
    expect_parts(bad.verdict.explain(),
                 {"layout: rank 1's piece of dw", format_shape(s), format_shape(dw1.shape())});
  }
}

// Baseline mode: the same outputs again as a trusted implementation's give an error ratio of 1;
// a baseline with a planted error is judged on its own (it fails) while the implementation
// passes, and the ratio is below 1.
TEST(Compare, a_baseline_is_judged_the_same_way_and_gives_the_error_ratio) {
  LinearFiles f;
  const fs::path d = write_dense_case<float>("baseline", f, "float32");
  fs::copy_file(d / "y.npy", d / "y_ref.npy");
  const std::string outs = R"({"y": "y.npy", "dx": "dx.npy"})";
  write_text(d / "case.json",
             manifest(f, "float32", outs,
                      R"(, "baseline": {"y": "y_ref.npy"}, "baseline_implementation": "same")"));
  const auto same = compare_dir(d);
  ASSERT_TRUE(same.verdict.pass()) << same.verdict.explain();
  ASSERT_EQ(same.baseline.size(), 1U);
  EXPECT_EQ(same.baseline_implementation, "same");
  ASSERT_NE(same.baseline_of("y"), nullptr);
  EXPECT_EQ(same.baseline_of("dx"), nullptr);
  EXPECT_EQ(baseline_error_ratio(same.verdict.tensors[0], *same.baseline_of("y")), 1.0);

  auto y = cases::to_tensor<float>(cases::read_npy((d / "y.npy").string()), DType::float32, "y");
  y[0] += 1.0F;
  write_tensor(d / "y_ref.npy", y);
  const auto worse = compare_dir(d);
  EXPECT_TRUE(worse.verdict.pass());
  ASSERT_NE(worse.baseline_of("y"), nullptr);
  EXPECT_FALSE(worse.baseline_of("y")->pass());
  EXPECT_LT(baseline_error_ratio(worse.verdict.tensors[0], *worse.baseline_of("y")), 1.0);
}

// 16-bit accumulation, as torch's CPU path for small bfloat16 matmuls does (docs/compare.md,
// "PyTorch, measured"): every product and partial sum of each dot rounded to bfloat16. Outside
// the default contract (float32 accumulation); within a declared "accumulate": "bfloat16".
TEST(Compare, bfloat16_accumulation_fails_the_default_and_passes_when_declared) {
  // P = 1; tokens 48, in 64, out 7.
  const LinearFiles f{LinearLayer::column_parallel, 1, 48, 64, 7};
  auto fill = [](Shape s, std::uint32_t v) {  // values in [-1, 1) with 8 significant bits
    Tensor<bfloat16> t(std::move(s));
    for (std::size_t i = 0; i < t.size(); ++i) {
      v = v * 1664525U + 1013904223U;
      t[i] = bfloat16(static_cast<float>(v >> 8U) / 8388608.0F - 1.0F);
    }
    return t;
  };
  const auto x = fill({f.tokens, f.in}, 1), w = fill({f.out, f.in}, 2);
  const auto dy = fill({f.tokens, f.out}, 3);
  // Σ_k a(k)·b(k) with every step rounded to bfloat16, in order.
  auto dot16 = [](std::size_t n, auto a, auto b) {
    bfloat16 acc(0.0F);
    for (std::size_t k = 0; k < n; ++k) {
      const bfloat16 p(static_cast<float>(a(k)) * static_cast<float>(b(k)));
      acc = bfloat16(static_cast<float>(acc) + static_cast<float>(p));
    }
    return acc;
  };
  Tensor<bfloat16> y({f.tokens, f.out}), dw({f.out, f.in});
  for (std::size_t t = 0; t < f.tokens; ++t) {
    for (std::size_t o = 0; o < f.out; ++o) {
      y(t, o) = dot16(
          f.in, [&](std::size_t i) { return x(t, i); }, [&](std::size_t i) { return w(o, i); });
    }
  }
  for (std::size_t o = 0; o < f.out; ++o) {
    for (std::size_t i = 0; i < f.in; ++i) {
      dw(o, i) = dot16(
          f.tokens, [&](std::size_t t) { return dy(t, o); },
          [&](std::size_t t) { return x(t, i); });
    }
  }
  const fs::path d = case_dir("bf16_accumulation");
  write_tensor(d / "x.npy", x);
  write_tensor(d / "w.npy", w);
  write_tensor(d / "dy.npy", dy);
  write_tensor(d / "y.npy", y);
  write_tensor(d / "dw.npy", dw);
  const std::string outputs = R"({"y": "y.npy", "dw": "dw.npy"})";
  const std::string inputs = R"({"x": "x.npy", "w": "w.npy", "dy": "dy.npy"})";
  write_text(d / "case.json", manifest(f, "bfloat16", outputs, "", inputs));
  const auto by_default = compare_dir(d);
  EXPECT_FALSE(by_default.verdict.pass()) << "bfloat16 accumulation judged as float32's";
  EXPECT_THAT(by_default.contract, HasSubstr("default: "));
  write_text(d / "case.json",
             manifest(f, "bfloat16", outputs, R"(, "accumulate": "bfloat16")", inputs));
  const auto declared = compare_dir(d);
  EXPECT_TRUE(declared.verdict.pass()) << declared.verdict.explain();
  EXPECT_THAT(declared.contract,
              HasSubstr("declared accumulate: inputs and outputs in bfloat16, every dot product "
                        "and sum accumulated in bfloat16"));
  EXPECT_THAT(declared.verdict.case_text, HasSubstr("accumulate=bfloat16"));
}

// A fused-bias kernel (the bias one more term of the float32 accumulation, here its first, the
// sum rounded once), column-parallel P = 3 with y gathered: 128 products 2^-30 added to the bias 1
// are each below half an ulp and lost, an error of 2u. Judged as bias_after_sum (the library's
// order, whose bound is about u·|y| here) y fails; declared fused_bias it passes, the contract line
// naming it; the default covers both orders and passes it.
TEST(Compare, a_fused_bias_fails_bias_after_sum_and_passes_declared_fused_bias) {
  const LinearFiles f{LinearLayer::column_parallel, 3, 2, 128, 3};
  const Tensor<float> x({f.tokens, f.in}, std::vector<float>(f.tokens * f.in, 0x1p-15F)),
      w({f.out, f.in}, std::vector<float>(f.out * f.in, 0x1p-15F)),
      b({f.out}, std::vector<float>(f.out, 1.0F));
  Tensor<float> y({f.tokens, f.out});
  for (std::size_t t = 0; t < f.tokens; ++t) {
    for (std::size_t o = 0; o < f.out; ++o) {
      float acc = b[o];
      for (std::size_t i = 0; i < f.in; ++i) acc += x(t, i) * w(o, i);
      y(t, o) = acc;
    }
  }
  const fs::path d = case_dir("fused_bias");
  write_tensor(d / "x.npy", x);
  write_tensor(d / "w.npy", w);
  write_tensor(d / "b.npy", b);
  write_tensor(d / "y.npy", y);
  const std::string inputs = R"({"x": "x.npy", "w": "w.npy", "b": "b.npy"})";
  struct Judged {
    const char* contract;  // "": none, the default
    bool pass;
    const char* words;  // in the verdict's contract line
  };
  const Judged judged[] = {
      {"bias_after_sum", false, "contract bias_after_sum: "},
      {"fused_bias", true,
       "default: inputs and outputs in float32, every dot product and sum accumulated in float32 "
       "in any order and rounded once to float32 (docs/tolerances.md); contract fused_bias: y's "
       "bias one more term of one rank's dot accumulation"},
      {"", true, ": the larger bound"},
  };
  for (const Judged& j : judged) {
    SCOPED_TRACE(j.contract);
    const std::string contract = j.contract;
    const std::string extra = contract.empty() ? "" : R"(, "contract": ")" + contract + "\"";
    write_text(d / "case.json", manifest(f, "float32", R"({"y": "y.npy"})", extra, inputs));
    const auto r = compare_dir(d);
    EXPECT_EQ(r.verdict.pass(), j.pass) << r.verdict.explain();
    EXPECT_THAT(r.contract, HasSubstr(j.words));
    std::cout << "fused bias y as " << (contract.empty() ? "the default" : contract) << ": "
              << r.verdict.tensors[0].summary() << "\n";
  }
  // The contract as an object of its name (and no parameters: the linear ops take none).
  write_text(d / "case.json", manifest(f, "float32", R"({"y": "y.npy"})",
                                       R"(, "contract": {"name": "fused_bias"})", inputs));
  const auto r = compare_dir(d);
  EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
  EXPECT_THAT(r.contract, HasSubstr("contract fused_bias: "));
}

// ---------------------------------------------------------------- bad input, by message

TEST(CompareBadInput, every_error_names_the_file_and_the_field) {
  LinearFiles f;
  const fs::path good = write_dense_case<float>("bad_input", f, "float32");
  const std::string outs = R"({"y": "y.npy"})";
  const std::vector<BadCase> cases = {
      {"malformed JSON", "{\"shardcheck_case\": 1,", {"case.json: JSON: malformed at byte"}},
      {"number beyond float64",
       R"({"shardcheck_case": 1e400})",
       {"case.json: JSON:", "number overflow", "within float64's range"}},
      {"not an object", "[1, 2]", {"case.json", "is an array, not an object"}},
      {"version",
       R"({"shardcheck_case": 2})",
       {"shardcheck_case: is 2 but this shardcheck reads version 1"}},
      {"missing op", R"({"shardcheck_case": 1})", {"op: missing; give a string"}},
      {"unknown op",
       with(manifest(f, "float32", outs), "row_parallel_linear", "row_parallel_linaer"),
       {"op: \"row_parallel_linaer\" is not an op compare knows", "row_parallel_linear"}},
      {"unknown dtype",
       manifest(f, "float8", outs),
       {"dtype: is \"float8\"", "float64, float32, bfloat16, float16"}},
      {"unknown config field",
       with(manifest(f, "float32", outs), "\"input_is_parallel\": false",
            "\"input_is_paralel\": false"),
       {"config: unknown field input_is_paralel", "input_is_parallel"}},
      {"config field of the wrong type",
       with(manifest(f, "float32", outs), "false", "\"no\""),
       {"config.input_is_parallel: is a string; give true or false"}},
      {"missing size",
       with(manifest(f, "float32", outs), "\"in\": 4, ", ""),
       {"sizes.in: missing; row_parallel_linear needs it"}},
      {"empty op",
       with(manifest(f, "float32", outs), R"("op": "row_parallel_linear")", R"("op": "")"),
       {"op: is empty; give the op's name as `shardcheck list` prints it"}},
      {"unknown top-level field",
       manifest(f, "float32", outs, R"(, "seed": 3)"),
       {"the manifest: unknown field seed"}},
      {"accumulate narrower than the dtype",
       manifest(f, "float32", outs, R"(, "accumulate": "float16")"),
       {"accumulate: is float16 but an accumulator must hold every float32 value and round no "
        "finer; give one of float32, float64"}},
      {"accumulate that does not hold bfloat16",
       manifest(f, "bfloat16", outs, R"(, "accumulate": "float16")"),
       {"accumulate: is float16 but an accumulator must hold every bfloat16 value",
        "give one of bfloat16, float32, float64"}},
      {"accumulate too narrow for the contraction's length",
       with(manifest(f, "bfloat16", outs, R"(, "accumulate": "bfloat16")"), R"("tokens": 5)",
            R"("tokens": 300)"),
       {"accumulate: is bfloat16 but the longest contraction has 300 terms",
        "has an a-priori bound only up to 255 terms", "give a wider accumulator"}},
      {"a contract the op does not know",
       manifest(f, "float32", outs, R"(, "contract": "split_k")"),
       {"contract: is \"split_k\" but row_parallel_linear knows \"bias_after_sum\" (y's bias "
        "added once in T after the dot (and the cross-rank sum), as lib/ops/linear and "
        "Megatron-LM) and \"fused_bias\" (y's bias one more term of one rank's dot "
        "accumulation, rounded once with it, as cuBLASLt's bias epilogue and vLLM's "
        "RowParallelLinear (the bias on rank 0's matmul)); omit the field for a bound that "
        "covers both"}},
      {"a contract parameter the op does not take",
       manifest(f, "float32", outs, R"(, "contract": {"name": "fused_bias", "key_block": 4})"),
       {"case.json: contract: unknown field key_block; the fields known here are name"}},
      {"a contract neither a name nor an object",
       manifest(f, "float32", outs, R"(, "contract": 3)"),
       {"case.json: contract: is neither a string nor an object; give the contract's name, or an "
        "object of its name and parameters ({\"name\": \"exp2\", \"key_block\": 128}; "
        "docs/case-format.md)"}},
      {"missing file",
       manifest(f, "float32", R"({"y": "nope.npy"})"),
       {"nope.npy: file: cannot be opened"}},
      {"per-rank count",
       manifest(f, "float32", R"({"y": {"ranks": ["y.npy", "y.npy"]}})"),
       {"outputs.y.ranks: has 2 files but the mesh has 3 ranks"}},
      {"input given per rank",
       with(manifest(f, "float32", outs), "\"x.npy\"", R"({"ranks": []})"),
       {"inputs.x: must be one .npy file"}},
      {"no outputs", manifest(f, "float32", "{}"), {"outputs: is empty"}},
      {"baseline of a tensor not given",
       manifest(f, "float32", outs, R"(, "baseline": {"dx": "dx.npy"})"),
       {"baseline.dx: is not among the outputs"}},
      {"tensor the op lacks",
       manifest(f, "float32", R"({"y": "y.npy", "dz": "y.npy"})"),
       {"row_parallel_linear has no tensor dz", "its tensors are x, w, b, y, dy, dx, dw, db"}},
      {"wrong shape",
       manifest(f, "float32", R"({"y": "dx.npy"})"),
       {"dx.npy: shape: is [5, 4] but row_parallel_linear's y is [5, 7]"}},
      {"dtype of a file", manifest(f, "float64", outs), {"x.npy", "float64"}},
      {"gradient without dy",
       manifest(f, "float32", R"({"dx": "dx.npy"})", "",
                R"({"x": "x.npy", "w": "w.npy", "b": "b.npy"})"),
       {"inputs.dy: missing; the case gives dx"}},
      {"split that does not tile",
       with(manifest(f, "float32", outs), "\"input_is_parallel\": false",
            R"("in_split": {"kind": "explicit", "sizes": [1, 1]})"),
       {"case.json: config: split: explicit sizes [1,1] (2 sizes, sum 2) do not tile"}},
      {"mesh of another name",
       with(manifest(f, "float32", outs), "\"tp\"", "\"cp\""),
       {"mesh: is {cp=3} but row_parallel_linear at this config runs on {tp=3}"}},
  };
  for (const auto& c : cases) expect_case_error(good, c, "shardcheck_compare_tests_bad_input/");
}

}  // namespace
}  // namespace shardcheck::check::compare_tests
