// shardcheck compare on megatron_sp_block cases written to disk here (Megatron-LM's
// sequence-parallel block: SP norm → all_gather → column-parallel linear → row-parallel linear →
// reduce_scatter, norm_compare.cpp): the library's own ranks pass (per-rank pieces, LayerNorm and
// RMSNorm, float32 and bfloat16, an uneven split with an empty rank), every norm mutant that
// breaks the block is diagnosed as itself, outputs no known bug makes get "no known signature",
// and the block's own bad inputs are CaseErrors whose messages are pinned.
#include "compare/compare.hpp"
#include "suites/norm/norm_case.hpp"
#include "suites/norm/norm_impl.hpp"
#include "suites/norm/norm_mutants.hpp"
#include "testing/compare_test_util.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shardcheck::check::sp_block_compare_tests {
namespace {

using namespace compare_test;  // case files written and compared (compare_test_util.hpp)

// P = 3, tokens 7 split [3, 0, 4], hidden 4, ffn 5 split [2, 2, 1].
constexpr int world = 3;
constexpr std::size_t tokens = 7, hidden = 4, ffn = 5;

const char* kind_name(NormKind k) { return k == NormKind::rms_norm ? "rms_norm" : "layer_norm"; }

NormCase block_case(NormKind kind) {
  BlockConfig b;
  b.norm.norm.kind = kind;
  b.norm.tokens = tokens;
  b.norm.token_split = SplitPolicy::explicit_sizes({3, 0, 4});
  b.ffn = ffn;
  b.ffn_split = SplitPolicy::explicit_sizes({2, 2, 1});
  NormCase c;
  c.op = NormOp::block;
  c.world = world;
  c.hidden = hidden;
  c.block = b;
  return c;
}

// Values k/8: exact in every element type, not all equal along a row.
template <class T>
NormData<T> block_data(NormKind kind) {
  const ExactGrid g{5, 11, 13, 8.0F};
  NormData<T> d;
  d.x = exact_values<T>({tokens, hidden}, 1, g);
  d.gamma = exact_values<T>({hidden}, 2, g);
  if (has_beta(kind)) d.beta = exact_values<T>({hidden}, 3, g);
  d.w1 = exact_values<T>({ffn, hidden}, 4, g);
  d.w2 = exact_values<T>({hidden, ffn}, 5, g);
  d.dy = exact_values<T>({tokens, hidden}, 6, g);
  return d;
}

// The block's config as sp_block_spec writes it, less the linear layers' (derived) configs.
std::string block_config_json(NormKind kind) {
  return std::string(R"({"norm": {"kind": ")") + kind_name(kind) +
         R"(", "token_split": {"kind": "explicit", "sizes": [3, 0, 4]}}, "ffn": 5, )"
         R"("ffn_split": {"kind": "explicit", "sizes": [2, 2, 1]}})";
}

std::string block_manifest(NormKind kind, const std::string& dtype, const std::string& config,
                           const std::string& outputs) {
  const std::string inputs =
      has_beta(kind)
          ? R"({"x": "x.npy", "gamma": "gamma.npy", "beta": "beta.npy", "w1": "w1.npy", "w2": "w2.npy", "dy": "dy.npy"})"
          : R"({"x": "x.npy", "gamma": "gamma.npy", "w1": "w1.npy", "w2": "w2.npy", "dy": "dy.npy"})";
  return R"({"shardcheck_case": 1, "op": "megatron_sp_block", "config": )" + config +
         R"(, "sizes": {"tokens": 7, "hidden": 4, "ffn": 5}, "mesh": {"tp": 3}, "dtype": ")" +
         dtype + R"(", "inputs": )" + inputs + R"(, "outputs": )" + outputs + "}";
}

// The norm suite's implementation `name` ("library" or a mutant's), made once.
const NormImplementation& implementation(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const NormImplementation>> made;
  if (!made.contains(name)) {
    if (name == "library") {
      made[name] = std::make_shared<NormAdapter<LibraryNorm>>();
    } else {
      for (const auto& m : norm_mutants()) {
        if (m.name == name) made[name] = m.make();
      }
    }
  }
  return *made.at(name);
}

