// shardcheck compare on vocab cases written to disk here: the library's own
// vocab_parallel_embedding and vocab_parallel_cross_entropy (P = 3, an uneven vocabulary split
// with an empty shard) pass in float32 and bfloat16, per-rank and global outputs; the suite's
// mutants (a realistic sharding bug each) fail on the tensor they break; a piece of the wrong
// local shape is a layout failure naming the rank; each bad input of the family is a CaseError
// whose message names the file and the field.
#include "cases/case_manifest.hpp"
#include "cases/npy.hpp"
#include "compare/compare.hpp"
#include "suites/vocab/vocab_case.hpp"
#include "suites/vocab/vocab_impl.hpp"
#include "suites/vocab/vocab_mutants.hpp"
#include "testing/compare_test_util.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

namespace shardcheck::check::vocab_compare_tests {
namespace {

using namespace compare_test;  // case files written and compared (compare_test_util.hpp)

fs::path case_dir(const std::string& name) {
  return fresh_dir("shardcheck_vocab_compare_tests_" + name);
}

// Quarters in [-2, 2]: exact in every element type, so the case's inputs are the values written.
template <class T>
Tensor<T> quarters(Shape s, int seed) {
  return exact_values<T>(std::move(s), seed, {7, 13, 17, 4.0F});
}

// P = 3, tokens 6, V = 7 split [4, 0, 3] (rank 1 holds nothing), hidden 3. The ids and targets
// sit on the shard boundaries (0, 3 | 4, 6); one target is PyTorch's ignore_index -100.
constexpr int world = 3;
constexpr std::size_t tokens = 6, vocab = 7, hidden = 3;
const char* const split_json = R"({"kind": "explicit", "sizes": [4, 0, 3]})";
const char* const embedding_config =
    R"({"vocab": 7, "vocab_split": {"kind": "explicit", "sizes": [4, 0, 3]}, "padding_idx": 5})";
const char* const ce_config =
    R"({"vocab": 7, "vocab_split": {"kind": "explicit", "sizes": [4, 0, 3]}, "ignore_index": -100, "label_smoothing": 0.25, "reduction": "mean", "class_weight": [1, 0.5, 2, 1, 1.5, 1, 0.25], "token_weight": [1, 2, 0.5, 1, 1, 0]})";

VocabCase vocab_case(VocabOp op, DType dtype) {
  VocabCase c;
  c.op = op;
  c.dtype = dtype;
  c.world = world;
  c.tokens = tokens;
  c.vocab = vocab;
  c.hidden = hidden;
  const SplitPolicy split = SplitPolicy::explicit_sizes({4, 0, 3});
  if (op == VocabOp::embedding) {
    c.ids = {0, 3, 4, 6, 3, 5};
    c.embedding.vocab = vocab;
    c.embedding.vocab_split = split;
    c.embedding.padding_idx = 5;
  } else {
    c.ids = {0, 3, 4, 6, -100, 2};
    c.ce.vocab = vocab;
    c.ce.vocab_split = split;
    c.ce.label_smoothing = 0.25;
    c.ce.class_weight = {1, 0.5, 2, 1, 1.5, 1, 0.25};
    c.ce.token_weight = {1, 2, 0.5, 1, 1, 0};
  }
  return c;
}

template <class T>
VocabData<T> vocab_data(const VocabCase& c) {
  VocabData<T> d;
  if (c.op == VocabOp::embedding) {
    d.w = quarters<T>({vocab, hidden}, 1);
    d.dy = quarters<T>({tokens, hidden}, 2);
  } else {
    d.logits = quarters<T>({tokens, vocab}, 3);
    d.dloss = Tensor<T>(Shape{1}, std::vector<T>{T(1.5F)});
  }
  return d;
}

std::string manifest(VocabOp op, const std::string& dtype, const std::string& outputs,
                     const std::string& config = "", const std::string& inputs = "",
                     const std::string& sizes = "") {
  const bool emb = op == VocabOp::embedding;
  return std::string(R"({"shardcheck_case": 1, "op": ")") +
         (emb ? "vocab_parallel_embedding" : "vocab_parallel_cross_entropy") + R"(", "config": )" +
         (config.empty() ? (emb ? embedding_config : ce_config) : config) + R"(, "sizes": )" +
         (!sizes.empty() ? sizes
          : emb          ? R"({"tokens": 6, "vocab": 7, "hidden": 3})"
                         : R"({"tokens": 6, "vocab": 7})") +
         R"(, "mesh": {"tp": 3}, "dtype": ")" + dtype + R"(", "inputs": )" +
         (!inputs.empty() ? inputs
          : emb           ? R"({"ids": "ids.npy", "w": "w.npy", "dy": "dy.npy"})"
                : R"({"logits": "logits.npy", "targets": "targets.npy", "dloss": "dloss.npy"})") +
         R"(, "outputs": )" + outputs + "}";
}

// The run's outputs as "name": {"ranks": [...]} entries, one file per rank.
template <class T>
std::string write_pieces(
    const fs::path& d, const VocabRun<T>& run,
    const std::vector<std::pair<const char*, Tensor<T> VocabRankOutputs<T>::*>>& outputs) {
  std::string json = "{";
  for (const auto& [name, member] : outputs) {
    json += std::string(json.size() > 1 ? ", " : "") + "\"" + name + R"(": {"ranks": [)";
    for (int r = 0; r < world; ++r) {
      const std::string file = std::string(name) + "." + std::to_string(r) + ".npy";
      write_tensor(d / file, run.outputs[static_cast<std::size_t>(r)].*member);
      json += std::string(r ? ", " : "") + "\"" + file + "\"";
    }
    json += "]}";
  }
  return json + "}";
}

// A case of `op` run by `impl` on the ranks, written to `name`: the global inputs and every
// output as per-rank pieces (or, `global`, the outputs of the same implementation on one rank).
template <class T>
fs::path write_run(const std::string& name, VocabOp op, const std::string& dtype,
                   const VocabImplementation& impl, bool global = false) {
  fs::path d = case_dir(name);  // not const: returned by move
  VocabCase c = vocab_case(op, dtype_of<T>);
  const auto data = vocab_data<T>(c);
  Tensor<std::int64_t> ids(Shape{tokens}, c.ids);
  using O = VocabRankOutputs<T>;
  std::vector<std::pair<const char*, Tensor<T> O::*>> outs;
  if (op == VocabOp::embedding) {
    write_tensor(d / "ids.npy", ids);
    write_tensor(d / "w.npy", data.w);
    write_tensor(d / "dy.npy", data.dy);
    outs = {{"y", &O::y}, {"dw", &O::dw}};
  } else {
    write_tensor(d / "targets.npy", ids);
    write_tensor(d / "logits.npy", data.logits);
    write_tensor(d / "dloss.npy", data.dloss);
    outs = {{"loss", &O::loss}, {"dlogits", &O::dlogits}};
  }
  std::string outputs;
  if (global) {
    c.world = 1;
    c.embedding.vocab_split = c.ce.vocab_split = SplitPolicy::chunk();
    const auto run = run_ranks(impl, c, data);
    EXPECT_TRUE(run.error.empty()) << run.error;
    outputs = "{";
    for (const auto& [n, member] : outs) {
      write_tensor(d / (std::string(n) + ".npy"), run.outputs[0].*member);
      outputs += std::string(outputs.size() > 1 ? ", " : "") + "\"" + n + "\": \"" + n + ".npy\"";
    }
    outputs += "}";
  } else {
    const auto run = run_ranks(impl, c, data);
    EXPECT_TRUE(run.error.empty()) << run.error;
    outputs = write_pieces(d, run, outs);
  }
  write_text(d / "case.json", manifest(op, dtype, outputs));
  return d;
}

const VocabAdapter<LibraryVocab> library{};

const VocabImplementation& mutant(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const VocabImplementation>> made;
  for (const auto& m : vocab_mutants()) {
    if (m.name == name && !made.contains(name)) made[name] = m.make();
  }
  return *made.at(name);
}

TEST(VocabCompare, the_library_passes_per_rank_and_global_in_float32_and_bfloat16) {
  for (VocabOp op : {VocabOp::embedding, VocabOp::cross_entropy}) {
    for (bool global : {false, true}) {
      SCOPED_TRACE(to_string(op) + (global ? " global" : " per rank"));
      for (const auto& r :
           {compare_dir(write_run<float>("lib_f32", op, "float32", library, global)),
            compare_dir(write_run<bfloat16>("lib_bf16", op, "bfloat16", library, global)),
            compare_dir(write_run<double>("lib_f64", op, "float64", library, global))}) {
        EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
        EXPECT_EQ(r.verdict.tensors.size(), 2U);
        EXPECT_EQ(r.verdict.world, 3);
      }
    }
  }
}

TEST(VocabCompare, only_the_outputs_given_are_judged) {
  const fs::path d = write_run<float>("forward_only", VocabOp::cross_entropy, "float32", library);
  // The forward alone, without the upstream gradient.
  write_text(d / "case.json",
             manifest(VocabOp::cross_entropy, "float32",
                      R"({"loss": {"ranks": ["loss.0.npy", "loss.1.npy", "loss.2.npy"]}})", "",
                      R"({"logits": "logits.npy", "targets": "targets.npy"})"));
  const auto r = compare_dir(d);
  EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
  ASSERT_EQ(r.verdict.tensors.size(), 1U);
  EXPECT_EQ(r.verdict.tensors[0].name, "loss");
}

// Megatron-LM's smoothing with the local vocabulary size: the loss and its gradient both fail.
TEST(VocabCompare, smoothing_with_the_local_vocabulary_size_fails) {
  const auto r = compare_dir(write_run<float>("local_v", VocabOp::cross_entropy, "float32",
                                              mutant("smoothing-local-vocab-size")));
  ASSERT_FALSE(r.verdict.pass());
  for (const auto& t : r.verdict.tensors) EXPECT_FALSE(t.pass()) << t.summary();
  expect_parts(r.verdict.explain(), {"loss: worst element", "of the bound"});
}

// The backward's one-hot forgotten: dlogits fails, the loss passes.
TEST(VocabCompare, a_backward_bug_fails_on_dlogits_only) {
  const auto r = compare_dir(write_run<float>("onehot", VocabOp::cross_entropy, "float32",
                                              mutant("owner-grad-missing-onehot")));
  ASSERT_FALSE(r.verdict.pass());
  for (const auto& t : r.verdict.tensors) EXPECT_EQ(t.pass(), t.name != "dlogits") << t.summary();
  expect_parts(r.verdict.explain(), {"dlogits: worst element"});
}

// The ownership mask off by one at the shard's last row: y loses the rows of ids 3 and 6.
TEST(VocabCompare, an_embedding_mask_off_by_one_fails_on_y_and_dw) {
  const auto r = compare_dir(write_run<float>("mask", VocabOp::embedding, "float32",
                                              mutant("mask-off-by-one-at-shard-end")));
  ASSERT_FALSE(r.verdict.pass());
  for (const auto& t : r.verdict.tensors) EXPECT_FALSE(t.pass()) << t.summary();
  expect_parts(r.verdict.explain(), {"y: worst element"});
}

// The diagnosis (compare.hpp): every mutant whose outputs fail is named as a signature they
// match, at residual 0 (the same code on the same inputs); the library's passing outputs get
// none; outputs no known bug makes (a loss of 123 on every rank) get "no known signature".
TEST(VocabCompare, a_failing_case_is_diagnosed_by_the_signature_it_carries) {
  std::size_t diagnosed = 0;
  for (VocabOp op : {VocabOp::embedding, VocabOp::cross_entropy}) {
    for (const auto& m : vocab_mutants()) {
      SCOPED_TRACE(to_string(op) + " " + m.name);
      const auto r = compare_dir(
          write_run<float>(std::string("diag_") + m.name, op, "float32", mutant(m.name)));
      if (r.verdict.pass()) continue;  // the mutant's bug is not in this op or case
      ++diagnosed;
      expect_diagnosed_as(r, m.name, vocab_mutants().size());
    }
  }
  EXPECT_GE(diagnosed, 10U);  // 15 (mutant, op) pairs fail on these two fixed cases (measured)

  const auto good =
      compare_dir(write_run<float>("diag_library", VocabOp::cross_entropy, "float32", library));
  EXPECT_TRUE(good.verdict.pass());
  EXPECT_TRUE(good.diagnosis.empty());
  EXPECT_TRUE(diagnosis_lines(good).empty());

  const fs::path d = write_run<float>("diag_unknown", VocabOp::cross_entropy, "float32", library);
  for (int r = 0; r < world; ++r) {
    write_tensor(d / ("loss." + std::to_string(r) + ".npy"), Tensor<float>(Shape{1}, {123.0F}));
  }
  const auto unknown = compare_dir(d);
  ASSERT_FALSE(unknown.verdict.pass());
  EXPECT_TRUE(unknown.diagnosis.empty());
  EXPECT_EQ(diagnosis_lines(unknown), std::vector<std::string>{"no known signature (of 20)"});
}

// A padded vocabulary: V = 5 real of the 7 columns (real_vocab 5), split [4, 0, 3], so rank 2
// holds the real column 4 and the padding columns 5 and 6, whose logits are 100 (far above
// the real ones); `impl` run on the ranks and written as a case with the config's real_vocab.
const char* const padded_ce_config =
    R"({"vocab": 7, "real_vocab": 5, "vocab_split": {"kind": "explicit", "sizes": [4, 0, 3]}, "ignore_index": -100, "label_smoothing": 0.25, "reduction": "mean", "class_weight": [1, 0.5, 2, 1, 1.5]})";

fs::path write_padded_run(const std::string& name, const VocabImplementation& impl) {
  fs::path d = case_dir(name);  // not const: returned by move
  VocabCase c = vocab_case(VocabOp::cross_entropy, DType::float32);
  c.ids = {0, 3, 4, -100, 2, 1};
  c.ce.real_vocab = 5;
  c.ce.class_weight = {1, 0.5, 2, 1, 1.5};
  c.ce.token_weight.clear();
  auto data = vocab_data<float>(c);
  for (std::size_t t = 0; t < tokens; ++t) data.logits(t, 5) = data.logits(t, 6) = 100.0F;
  write_tensor(d / "targets.npy", Tensor<std::int64_t>(Shape{tokens}, c.ids));
  write_tensor(d / "logits.npy", data.logits);
  write_tensor(d / "dloss.npy", data.dloss);
  const auto run = run_ranks(impl, c, data);
  EXPECT_TRUE(run.error.empty()) << run.error;
  using O = VocabRankOutputs<float>;
  const std::string outputs = write_pieces(d, run, {{"loss", &O::loss}, {"dlogits", &O::dlogits}});
  write_text(d / "case.json",
             manifest(VocabOp::cross_entropy, "float32", outputs, padded_ce_config));
  return d;
}

TEST(VocabCompare, a_padded_vocabulary_is_judged_over_the_real_classes) {
  const auto good = compare_dir(write_padded_run("padded", library));
  EXPECT_TRUE(good.verdict.pass()) << good.verdict.explain();
  // Megatron-LM's softmax over every column, padding included: the loss and dlogits fail.
  const auto bad =
      compare_dir(write_padded_run("padded_softmax", mutant("padding-logits-in-softmax")));
  ASSERT_FALSE(bad.verdict.pass());
  for (const auto& t : bad.verdict.tensors) EXPECT_FALSE(t.pass()) << t.summary();
}

TEST(VocabCompare, a_piece_of_the_wrong_local_shape_is_a_layout_failure_naming_the_rank) {
  const fs::path d = write_run<float>("layout", VocabOp::cross_entropy, "float32", library);
  write_tensor(d / "dlogits.2.npy", Tensor<float>(Shape{tokens, 2}));  // rank 2 holds [6, 3]
  const auto r = compare_dir(d);
  ASSERT_FALSE(r.verdict.pass());
  expect_parts(r.verdict.explain(),
               {"layout: rank 2's piece of dlogits", "is [6, 2]", "holds [6, 3]"});
  for (const auto& t : r.verdict.tensors) EXPECT_EQ(t.pass(), t.name != "dlogits") << t.summary();
}

// ---------------------------------------------------------------- bad input, by message

TEST(VocabCompareBadInput, every_error_names_the_file_and_the_field) {
  const fs::path ce = write_run<float>("bad_ce", VocabOp::cross_entropy, "float32", library);
  const fs::path emb = write_run<float>("bad_emb", VocabOp::embedding, "float32", library);
  write_tensor(ce / "targets_big.npy", Tensor<std::int64_t>(Shape{tokens}, {0, 3, 9, 6, 1, 2}));
  write_tensor(ce / "targets_short.npy", Tensor<std::int64_t>(Shape{5}, {0, 3, 4, 6, 1}));
  write_tensor(ce / "targets_f.npy", quarters<float>({tokens}, 1));
  write_tensor(emb / "ids_neg.npy", Tensor<std::int64_t>(Shape{tokens}, {0, 3, -1, 6, 1, 2}));
  const std::string ce_out = R"({"loss": {"ranks": ["loss.0.npy", "loss.1.npy", "loss.2.npy"]}})";
  const std::string emb_out = R"({"y": {"ranks": ["y.0.npy", "y.1.npy", "y.2.npy"]}})";
  const std::string good_ce = manifest(VocabOp::cross_entropy, "float32", ce_out);
  const std::string good_emb = manifest(VocabOp::embedding, "float32", emb_out);
  const std::vector<std::pair<fs::path, BadCase>> cases = {
      {ce,
       {"misspelt config field",
        with(good_ce, "\"label_smoothing\"", "\"label_smothing\""),
        {"case.json: config: unknown field label_smothing",
         "label_smoothing, real_vocab, reduce_algorithm"}}},
      {ce,
       {"reduction of the wrong type",
        with(good_ce, R"("reduction": "mean")", R"("reduction": 1)"),
        {"config.reduction: is an integer; give a string"}}},
      {ce,
       {"reduction unknown",
        with(good_ce, R"("reduction": "mean")", R"("reduction": "avg")"),
        {"config.reduction: is \"avg\"; give one of none, sum, mean"}}},
      {ce,
       {"class_weight not an array",
        with(good_ce, R"("class_weight": [1, 0.5, 2, 1, 1.5, 1, 0.25])", R"("class_weight": 1)"),
        {"config.class_weight: is an integer; give an array of numbers"}}},
      {ce,
       {"class_weight of another length",
        with(good_ce, R"("class_weight": [1, 0.5, 2, 1, 1.5, 1, 0.25])",
             R"("class_weight": [1, 2])"),
        {"config.class_weight: has 2 numbers but vocab is 7; give one weight per class"}}},
      {ce,
       {"token_weight of another length",
        with(good_ce, R"("token_weight": [1, 2, 0.5, 1, 1, 0])", R"("token_weight": [1])"),
        {"config.token_weight: has 1 numbers but tokens is 6; give one weight per token"}}},
      {ce,
       {"ignore_index of the wrong type",
        with(good_ce, R"("ignore_index": -100)", R"("ignore_index": "none")"),
        {"config.ignore_index: is a string; give an integer"}}},
      {ce,
       {"label_smoothing outside [0, 1]",
        with(good_ce, R"("label_smoothing": 0.25)", R"("label_smoothing": 1.5)"),
        {"config.label_smoothing: is 1.5", "give a number in [0, 1]"}}},
      {ce,
       {"config vocab other than the size",
        with(good_ce, R"("vocab": 7,)", R"("vocab": 8,)"),
        {"config.vocab: is 8 but sizes.vocab is 7"}}},
      {ce,
       {"real_vocab above the padded vocab",
        with(good_ce, R"("vocab": 7,)", R"("vocab": 7, "real_vocab": 8,)"),
        {"config.real_vocab: is 8, outside [1, vocab = 7]",
         "give the real vocabulary V of the padded V_pad = vocab, or null for no padding"}}},
      {ce,
       {"a class_weight of the padded length",
        with(good_ce, R"("vocab": 7,)", R"("vocab": 7, "real_vocab": 5,)"),
        {"config.class_weight: has 7 numbers but vocab is 5"}}},
      {emb,
       {"an id in the padding",
        with(good_emb, R"("padding_idx": 5)", R"("real_vocab": 1, "padding_idx": null)"),
        {"ids.npy: ids[", "outside [0, 1)"}}},
      {ce,
       {"vocab size missing",
        with(good_ce, R"("tokens": 6, "vocab": 7)", R"("tokens": 6)"),
        {"sizes.vocab: missing"}}},
      {ce,
       {"logits of the wrong shape",
        with(good_ce, R"("logits": "logits.npy")", R"("logits": "dlogits.0.npy")"),
        {"dlogits.0.npy: shape: is [6, 4] but vocab_parallel_cross_entropy's logits is [6, 7]"}}},
      {ce,
       {"targets missing",
        with(good_ce, R"("targets": "targets.npy", )", ""),
        {"inputs.targets: missing; vocab_parallel_cross_entropy needs it (shape [6])"}}},
      {ce,
       {"targets of the wrong length",
        with(good_ce, R"("targets": "targets.npy")", R"("targets": "targets_short.npy")"),
        {"targets_short.npy: shape: is [5] but vocab_parallel_cross_entropy's targets is [6]"}}},
      {ce,
       {"a target outside the vocabulary",
        with(good_ce, R"("targets": "targets.npy")", R"("targets": "targets_big.npy")"),
        {"targets_big.npy: targets[2]: is 9, outside [0, 7) and not the ignore_index"}}},
      {ce,
       {"targets as floats",
        with(good_ce, R"("targets": "targets.npy")", R"("targets": "targets_f.npy")"),
        {"targets_f.npy: descr: '<f4' is not an integer type, which int64 needs"}}},
      {ce,
       {"dlogits without dloss",
        manifest(VocabOp::cross_entropy, "float32",
                 R"({"dlogits": {"ranks": ["dlogits.0.npy", "dlogits.1.npy", "dlogits.2.npy"]}})",
                 "", R"({"logits": "logits.npy", "targets": "targets.npy"})"),
        {"inputs.dloss: missing; the case gives dlogits"}}},
      {ce,
       {"a split that does not tile",
        with(good_ce, split_json, R"({"kind": "explicit", "sizes": [4, 0]})"),
        {"case.json: config: split: explicit sizes [4,0]"}}},
      {emb,
       {"hidden missing",
        with(good_emb, R"(, "hidden": 3)", ""),
        {"sizes.hidden: missing; vocab_parallel_embedding needs it"}}},
      {emb,
       {"padding_idx outside the vocabulary",
        with(good_emb, R"("padding_idx": 5)", R"("padding_idx": -1)"),
        {"config.padding_idx: is -1, outside [0, 7)", "V - 1 for PyTorch's -1"}}},
      {emb,
       {"sequence_parallel_output of the wrong type",
        with(good_emb, R"("padding_idx": 5)", R"("sequence_parallel_output": 1)"),
        {"config.sequence_parallel_output: is an integer; give true or false"}}},
      {emb,
       {"an id outside the vocabulary",
        with(good_emb, R"("ids": "ids.npy")", R"("ids": "ids_neg.npy")"),
        {"ids_neg.npy: ids[2]: is -1, outside [0, 7)"}}},
      {emb,
       {"w of the wrong shape",
        with(good_emb, R"("w": "w.npy")", R"("w": "dy.npy")"),
        {"dy.npy: shape: is [6, 3] but vocab_parallel_embedding's w is [7, 3]"}}},
      {emb,
       {"dw without dy",
        manifest(VocabOp::embedding, "float32",
                 R"({"dw": {"ranks": ["dw.0.npy", "dw.1.npy", "dw.2.npy"]}})", "",
                 R"({"ids": "ids.npy", "w": "w.npy"})"),
        {"inputs.dy: missing; the case gives dw"}}},
      {emb,
       {"a tensor the op lacks",
        manifest(VocabOp::embedding, "float32", R"({"loss": "y.0.npy"})"),
        {"vocab_parallel_embedding has no tensor loss"}}},
  };
  for (const auto& [dir, c] : cases)
    expect_case_error(dir, c, "shardcheck_vocab_compare_tests_bad_");
}

}  // namespace
}  // namespace shardcheck::check::vocab_compare_tests
