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
#include "ops/vocab/vocab_spec.hpp"
#include "suites/upstream_gradient.hpp"
#include "suites/vocab/vocab_case.hpp"
#include "suites/vocab/vocab_mutants.hpp"

#include <algorithm>
#include <optional>

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
