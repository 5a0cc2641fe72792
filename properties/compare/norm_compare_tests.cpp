// shardcheck compare on sequence_parallel_norm cases written to disk here: the library's own
// ranks pass (per-rank pieces, LayerNorm and RMSNorm, float32 and bfloat16), the dense op's
// global outputs pass, dgamma/dbeta left unreduced (each rank's local sum, the Megatron bug the
// gradient all_reduce prevents) fail on those tensors only, a piece of the wrong local shape is a
// layout failure naming the rank, and every bad input is a CaseError whose message is pinned.
#include "cases/case_manifest.hpp"
#include "cases/npy.hpp"
#include "compare/compare.hpp"
#include "ops/norm/norm.hpp"
#include "suites/norm/norm_case.hpp"
#include "suites/norm/norm_impl.hpp"
#include "testing/compare_test_util.hpp"
#include "testing/ops_test_util.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace shardcheck::check::norm_compare_tests {
namespace {

using namespace compare_test;  // case files written and compared (compare_test_util.hpp)
using ::testing::HasSubstr;

fs::path fresh_norm_dir(const std::string& name) {
  return fresh_dir("shardcheck_norm_compare_tests_" + name);
}

// Values k/8 for small integers k: exact in every element type, not all equal along a row.
template <class T>
Tensor<T> eighths(Shape s, int seed) {
  return exact_values<T>(std::move(s), seed, {5, 11, 13, 8.0F});
}

// P = 3, tokens 7 (chunk: 3, 3, 1), hidden 5.
constexpr int world = 3;
constexpr std::size_t tokens = 7, hidden = 5;

NormCase norm_case(NormKind kind) {
  NormCase c;
  c.op = NormOp::norm;
  c.world = world;
  c.hidden = hidden;
  c.block.norm.norm.kind = kind;
  c.block.norm.tokens = tokens;
  return c;
}

template <class T>
NormData<T> norm_data(NormKind kind) {
  NormData<T> d;
  d.x = eighths<T>({tokens, hidden}, 1);
  d.gamma = eighths<T>({hidden}, 2);
  if (has_beta(kind)) d.beta = eighths<T>({hidden}, 3);
  d.dy = eighths<T>({tokens, hidden}, 4);
  return d;
}

const char* kind_name(NormKind k) { return k == NormKind::rms_norm ? "rms_norm" : "layer_norm"; }

// The manifest of a case in `dtype` with the given outputs JSON; `config` and `inputs` replace
// the defaults (the kind alone; every input of the kind).
std::string norm_manifest(NormKind kind, const std::string& dtype, const std::string& outputs,
                          std::string config = "", std::string inputs = "") {
  if (config.empty()) config = std::string(R"({"kind": ")") + kind_name(kind) + "\"}";
  if (inputs.empty()) {
    inputs = has_beta(kind)
                 ? R"({"x": "x.npy", "gamma": "gamma.npy", "beta": "beta.npy", "dy": "dy.npy"})"
                 : R"({"x": "x.npy", "gamma": "gamma.npy", "dy": "dy.npy"})";
  }
  return R"({"shardcheck_case": 1, "op": "sequence_parallel_norm", "config": )" + config +
         R"(, "sizes": {"tokens": 7, "hidden": 5}, "mesh": {"tp": 3}, "dtype": ")" + dtype +
         R"(", "inputs": )" + inputs + R"(, "outputs": )" + outputs + "}";
}

template <class T>
void write_inputs(const fs::path& d, NormKind kind, const NormData<T>& data) {
  write_tensor(d / "x.npy", data.x);
  write_tensor(d / "gamma.npy", data.gamma);
  if (has_beta(kind)) write_tensor(d / "beta.npy", data.beta);
  write_tensor(d / "dy.npy", data.dy);
}

// The outputs of `kind` (dbeta with beta only).
std::vector<std::string> output_names(NormKind kind) {
  std::vector<std::string> names = {"y", "dx", "dgamma"};
  if (has_beta(kind)) names.emplace_back("dbeta");
  return names;
}