// `impl` run on the block's ranks in T, every output written one file per rank.
template <class T>
fs::path write_block_case(const std::string& name, NormKind kind, const std::string& dtype,
                          const NormImplementation& impl) {
  const NormCase c = block_case(kind);
  const auto data = block_data<T>(kind);
  const auto run = run_ranks(impl, c, data);
  EXPECT_TRUE(run.error.empty()) << run.error;
  fs::path d = fresh_dir("shardcheck_sp_block_compare_tests_" + name);  // returned by move
  write_tensor(d / "x.npy", data.x);
  write_tensor(d / "gamma.npy", data.gamma);
  if (has_beta(kind)) write_tensor(d / "beta.npy", data.beta);
  write_tensor(d / "w1.npy", data.w1);
  write_tensor(d / "w2.npy", data.w2);
  write_tensor(d / "dy.npy", data.dy);
  std::string outputs = "{";
  for_each_output<T>(c, [&](const char* out, auto member, auto /*expected*/) {
    outputs += std::string(outputs.size() > 1 ? ", " : "") + "\"" + out + R"(": {"ranks": [)";
    for (int r = 0; r < world; ++r) {
      const std::string file = std::string(out) + "." + std::to_string(r) + ".npy";
      write_tensor(d / file, run.outputs.at(static_cast<std::size_t>(r)).*member);
      outputs += std::string(r ? ", " : "") + "\"" + file + "\"";
    }
    outputs += "]}";
  });
  write_text(d / "case.json", block_manifest(kind, dtype, block_config_json(kind), outputs + "}"));
  return d;
}

constexpr NormKind kinds[] = {NormKind::layer_norm, NormKind::rms_norm};

TEST(CompareSpBlock, the_library_ranks_pass_in_float32_and_bfloat16) {
  for (const NormKind kind : kinds) {
    SCOPED_TRACE(kind_name(kind));
    for (const auto& d :
         {write_block_case<float>("lib_f32", kind, "float32", implementation("library")),
          write_block_case<bfloat16>("lib_bf16", kind, "bfloat16", implementation("library"))}) {
      const auto r = compare_dir(d);
      EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
      // y, dx, dgamma, (dbeta), dw1, dw2
      EXPECT_EQ(r.verdict.tensors.size(), has_beta(kind) ? 6U : 5U);
      EXPECT_EQ(r.verdict.op, "megatron_sp_block");
    }
  }
}

// Every norm mutant whose block outputs fail is diagnosed as itself at residual 0 (the same code
// on the same inputs); a dgamma no bug makes (123 on every rank) gets "no known signature".
TEST(CompareSpBlock, a_failing_block_is_diagnosed_by_the_signature_it_carries) {
  std::size_t diagnosed = 0;
  for (const auto& m : norm_mutants()) {
    SCOPED_TRACE(m.name);
    const NormCase c = block_case(NormKind::layer_norm);
    if (!run_ranks(implementation(m.name), c, block_data<float>(NormKind::layer_norm))
             .error.empty()) {
      continue;  // a mutant that throws on this case leaves no outputs to compare
    }
    const auto r = compare_dir(write_block_case<float>(
        std::string("diag_") + m.name, NormKind::layer_norm, "float32", implementation(m.name)));
    if (r.verdict.pass()) continue;  // the mutant's bug is not in the block or this case
    bool layout = false;
    for (const auto& t : r.verdict.tensors) layout = layout || !t.problem.empty();
    if (layout) continue;  // a mutant that refuses this split leaves nothing to compare
    ++diagnosed;
    expect_diagnosed_as(r, m.name, norm_mutants().size());
  }
  // Measured: 7 of the 8 (gather-sized-by-local-count throws on this uneven split).
  EXPECT_GE(diagnosed, 7U);

  const fs::path d = write_block_case<float>("diag_unknown", NormKind::layer_norm, "float32",
                                             implementation("library"));
  for (int r = 0; r < world; ++r) {
    write_tensor(d / ("dgamma." + std::to_string(r) + ".npy"),
                 Tensor<float>(Shape{hidden}, std::vector<float>(hidden, 123.0F)));
  }
  const auto unknown = compare_dir(d);
  ASSERT_FALSE(unknown.verdict.pass());
  EXPECT_EQ(diagnosis_lines(unknown),
            std::vector<std::string>{"no known signature (of " +
                                     std::to_string(norm_mutants().size()) + ")"});
}

// The block's config errors (the norm's own are norm_compare_tests.cpp's).
TEST(CompareSpBlock, bad_block_configs_are_case_errors_naming_the_field) {
  const fs::path d =
      write_block_case<float>("bad", NormKind::rms_norm, "float32", implementation("library"));
  const std::string good =
      block_manifest(NormKind::rms_norm, "float32", block_config_json(NormKind::rms_norm),
                     R"({"y": {"ranks": ["y.0.npy", "y.1.npy", "y.2.npy"]}})");
  const std::vector<BadCase> bad = {
      {"an ffn other than the size",
       with(good, R"("ffn": 5,)", R"("ffn": 6,)"),
       {"config.ffn: is 6 but sizes.ffn is 5"}},
      {"a column layer that is not the derived one",
       with(good, R"("ffn": 5,)", R"("ffn": 5, "column": {"gather_output": true},)"),
       {"config.column.gather_output: is true but the block derives false",
        "give the same or leave column out"}},
      {"a row layer with another split",
       with(good, R"("ffn": 5,)",
            R"("ffn": 5, "row": {"in_split": {"kind": "chunk"}, "kernel": "deterministic"},)"),
       {R"(config.row.in_split: is {"kind":"chunk"} but the block derives)"}},
      {"two kernels",
       with(good, R"("ffn": 5,)",
            R"("ffn": 5, "column": {"kernel": "fast"}, "row": {"kernel": "deterministic"},)"),
       {"config.row: has kernel deterministic but column has fast",
        "the block runs both linear layers with one kernel"}},
      {"an unknown field of a linear layer",
       with(good, R"("ffn": 5,)", R"("ffn": 5, "column": {"gather_outputs": false},)"),
       {"config.column: unknown field gather_outputs", "the fields known here are", "out_split"}},
      {"w1 missing",
       with(good, R"("w1": "w1.npy", )", ""),
       {"inputs.w1: missing; megatron_sp_block needs it"}},
  };
  for (const auto& c : bad) expect_case_error(d, c, "shardcheck_sp_block_compare_tests_bad");
}

}  // namespace
}  // namespace shardcheck::check::sp_block_compare_tests
