// vocab_parallel_embedding and vocab_parallel_cross_entropy as cases on disk
// (docs/case-format.md, compare/compare.hpp): the config's fields as ops/vocab/vocab_spec.cpp
// writes them (to_json), the mesh {"tp": P}.
//
//   vocab_parallel_embedding      sizes tokens, vocab, hidden; inputs ids [tokens] (integers),
//                                 w [vocab, hidden], dy [tokens, hidden] (needed for dw);
//                                 outputs y, dw, each optional
//   vocab_parallel_cross_entropy  sizes tokens, vocab; inputs logits [tokens, vocab], targets
//                                 [tokens] (integers), dloss [tokens] (reduction none) or [1]
//                                 (needed for dlogits); outputs loss, dlogits, each optional
//
// The ids and targets are the case's (VocabCase::ids: the reference and the bounds read them),
// so case_of reads them; read_tensors reads them again through the CaseReader, which checks
// their presence and shape. A padded vocabulary is the config's real_vocab V (null or absent:
// none): sizes.vocab is then V_pad and every "vocab" below reads V. Refused, as bad input naming
// the file and the field: an id or target outside [0, vocab) (a target equal to ignore_index
// excepted), a padding_idx outside [0, vocab), a config vocab other than sizes.vocab, a
// real_vocab outside [1, sizes.vocab], a label_smoothing outside [0, 1], a class_weight not of
// length vocab or a token_weight not of length tokens.
#include "compare/compare.hpp"
#include "compare/config_fields.hpp"
#include "layout/split_policy.hpp"
#include "ops/vocab/vocab_spec.hpp"
#include "suites/upstream_gradient.hpp"
#include "suites/vocab/vocab_case.hpp"
#include "suites/vocab/vocab_mutants.hpp"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace shardcheck::check {
namespace {

// "ids.npy: ids[3]: is 11, outside [0, 11); every ids value must be a global vocabulary index".
cases::CaseError index_out_of_range(const std::string& path, const std::string& name, std::size_t i,
                                    std::int64_t value, std::size_t vocab) {
  return cases::CaseError(path + ": " + name + "[" + std::to_string(i) + "]: is " +
                          std::to_string(value) + ", outside [0, " + std::to_string(vocab) + ")" +
                          (name == "targets" ? " and not the ignore_index" : "") + "; every " +
                          name + " value must be a global vocabulary index");
}

// The ids (embedding) or targets (cross-entropy) file's values, or none when the manifest does
// not give it (read_tensors then reports it missing). @throws cases::CaseError naming the file
// for a value outside [0, vocab) other than `ignored`.
std::vector<std::int64_t> read_ids(const cases::CaseManifest& m, const std::string& name,
                                   std::size_t vocab, std::optional<std::int64_t> ignored) {
  const cases::TensorFiles* f = m.input(name);
  if (f == nullptr) return {};
  const std::string path = m.path(f->files.at(0));
  const auto t = cases::to_tensor<std::int64_t>(cases::read_npy(path), DType::int64, path);
  std::vector<std::int64_t> ids(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    ids[i] = t[i];
    if (ignored && ids[i] == *ignored) continue;
    if (ids[i] < 0 || static_cast<std::uint64_t>(ids[i]) >= vocab) {
      throw index_out_of_range(path, name, i, ids[i], vocab);
    }
  }
  return ids;
}

// The config's fields (its table, ops/vocab/vocab_spec.hpp), then the checks of the fields both
// ops' configs have: vocab, sizes.vocab when absent, refused when it says otherwise; real_vocab
// (a padded vocabulary: V real rows or columns of the vocab = V_pad), absent or null for none
// (no padding), else in [1, vocab].
template <class Config>
void read_vocabulary(cases::Fields& f, const VocabCase& c, Config& k) {
  k.vocab = c.vocab;
  read_fields(f, k);
  if (k.vocab != c.vocab) {
    f.fail("vocab", "is " + std::to_string(k.vocab) + " but sizes.vocab is " +
                        std::to_string(c.vocab) +
                        "; give the same global vocabulary size in both (or omit this one)");
  }
  if (k.real_vocab && (*k.real_vocab < 1 || *k.real_vocab > c.vocab)) {
    f.fail("real_vocab", "is " + std::to_string(*k.real_vocab) +
                             ", outside [1, vocab = " + std::to_string(c.vocab) +
                             "]; give the real vocabulary V of the padded V_pad = vocab, or "
                             "null for no padding");
  }
}

void read_embedding_config(cases::Fields& f, VocabCase& c) {
  VocabEmbeddingConfig& k = c.embedding;
  read_vocabulary(f, c, k);
  if (k.padding_idx &&
      (*k.padding_idx < 0 || static_cast<std::size_t>(*k.padding_idx) >= c.real_vocab())) {
    f.fail("padding_idx", "is " + std::to_string(*k.padding_idx) + ", outside [0, " +
                              std::to_string(c.real_vocab()) +
                              "); give a global row, V - 1 for PyTorch's -1, or null for none");
  }
}

void read_cross_entropy_config(cases::Fields& f, VocabCase& c) {
  VocabCrossEntropyConfig& k = c.ce;
  read_vocabulary(f, c, k);
  if (!(k.label_smoothing >= 0 && k.label_smoothing <= 1)) {
    f.fail("label_smoothing",
           "is " + std::to_string(k.label_smoothing) + "; give a number in [0, 1]");
  }
  const auto weights = [&f](const char* key, const std::vector<double>& w, std::size_t n,
                            const char* what) {
    if (!w.empty() && w.size() != n) {
      f.fail(key, "has " + std::to_string(w.size()) + " numbers but " + what + " is " +
                      std::to_string(n) + "; give one weight per " +
                      (std::string(what) == "vocab" ? "class" : "token") + ", or [] for none");
    }
  };
  weights("class_weight", k.class_weight, c.real_vocab(), "vocab");
  weights("token_weight", k.token_weight, c.tokens, "tokens");
}

// A signature's cost per element of y (embedding: the part a token cut shrinks; its table's
// vocab × hidden part stays) and per logit (cross-entropy) in multiply-adds of a linear
// signature's (DiagnosisCutSize::above): measured, docs/compare.md "Diagnosis at real sizes".
constexpr double kEmbeddingElementCost = 128;
constexpr double kCrossEntropyElementCost = 256;

}  // namespace