// The library's ranks in T; each output written one file per rank. `unreduced` replaces each
// rank's dgamma/dbeta with its local sum (the missing all_reduce).
template <class T>
fs::path write_library_case(const std::string& name, NormKind kind, const std::string& dtype,
                            bool unreduced = false) {
  const NormCase c = norm_case(kind);
  const auto data = norm_data<T>(kind);
  auto run = run_ranks(NormAdapter<LibraryNorm>{}, c, data);
  EXPECT_TRUE(run.error.empty()) << run.error;
  const auto s = op_spec(c);
  if (unreduced) {
    for (int r = 0; r < world; ++r) {
      auto& o = run.outputs[static_cast<std::size_t>(r)];
      const Tensor<T> xr = place(data.x, s.tensor("x").placement(), world, r);
      const Tensor<T> dyr = place(data.dy, s.tensor("dy").placement(), world, r);
      auto g = norm_backward(c.norm().norm, xr, data.gamma, dyr);
      o.dgamma = g.dgamma;
      o.dbeta = g.dbeta;
    }
  }
  fs::path d = fresh_norm_dir(name);  // not const: returned by move
  write_inputs(d, kind, data);
  using O = BlockRankOutputs<T>;
  const std::vector<std::pair<std::string, Tensor<T> O::*>> members = {
      {"y", &O::y}, {"dx", &O::dx}, {"dgamma", &O::dgamma}, {"dbeta", &O::dbeta}};
  std::string outputs = "{";
  for (const auto& [out, member] : members) {
    if (out == "dbeta" && !has_beta(kind)) continue;
    outputs += std::string(outputs.size() > 1 ? ", " : "") + "\"" + out + R"(": {"ranks": [)";
    for (int r = 0; r < world; ++r) {
      const std::string file = out + "." + std::to_string(r) + ".npy";
      write_tensor(d / file, run.outputs[static_cast<std::size_t>(r)].*member);
      outputs += std::string(r ? ", " : "") + "\"" + file + "\"";
    }
    outputs += "]}";
  }
  std::ofstream(d / "case.json") << norm_manifest(kind, dtype, outputs + "}");
  return d;
}

// The dense op (one rank's compute on every token) in T, its outputs global.
template <class T>
fs::path write_dense_case(const std::string& name, NormKind kind, const std::string& dtype) {
  fs::path d = fresh_norm_dir(name);  // not const: returned by move
  const auto data = norm_data<T>(kind);
  write_inputs(d, kind, data);
  NormConfig cfg;
  cfg.kind = kind;
  write_tensor(d / "y.npy", norm_forward(cfg, data.x, data.gamma, data.beta));
  const auto g = norm_backward(cfg, data.x, data.gamma, data.dy);
  write_tensor(d / "dx.npy", g.dx);
  write_tensor(d / "dgamma.npy", g.dgamma);
  std::string outputs = R"({"y": "y.npy", "dx": "dx.npy", "dgamma": "dgamma.npy")";
  if (has_beta(kind)) {
    write_tensor(d / "dbeta.npy", g.dbeta);
    outputs += R"(, "dbeta": "dbeta.npy")";
  }
  std::ofstream(d / "case.json") << norm_manifest(kind, dtype, outputs + "}");
  return d;
}

void expect_pass(const fs::path& d, NormKind kind) {
  const auto r = compare_dir(d);
  EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
  EXPECT_EQ(r.verdict.tensors.size(), output_names(kind).size());
  EXPECT_EQ(r.verdict.world, world);
}

constexpr NormKind kinds[] = {NormKind::layer_norm, NormKind::rms_norm};

// The library's ranks (per-rank pieces) and the dense op (global outputs), in several dtypes.
TEST(CompareNorm, the_library_ranks_and_the_dense_op_pass) {
  for (const NormKind kind : kinds) {
    SCOPED_TRACE(kind_name(kind));
    for (const auto& d : {write_library_case<float>("lib_f32", kind, "float32"),
                          write_library_case<bfloat16>("lib_bf16", kind, "bfloat16"),
                          write_library_case<double>("lib_f64", kind, "float64"),
                          write_dense_case<float>("dense_f32", kind, "float32"),
                          write_dense_case<bfloat16>("dense_bf16", kind, "bfloat16"),
                          write_dense_case<float16>("dense_f16", kind, "float16")}) {
      SCOPED_TRACE(d.string());
      expect_pass(d, kind);
    }
  }
}

TEST(CompareNorm, parameter_gradients_never_reduced_fail_on_dgamma_and_dbeta_only) {
  for (const NormKind kind : kinds) {
    SCOPED_TRACE(kind_name(kind));
    const auto r = compare_dir(write_library_case<float>("unreduced", kind, "float32", true));
    ASSERT_FALSE(r.verdict.pass());
    for (const auto& t : r.verdict.tensors) {
      EXPECT_EQ(t.pass(), t.name == "y" || t.name == "dx") << t.summary();
    }
    expect_parts(r.verdict.explain(), {"dgamma", "of the bound"});
  }
}

TEST(CompareNorm, a_piece_of_the_wrong_shape_is_a_layout_failure_naming_the_rank) {
  const fs::path d = write_library_case<float>("layout", NormKind::layer_norm, "float32");
  // Rank 1's y with a token too few: chunk gives it [3, 5].
  write_tensor(d / "y.1.npy", Tensor<float>(Shape{2, hidden}));
  const auto r = compare_dir(d);
  ASSERT_FALSE(r.verdict.pass());
  for (const auto& t : r.verdict.tensors) EXPECT_EQ(t.pass(), t.name != "y") << t.summary();
  expect_parts(r.verdict.explain(), {"layout: rank 1's piece of y", "[2, 5]", "holds [3, 5]"});
}

// A LayerNorm forward whose variance is one pass, var = max(Σx²/n − mean², 0) in float32, on
// rows shifted to 200 (the cancellation the formula is known for): judged as two_pass, y fails;
// declared one_pass, it passes and the verdict's contract line names one_pass; the default,
// which covers every contract's kernels, passes it too.
TEST(CompareNorm, a_one_pass_variance_fails_two_pass_and_passes_declared_one_pass) {
  const NormKind ln = NormKind::layer_norm;
  auto data = norm_data<float>(ln);
  for (std::size_t i = 0; i < data.x.size(); ++i) data.x[i] = 200.0F + data.x[i];
  Tensor<float> y(Shape{tokens, hidden});
  const float eps = 1e-5F;
  for (std::size_t t = 0; t < tokens; ++t) {
    float s = 0, s2 = 0;
    for (std::size_t i = 0; i < hidden; ++i) {
      const float v = data.x[t * hidden + i];
      s += v;
      s2 += v * v;
    }
    const float mean = s / static_cast<float>(hidden);
    const float var = std::max(s2 / static_cast<float>(hidden) - mean * mean, 0.0F);
    const float rstd = 1.0F / std::sqrt(var + eps);
    for (std::size_t i = 0; i < hidden; ++i) {
      y[t * hidden + i] = (data.x[t * hidden + i] - mean) * rstd * data.gamma[i] + data.beta[i];
    }
  }
  const fs::path d = fresh_norm_dir("one_pass");
  write_inputs(d, ln, data);
  write_tensor(d / "y.npy", y);
  const std::string inputs = R"({"x": "x.npy", "gamma": "gamma.npy", "beta": "beta.npy"})";
  const std::string base = norm_manifest(ln, "float32", R"({"y": "y.npy"})", "", inputs);
  const auto declare = [&](const std::string& contract) {
    std::ofstream(d / "case.json")
        << (contract.empty() ? base
                             : with(base, R"("dtype": "float32")",
                                    R"("dtype": "float32", "contract": ")" + contract + "\""));
    return compare_dir(d);
  };
  const auto two = declare("two_pass");
  EXPECT_FALSE(two.verdict.pass());
  EXPECT_THAT(two.contract, HasSubstr("contract two_pass"));
  const auto one = declare("one_pass");
  EXPECT_TRUE(one.verdict.pass()) << one.verdict.explain();
  EXPECT_GT(one.verdict.tensors[0].max_ratio, 0.0);  // a finite bound, not an infinite one
  EXPECT_THAT(one.contract, HasSubstr("contract one_pass: layer_norm's xhat as (x − mean)·rstd or "
                                      "as fma(x, rstd, −rstd·mean) (PyTorch's CPU kernel); the "
                                      "variance in one pass (Σx²/n − mean², optionally clamped "
                                      "at 0): the larger bound"));
  const auto fallback = declare("");
  EXPECT_TRUE(fallback.verdict.pass()) << fallback.verdict.explain();
  EXPECT_THAT(fallback.contract, HasSubstr("the variance in two passes or in one"));
  std::cout << "one-pass y: " << two.verdict.tensors[0].summary() << " (two_pass); "
            << one.verdict.tensors[0].summary() << " (one_pass)\n";
}

