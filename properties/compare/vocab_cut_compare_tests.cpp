// vocab_parallel_embedding's and vocab_parallel_cross_entropy's diagnosis on a cut-down case
// (vocab_compare.cpp's diagnosis_cut; docs/compare.md, "Diagnosis at real sizes"), forced by a
// threshold of 0 on an uneven, padded vocabulary split: an embedding case that gives y (token
// rows replicated or split) and a cross-entropy case under reduction none, or one under sum that
// gives dlogits alone, are cut to some token rows, and every vocab signature that fails in them is
// diagnosed as itself with the same matches, ranks and tensors as on the full case; an embedding
// case that gives dw, a cross-entropy case under mean, and one under sum that gives the loss keep
// the full run; the library's outputs get no diagnosis and a bug no signature has gets none
// either way.
#include "compare/compare.hpp"
#include "ops/op_spec.hpp"
#include "suites/vocab/vocab_case.hpp"
#include "suites/vocab/vocab_impl.hpp"
#include "suites/vocab/vocab_mutants.hpp"
#include "testing/compare_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace shardcheck::check::vocab_cut_compare_tests {
namespace {

using namespace compare_test;  // case files written and compared (compare_test_util.hpp)

// 8 token rows kept when the tokens are not split, 4 or 5 a rank when they are.
const CompareOptions forced{{.above = 0, .rows = 8, .columns = 16}};

// P = 4, 42 tokens (balanced under sequence_parallel_output: 11, 11, 10, 10), V_pad 23 balanced
// (6, 6, 6, 5) over a real vocabulary of 20 (the last shard holds 2 real rows and 3 of padding),
// hidden 3.
constexpr std::size_t kTokens = 42, kVocab = 23, kRealVocab = 20, kHidden = 3;

// Ids and targets: every real shard's first and last, interleaved with a stride over the rest;
// one target PyTorch's ignore_index.
std::vector<std::int64_t> ids(bool targets) {
  const std::int64_t ends[] = {0, 5, 6, 11, 12, 17, 18, 19};
  std::vector<std::int64_t> v(kTokens);
  for (std::size_t t = 0; t < kTokens; ++t) {
    v[t] = t % 2 == 0 ? ends[(t / 2) % 8] : static_cast<std::int64_t>((t * 7) % kRealVocab);
  }
  if (targets) v[9] = -100;
  return v;
}

// Either op's config at the sizes above, over the padded vocabulary split balanced.
template <class Config>
VocabCase vocab_case(VocabOp op, Config VocabCase::*config) {
  VocabCase c;
  c.op = op;
  c.world = 4;
  c.tokens = kTokens;
  c.vocab = kVocab;
  c.hidden = kHidden;
  c.ids = ids(op == VocabOp::cross_entropy);
  (c.*config).vocab = kVocab;
  (c.*config).real_vocab = kRealVocab;
  (c.*config).vocab_split = SplitPolicy::balanced();
  return c;
}

VocabCase embedding_case(bool sequence_parallel) {
  VocabCase c = vocab_case(VocabOp::embedding, &VocabCase::embedding);
  c.embedding.padding_idx = 7;
  c.embedding.sequence_parallel_output = sequence_parallel;
  c.embedding.token_split = SplitPolicy::balanced();
  return c;
}

// Label smoothing 1/4; with `weighted` a class weight per real class and a token weight per token
// (some 0).
VocabCase cross_entropy_case(LossReduction reduction, bool weighted) {
  VocabCase c = vocab_case(VocabOp::cross_entropy, &VocabCase::ce);
  c.ce.label_smoothing = 0.25;
  c.ce.reduction = reduction;
  if (weighted) {
    for (std::size_t v = 0; v < kRealVocab; ++v) c.ce.class_weight.push_back(0.5 + 0.25 * (v % 4));
    for (std::size_t t = 0; t < kTokens; ++t) c.ce.token_weight.push_back(0.5 * (t % 3));
  }
  return c;
}

// A case the diagnosis runs on: the op and its config, the outputs it gives, whether the
// diagnosis cuts it, and its logits' scale (2^12: |z| up to 2^13, exp overflows).
struct Setting {
  std::string name;
  VocabCase c;
  std::vector<std::string> outputs;
  bool cuts = true;
  float logit_scale = 1;
};

std::vector<Setting> settings() {
  using R = LossReduction;
  return {
      {"embedding_y", embedding_case(false), {"y"}},
      {"embedding_sp_y", embedding_case(true), {"y"}},
      {"embedding_y_dw", embedding_case(false), {"y", "dw"}, false},
      {"ce_none", cross_entropy_case(R::none, true), {"loss", "dlogits"}},
      {"ce_none_extreme", cross_entropy_case(R::none, false), {"loss", "dlogits"}, true, 4096},
      {"ce_sum_dlogits", cross_entropy_case(R::sum, false), {"dlogits"}},
      {"ce_sum_loss", cross_entropy_case(R::sum, false), {"loss", "dlogits"}, false},
      {"ce_mean", cross_entropy_case(R::mean, true), {"loss", "dlogits"}, false},
      {"ce_mean_dlogits", cross_entropy_case(R::mean, true), {"dlogits"}, false},
  };
}

// w, dy, logits, dloss: quarters, exact in float32 (the logits scaled by a power of 2).
VocabData<float> vocab_data(const Setting& s) {
  const ExactGrid g{7, 13, 17, 4.0F};
  VocabData<float> d;
  if (s.c.op == VocabOp::embedding) {
    d.w = exact_values<float>({kVocab, kHidden}, 1, g);
    d.dy = exact_values<float>({kTokens, kHidden}, 2, g);
  } else {
    d.logits = exact_values<float>({kTokens, kVocab}, 3, g);
    for (std::size_t i = 0; i < d.logits.size(); ++i) d.logits[i] *= s.logit_scale;
    d.dloss = exact_values<float>({s.c.ce.reduction == LossReduction::none ? kTokens : 1}, 4, g);
  }
  return d;
}

// Writes the inputs and `impl`'s per-rank outputs named in s.outputs as the case in a fresh
// folder; empty when impl cannot run the case.
fs::path write_run(const std::string& name, const Setting& s, const VocabImplementation& impl) {
  const VocabCase& c = s.c;
  const bool embedding = c.op == VocabOp::embedding;
  const auto data = vocab_data(s);
  const auto run = run_ranks(impl, c, data);
  if (!run.error.empty()) return {};
  fs::path d = fresh_dir("shardcheck_vocab_cut_compare_tests_" + name);  // returned by move
  const Tensor<std::int64_t> index(Shape{kTokens}, c.ids);
  std::string inputs;
  if (embedding) {
    write_tensor(d / "ids.npy", index);
    write_tensor(d / "w.npy", data.w);
    write_tensor(d / "dy.npy", data.dy);
    inputs = R"("ids": "ids.npy", "w": "w.npy", "dy": "dy.npy")";
  } else {
    write_tensor(d / "targets.npy", index);
    write_tensor(d / "logits.npy", data.logits);
    write_tensor(d / "dloss.npy", data.dloss);
    inputs = R"("targets": "targets.npy", "logits": "logits.npy", "dloss": "dloss.npy")";
  }
  const std::string outputs = write_rank_outputs<float>(d, c, run, s.outputs);
  const auto spec = op_spec(c);
  write_text(d / "case.json", R"({"shardcheck_case": 1, "op": ")" + spec.op + R"(", "config": )" +
                                  spec.config_json + R"(, "sizes": {"tokens": 42, "vocab": 23)" +
                                  (embedding ? R"(, "hidden": 3)" : "") +
                                  R"(}, "mesh": {"tp": 4}, "dtype": "float32", "inputs": {)" +
                                  inputs + R"(}, "outputs": {)" + outputs + "}}");
  return d;
}

// Every signature planted in a setting where it fails is diagnosed as itself, at residual 0 on
// the full case; a cut setting names what it kept and gives the same matches (names, ranks,
// explained and unexplained tensors) as the full case.
TEST(VocabCutCompare, every_planted_signature_is_diagnosed_as_on_the_full_case) {
  const auto found = diagnose_planted(
      settings(), vocab_mutants(), forced,
      [](const Setting& s, const Mutant<VocabImplementation>& m) {
        return write_run(s.name + "_" + m.name, s, *m.make());
      },
      [](const Setting& s, const Mutant<VocabImplementation>& m, const CompareResult& cut,
         const CompareResult& full) {
        expect_diagnosed_as(full, m.name, vocab_mutants().size());
        // On the cut itself too, first, at a rounding from 0: the cross-entropy's all_reduce of its
        // per-token sums (in float) cuts its buffer into chunks that follow the buffer's length, so
        // the cut case may add the ranks' sums in another order (0.09 and 0.14 bounds measured for
        // two signatures here).
        EXPECT_EQ(cut.signatures_tried, vocab_mutants().size());
        const auto self = std::find_if(cut.diagnosis.begin(), cut.diagnosis.end(),
                                       [&](const Diagnosis& x) { return x.signature == m.name; });
        ASSERT_NE(self, cut.diagnosis.end()) << testing::PrintToString(diagnosis_lines(cut));
        EXPECT_LE(self->residual, 1.0);
        EXPECT_TRUE(self->unexplained.empty());
        EXPECT_EQ(diagnosis_lines(cut).front().rfind("matches ", 0), 0U);
        if (s.cuts) {
          EXPECT_LT(std::stoul(cut.diagnosis_cut), 42U) << cut.diagnosis_cut;
          expect_parts(
              cut.diagnosis_cut,
              {" of 42 tokens, every shard boundary and the worst elements kept; ", " on all 42"});
        }
      });
  const auto& [diagnosed, diagnosed_cut] = found;
  // Every signature fails somewhere, and all but the three that live in a sum over tokens (the
  // embedding's dw, the mean's divisor) in a cut setting.
  const auto in = [](const std::vector<std::string>& v, const std::string& name) {
    return std::find(v.begin(), v.end(), name) != v.end();
  };
  for (const auto& m : vocab_mutants()) {
    const std::string name = m.name;
    EXPECT_TRUE(in(diagnosed, name)) << name;
    EXPECT_EQ(in(diagnosed_cut, name), name != "global-padding-idx-on-every-shard" &&
                                           name != "mean-by-local-count" &&
                                           name != "weighted-mean-by-count")
        << name;
  }
}

// The library's own outputs pass with no diagnosis in every setting; rank 2's dlogits replaced by
// rank 1's (a rank that wrote its neighbour's columns, a bug no signature has; both hold 6) get
// "no known signature" on the cut-down case, as on the full one, and the line names the cut.
TEST(VocabCutCompare, a_correct_case_and_an_unknown_bug_get_no_diagnosis) {
  const VocabAdapter<LibraryVocab> library;
  for (const auto& s : settings()) {
    SCOPED_TRACE(s.name);
    expect_no_diagnosis(compare_dir(write_run("library_" + s.name, s, library), forced));
  }
  const Setting s{"ce_none", cross_entropy_case(LossReduction::none, true), {"loss", "dlogits"}};
  const fs::path d = write_run("library", s, library);
  fs::copy_file(d / "dlogits.rank1.npy", d / "dlogits.rank2.npy",
                fs::copy_options::overwrite_existing);
  expect_unknown_bug(d, forced, 1, 2, 20,
                     {"no known signature (of 20; diagnosed on ",
                      " of 42 tokens, every shard boundary and the worst elements kept; "
                      "padding-logits-in-softmax and padding-grad-not-zeroed on all 42)"});
}

}  // namespace
}  // namespace shardcheck::check::vocab_cut_compare_tests