VocabCase case_of(const cases::CaseManifest& m, VocabCase* /*tag*/) {
  auto c = case_at_mesh<VocabCase>(m);
  c.op = m.op == "vocab_parallel_embedding" ? VocabOp::embedding : VocabOp::cross_entropy;
  c.tokens = m.size("tokens");
  c.vocab = m.size("vocab");
  cases::Fields f = m.config;
  if (c.op == VocabOp::embedding) {
    c.hidden = m.size("hidden");
    read_embedding_config(f, c);
    c.ids = read_ids(m, "ids", c.real_vocab(), std::nullopt);
  } else {
    read_cross_entropy_config(f, c);
    c.ids = read_ids(m, "targets", c.real_vocab(), c.ce.ignore_index);
    c.all_ignored = c.ce.ignore_index && !c.ids.empty() &&
                    std::all_of(c.ids.begin(), c.ids.end(),
                                [&](std::int64_t y) { return y == *c.ce.ignore_index; });
  }
  f.done();
  return c;
}

// The diagnosis of a large vocab case on a cut-down one (docs/compare.md, "Diagnosis at real
// sizes"): some token rows, the vocabulary intact (the ids index all of it, the softmax runs over
// it). The embedding's y [tokens, hidden] is exact at the kept rows (each row is its id's row of
// w), its dw (a sum over tokens) is not, so a case that gives dw keeps the full run; under
// sequence_parallel_output the token split becomes an explicit split of each rank's kept rows.
// The cross-entropy's loss [tokens] and dlogits [tokens, V] are exact at the kept rows under
// reduction none; under sum dlogits is and the scalar loss (a sum over tokens) is not, so a case
// that gives it keeps the full run; under mean neither is (the divisor counts or weighs every
// token, and mean-by-local-count and weighted-mean-by-count are bugs in it), so every mean case
// keeps the full run. The token weights are cut with the tokens; no vocab signature depends on
// the token count or split otherwise. The work of a signature run: tokens × hidden elements of
// y (embedding), each about kEmbeddingElementCost multiply-adds of a linear signature's
// (DiagnosisCutSize::above's unit), or tokens × vocab logits, kCrossEntropyElementCost each.
template <class T>
std::optional<DiagnosisCut<T, VocabCase, VocabData, VocabExpected>> diagnosis_cut(
    const VocabCase& c, const VocabData<T>& d, const VocabExpected& e, const CaseVerdict& given,
    const DiagnosisCutSize& size) {
  const bool embedding = c.op == VocabOp::embedding;
  const std::size_t width = embedding ? c.hidden : c.vocab;  // of y, of the logits
  const double work = static_cast<double>(c.tokens) * static_cast<double>(width) *
                      (embedding ? kEmbeddingElementCost : kCrossEntropyElementCost);
  if (work <= size.above || c.tokens <= size.rows) return std::nullopt;
  const bool per_token = !embedding && c.ce.reduction == LossReduction::none;
  if (!embedding && c.ce.reduction == LossReduction::mean) return std::nullopt;
  const auto worst_token =
      worst_rows(given, embedding   ? std::vector<std::string>{"y"}
                        : per_token ? std::vector<std::string>{"loss", "dlogits"}
                                    : std::vector<std::string>{"dlogits"});
  if (!worst_token) return std::nullopt;
  const bool sp = embedding && c.embedding.sequence_parallel_output;
  const auto pieces = sp ? split_sizes(c.embedding.token_split, c.tokens, c.world)
                         : std::vector<std::size_t>{c.tokens};
  const KeptIndices tk = keep_rows(pieces, size, *worst_token);
  const std::size_t tokens = tk.index.size();
  const auto kept = flat_rows(width, tk.index);

  // A cross-rank sum whose order follows the buffer's length (compare.hpp, DiagnosisCut) may
  // round the cut case's elements differently, a fraction of a bound where the bound is not 0;
  // where it is (the embedding's y, exact data movement; a padding column's gradient), any
  // difference is an infinite residual. So the signatures that sum more than one nonzero
  // partial into such elements run on the full case: index-masked-output-not-zeroed (every
  // rank's row 0), padding-logits-in-softmax and padding-grad-not-zeroed (softmax values in
  // the padding columns, over the all_reduced sum of exponentials).
  std::vector<std::string> whole;
  if (embedding) {
    whole = {"index-masked-output-not-zeroed"};
  } else if (c.real_vocab() < c.vocab) {
    whole = {"padding-logits-in-softmax", "padding-grad-not-zeroed"};
  }
  DiagnosisCut<T, VocabCase, VocabData, VocabExpected> cut{c, d, e, {}, "", whole};
  cut.c.tokens = tokens;
  cut.c.ids.clear();
  for (const std::size_t t : tk.index) cut.c.ids.push_back(c.ids[t]);
  if (embedding) {
    if (sp) cut.c.embedding.token_split = SplitPolicy::explicit_sizes(tk.sizes);
    cut.d.dy = select_flat(d.dy, kept, {tokens, c.hidden});
    cut.e.y = select_expected(e.y, kept, {tokens, c.hidden});
    cut.kept = {{"y", kept}};
  } else {
    if (!c.ce.token_weight.empty()) {
      cut.c.ce.token_weight.clear();
      for (const std::size_t t : tk.index) cut.c.ce.token_weight.push_back(c.ce.token_weight[t]);
    }
    cut.d.logits = select_flat(d.logits, kept, {tokens, c.vocab});
    cut.e.dlogits = select_expected(e.dlogits, kept, {tokens, c.vocab});
    cut.kept = {{"dlogits", kept}};
    if (per_token) {  // dloss [tokens]; under sum it is [1], every token's
      cut.d.dloss = select_flat(d.dloss, tk.index, {tokens});
      cut.e.loss = select_expected(e.loss, tk.index, {tokens});
      cut.kept["loss"] = tk.index;
    }
  }
  cut.words = kept_tokens_words(tokens, c.tokens, whole);
  return cut;
}

template <class T>
void read_tensors(CaseReader& r, const VocabCase& c, VocabData<T>& d, VocabRun<T>& run) {
  Tensor<std::int64_t> ids;  // c.ids holds the values; read here for its presence and shape
  if (c.op == VocabOp::embedding) {
    r.input("ids", ids);
    r.input("w", d.w);
    read_upstream_gradient(r, "dy", d.dy, {c.tokens, c.hidden}, {"dw"});
  } else {
    r.input("targets", ids);
    r.input("logits", d.logits);
    read_upstream_gradient(r, "dloss", d.dloss,
                           {c.ce.reduction == LossReduction::none ? c.tokens : 1}, {"dlogits"});
  }
  read_listed_outputs<T>(r, c, run);
}

void register_vocab_compare() {
  for (const char* op : {"vocab_parallel_embedding", "vocab_parallel_cross_entropy"}) {
    CompareRegistry::instance().add(op, compare_as<VocabCase, VocabData, VocabRun, &vocab_mutants>);
  }
}

}  // namespace shardcheck::check
