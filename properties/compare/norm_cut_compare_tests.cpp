// sequence_parallel_norm's diagnosis on a cut-down case (norm_compare.cpp's diagnosis_cut;
// docs/compare.md, "Diagnosis at real sizes"), forced by a threshold of 0 on uneven splits: a
// case that gives y and dx (or y alone) is cut to some token rows of each rank, every norm
// signature that fails in it is diagnosed as itself with the same matches, ranks and tensors as on
// the full case (normalized-over-token-axis, whose statistics run over each rank's every token, on
// the full case); a case that gives dgamma or dbeta, and megatron_sp_block, keep the full run; the
// library's outputs get no diagnosis and a bug no signature has gets none either way.
#include "compare/compare.hpp"
#include "ops/op_spec.hpp"
#include "suites/norm/norm_case.hpp"
#include "suites/norm/norm_impl.hpp"
#include "suites/norm/norm_mutants.hpp"
#include "testing/compare_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace shardcheck::check::norm_cut_compare_tests {
namespace {

using namespace compare_test;  // case files written and compared (compare_test_util.hpp)

// 8 token rows kept: at P = 4 two at each end of every shard, at P = 3 with an empty shard 4 in
// each of the two others (and a fifth for a worst element inside a shard).
const CompareOptions forced{{.above = 0, .rows = 8, .columns = 16}};

constexpr std::size_t kTokens = 50, kHidden = 5, kFfn = 8;

// P = 4, 50 tokens balanced (13, 13, 12, 12), or P = 3 split [20, 0, 30]; hidden 5; eps 1/16, so
// eps-outside-sqrt is far over the bound; megatron_sp_block with ffn 8 (2 a rank).
NormCase norm_case(NormOp op, NormKind kind, bool empty_shard) {
  NormCase c;
  c.op = op;
  c.world = empty_shard ? 3 : 4;
  c.hidden = kHidden;
  c.block.norm.norm.kind = kind;
  c.block.norm.norm.eps = 0.0625;
  c.block.norm.tokens = kTokens;
  c.block.norm.token_split =
      empty_shard ? SplitPolicy::explicit_sizes({20, 0, 30}) : SplitPolicy::balanced();
  c.block.ffn = kFfn;
  return c;
}

// A case the diagnosis runs on: the op and its config, the outputs it gives, and whether the
// diagnosis cuts it.
struct Setting {
  std::string name;
  NormCase c;
  std::vector<std::string> outputs;
  bool cuts = true;
};

std::vector<Setting> settings() {
  const NormCase layer = norm_case(NormOp::norm, NormKind::layer_norm, false);
  const NormCase rms = norm_case(NormOp::norm, NormKind::rms_norm, true);
  return {
      {"layer_y_dx", layer, {"y", "dx"}, true},
      {"rms_empty_shard_y", rms, {"y"}, true},
      {"layer_y_dx_dgamma", layer, {"y", "dx", "dgamma"}, false},
      {"layer_y_dbeta", layer, {"y", "dbeta"}, false},
      {"rms_empty_shard_dgamma", rms, {"dgamma"}, false},
      {"block_y_dx", norm_case(NormOp::block, NormKind::layer_norm, false), {"y", "dx"}, false}};
}

// x, gamma, beta (layer_norm), dy, w1, w2 (the block): eighths, exact in float32.
NormData<float> norm_data(const NormCase& c) {
  const ExactGrid g{5, 11, 13, 8.0F};
  return {exact_values<float>({kTokens, kHidden}, 1, g),
          exact_values<float>({kHidden}, 2, g),
          has_beta(c.kind()) ? exact_values<float>({kHidden}, 3, g) : Tensor<float>(),
          exact_values<float>({kTokens, kHidden}, 4, g),
          c.op == NormOp::block ? exact_values<float>({kFfn, kHidden}, 5, g) : Tensor<float>(),
          c.op == NormOp::block ? exact_values<float>({kHidden, kFfn}, 6, g) : Tensor<float>()};
}

// Writes the inputs and `impl`'s per-rank outputs named in s.outputs as the case in a fresh
// folder; empty when impl cannot run the case.
fs::path write_run(const std::string& name, const Setting& s, const NormImplementation& impl) {
  const NormCase& c = s.c;
  const bool block = c.op == NormOp::block, beta = has_beta(c.kind());
  const auto data = norm_data(c);
  const auto run = run_ranks(impl, c, data);
  if (!run.error.empty()) return {};
  fs::path d = fresh_dir("shardcheck_norm_cut_compare_tests_" + name);  // returned by move
  std::string inputs = R"("x": "x.npy", "gamma": "gamma.npy", "dy": "dy.npy")";
  write_tensor(d / "x.npy", data.x);
  write_tensor(d / "gamma.npy", data.gamma);
  write_tensor(d / "dy.npy", data.dy);
  if (beta) {
    write_tensor(d / "beta.npy", data.beta);
    inputs += R"(, "beta": "beta.npy")";
  }
  if (block) {
    write_tensor(d / "w1.npy", data.w1);
    write_tensor(d / "w2.npy", data.w2);
    inputs += R"(, "w1": "w1.npy", "w2": "w2.npy")";
  }
  const std::string outputs = write_rank_outputs<float>(d, c, run, s.outputs);
  const auto spec = op_spec(c);
  write_text(d / "case.json", R"({"shardcheck_case": 1, "op": ")" + spec.op + R"(", "config": )" +
                                  spec.config_json + R"(, "sizes": {"tokens": 50, "hidden": 5)" +
                                  (block ? R"(, "ffn": 8)" : "") + R"(}, "mesh": {"tp": )" +
                                  std::to_string(c.world) +
                                  R"(}, "dtype": "float32", "inputs": {)" + inputs +
                                  R"(}, "outputs": {)" + outputs + "}}");
  return d;
}

// Every signature planted in a setting where it fails is diagnosed as itself at residual 0; a
// setting that gives y and dx or y alone is cut (to 16 of the 50 tokens at P = 4, or 8 at P = 3
// with its empty shard, or a few more for a worst element inside a shard) and names what it kept;
// the full case gives the same matches (names, ranks, explained and unexplained tensors) at
// residuals no smaller.
TEST(NormCutCompare, every_planted_signature_is_diagnosed_as_on_the_full_case) {
  std::vector<std::string> refused;
  const auto found = diagnose_planted(
      settings(), norm_mutants(), forced,
      [&](const Setting& s, const Mutant<NormImplementation>& m) {
        fs::path d = write_run(s.name + "_" + m.name, s, *m.make());  // returned by move
        if (d.empty()) refused.push_back(s.name + " " + m.name);
        return d;
      },
      [](const Setting& s, const Mutant<NormImplementation>& m, const CompareResult& cut,
         const CompareResult& full) {
        expect_diagnosed_as(cut, m.name, norm_mutants().size());
        if (s.cuts) {
          EXPECT_LT(std::stoul(cut.diagnosis_cut), 50U) << cut.diagnosis_cut;
          expect_parts(cut.diagnosis_cut,
                       {" of 50 tokens, every shard boundary and the worst elements kept; "
                        "normalized-over-token-axis on all 50"});
        }
        for (std::size_t k = 0; k < std::min(cut.diagnosis.size(), full.diagnosis.size()); ++k) {
          EXPECT_LE(cut.diagnosis[k].residual, full.diagnosis[k].residual);
        }
      });
  const auto& [diagnosed, diagnosed_cut] = found;
  // The sequence-parallel norm's bugs all fail somewhere, the forward's and variance-n-minus-1's
  // in a cut setting; the block's in the block, which keeps the full run, but
  // gather-sized-by-local-count, whose all_gather cannot run an uneven token split (the ranks'
  // counts disagree).
  EXPECT_EQ(refused, std::vector<std::string>{"block_y_dx gather-sized-by-local-count"});
  const auto in = [](const std::vector<std::string>& v, const std::string& name) {
    return std::find(v.begin(), v.end(), name) != v.end();
  };
  for (const auto& m : norm_mutants()) {
    const std::string name = m.name;
    EXPECT_EQ(in(diagnosed, name), name != "gather-sized-by-local-count") << name;
    EXPECT_EQ(in(diagnosed_cut, name), name == "normalized-over-token-axis" ||
                                           name == "eps-outside-sqrt" ||
                                           name == "variance-n-minus-1")
        << name;
  }
}

// The library's own outputs pass with no diagnosis; rank 3's y and dx replaced by rank 2's (a
// rank that wrote its neighbour's rows, a bug no signature has; both hold 12 rows) get "no
// known signature" on the cut-down case, as on the full one, and the line names the cut.
TEST(NormCutCompare, a_correct_case_and_an_unknown_bug_get_no_diagnosis) {
  const Setting s = settings().front();
  const fs::path d = write_run("library", s, NormAdapter<LibraryNorm>{});
  expect_no_diagnosis(compare_dir(d, forced));

  for (const char* out : {"y", "dx"}) {
    fs::copy_file(d / (std::string(out) + ".rank2.npy"), d / (std::string(out) + ".rank3.npy"),
                  fs::copy_options::overwrite_existing);
  }
  expect_unknown_bug(d, forced, 0, 3, 8,
                     {"no known signature (of 8; diagnosed on ",
                      " of 50 tokens, every shard boundary and the worst elements kept; "
                      "normalized-over-token-axis on all 50)"});
}

}  // namespace
}  // namespace shardcheck::check::norm_cut_compare_tests