// A LayerNorm forward whose mean and variance are PyTorch's CPU RowwiseMoments in float32: each
// element a Welford update (m += δ·fl(1/k), M2 += δ·(x − m)) in lanes of 4, strided, the lanes'
// states merged by AddMoments (m += δ·w_b, M2 += M2_b + δ·δ·w_b·n_a), xhat as fma(x, rstd,
// −rstd·mean), on the rows shifted to 200. Declared welford, it passes and the contract line
// names welford; on these rows (spread far below the mean) the welford bound is tighter than the
// default's, whose one-pass order grows as (mean/σ)², so the ratio is larger under welford.
TEST(CompareNorm, a_welford_variance_passes_declared_welford) {
  const NormKind ln = NormKind::layer_norm;
  auto data = norm_data<float>(ln);
  for (std::size_t i = 0; i < data.x.size(); ++i) data.x[i] = 200.0F + data.x[i];
  struct State {
    float n = 0, mean = 0, m2 = 0;
  };
  const auto merge = [](State a, const State& b) {
    if (b.n == 0) return a;
    const float n = a.n + b.n, w = b.n / n, delta = b.mean - a.mean;
    a.mean += w * delta;
    a.m2 += b.m2 + delta * delta * w * a.n;
    a.n = n;
    return a;
  };
  Tensor<float> y(Shape{tokens, hidden});
  const float eps = 1e-5F;
  for (std::size_t t = 0; t < tokens; ++t) {
    State lanes[4];
    for (std::size_t i = 0; i < hidden; ++i) {
      State& s = lanes[i % 4];
      const float v = data.x[t * hidden + i];
      s.n += 1;
      const float delta = v - s.mean;
      s.mean += delta * (1.0F / s.n);
      s.m2 += delta * (v - s.mean);
    }
    const State all = merge(merge(lanes[0], lanes[1]), merge(lanes[2], lanes[3]));
    const float rstd = 1.0F / std::sqrt(all.m2 / static_cast<float>(hidden) + eps);
    for (std::size_t i = 0; i < hidden; ++i) {
      const float xhat = std::fma(data.x[t * hidden + i], rstd, -(rstd * all.mean));
      y[t * hidden + i] = xhat * data.gamma[i] + data.beta[i];
    }
  }
  const fs::path d = fresh_norm_dir("welford");
  write_inputs(d, ln, data);
  write_tensor(d / "y.npy", y);
  const std::string inputs = R"({"x": "x.npy", "gamma": "gamma.npy", "beta": "beta.npy"})";
  const std::string base = norm_manifest(ln, "float32", R"({"y": "y.npy"})", "", inputs);
  std::ofstream(d / "case.json") << with(base, R"("dtype": "float32")",
                                         R"("dtype": "float32", "contract": "welford")");
  const auto welford = compare_dir(d);
  EXPECT_TRUE(welford.verdict.pass()) << welford.verdict.explain();
  EXPECT_GT(welford.verdict.tensors[0].max_ratio, 0.0);  // a finite bound
  EXPECT_THAT(welford.contract,
              HasSubstr("contract welford: the mean and M2 of Welford states merged in any tree "
                        "(var = M2/n); layer_norm's xhat as (x − mean)·rstd or as fma(x, rstd, "
                        "−rstd·mean), dx as ((g − c1) − xhat·c2)·rstd or as a·g + b·x + c: the "
                        "larger bound"));
  std::ofstream(d / "case.json") << base;
  const auto fallback = compare_dir(d);
  EXPECT_TRUE(fallback.verdict.pass()) << fallback.verdict.explain();
  EXPECT_GT(welford.verdict.tensors[0].max_ratio, fallback.verdict.tensors[0].max_ratio);
  std::cout << "Welford y at rows shifted to 200: " << welford.verdict.tensors[0].summary()
            << " (welford); " << fallback.verdict.tensors[0].summary() << " (default)\n";
}

TEST(CompareNormBadInput, every_error_names_the_file_and_the_field) {
  const NormKind ln = NormKind::layer_norm;
  const fs::path d = write_dense_case<float>("bad_input", ln, "float32");
  const std::string outs = R"({"y": "y.npy", "dgamma": "dgamma.npy"})";
  const std::vector<BadCase> cases = {
      {"config field misspelt",
       norm_manifest(ln, "float32", outs, R"({"kind": "layer_norm", "epsilon": 1e-5})"),
       {"config: unknown field epsilon", "eps, kind, reduce_algorithm, token_split, tokens"}},
      {"unknown kind",
       norm_manifest(ln, "float32", outs, R"({"kind": "rmsnorm"})"),
       {"config.kind", "rmsnorm", "layer_norm, layer_norm_no_bias, rms_norm"}},
      {"eps of the wrong type",
       norm_manifest(ln, "float32", outs, R"({"eps": "1e-5"})"),
       {"config.eps: is a string"}},
      {"eps not positive",
       norm_manifest(ln, "float32", outs, R"({"eps": 0})"),
       {"config.eps: is 0", "eps > 0"}},
      {"config tokens other than the sizes'",
       norm_manifest(ln, "float32", outs, R"({"tokens": 6})"),
       {"config.tokens: is 6 but sizes.tokens is 7"}},
      {"size missing",
       with(norm_manifest(ln, "float32", outs), ", \"hidden\": 5", ""),
       {"sizes.hidden: missing; sequence_parallel_norm needs it"}},
      {"beta missing for layer_norm",
       norm_manifest(ln, "float32", outs, "",
                     R"({"x": "x.npy", "gamma": "gamma.npy", "dy": "dy.npy"})"),
       {"inputs.beta: missing; sequence_parallel_norm needs it (shape [5])"}},
      {"beta given to rms_norm",
       norm_manifest(NormKind::rms_norm, "float32", R"({"y": "y.npy"})", "",
                     R"({"x": "x.npy", "gamma": "gamma.npy", "beta": "beta.npy"})"),
       {"sequence_parallel_norm has no tensor beta"}},
      {"input of the wrong shape",
       norm_manifest(ln, "float32", outs, "",
                     R"({"x": "x.npy", "gamma": "x.npy", "beta": "beta.npy", "dy": "dy.npy"})"),
       {"x.npy: shape: is [7, 5] but sequence_parallel_norm's gamma is [5]"}},
      {"gradient without dy",
       norm_manifest(ln, "float32", R"({"dgamma": "dgamma.npy"})", "",
                     R"({"x": "x.npy", "gamma": "gamma.npy", "beta": "beta.npy"})"),
       {"inputs.dy: missing; the case gives dgamma"}},
      {"an accumulator the norm's bounds do not take",
       with(norm_manifest(ln, "float32", outs), R"("dtype": "float32")",
            R"("dtype": "float32", "accumulate": "float64")"),
       {"accumulate: is float64 but the bounds of sequence_parallel_norm in float32 assume "
        "float32 accumulation",
        "only column_parallel_linear, row_parallel_linear, parallel_mlp, "
        "context_parallel_attention and attention_layer take another"}},
      {"unknown contract",
       with(norm_manifest(ln, "float32", outs), R"("dtype": "float32")",
            R"("dtype": "float32", "contract": "kahan")"),
       {"contract: is \"kahan\" but sequence_parallel_norm knows \"two_pass\" (var = Σ(x − "
        "mean)²/n, xhat = (x − mean)·rstd, as lib/ops/norm), \"fused_rstd_mean\" (the same "
        "variance, xhat = fma(x, rstd, −rstd·mean) and dx = a·g + b·x + c, PyTorch's CPU "
        "LayerNorm's orders), \"one_pass\" (var = Σx²/n − mean², optionally clamped at 0, xhat "
        "in either order) and \"welford\" (mean and M2 of Welford states merged in any tree, "
        "var = M2/n, xhat and dx in either order: PyTorch's CPU and CUDA kernels, Apex); omit the "
        "field for a bound that covers the first three"}},
      {"mesh of another name",
       with(norm_manifest(ln, "float32", outs), "\"tp\"", "\"sp\""),
       {"mesh: is {sp=3} but sequence_parallel_norm at this config runs on {tp=3}"}},
  };
  for (const auto& c : cases) {
    expect_case_error(d, c, "shardcheck_norm_compare_tests_bad_input/");
  }
}

}  // namespace
}  // namespace shardcheck::check::norm_compare_tests
