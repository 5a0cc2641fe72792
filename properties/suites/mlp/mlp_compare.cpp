// parallel_mlp as a case on disk (docs/case-format.md, compare/compare.hpp): the config's fields
// as ops/mlp/mlp_spec.cpp writes them (activation, ffn_features, ffn_split, tokens,
// sequence_parallel, token_split, reduce_algorithm, kernel), the sizes tokens, hidden, ffn, the
// mesh {"tp": P}; inputs x [tokens, hidden], w_gate [ffn, hidden] (swiglu only, required there),
// w_up [ffn, hidden], w_down [hidden, ffn], the biases b_gate (swiglu) and b_up [ffn], b_down
// [hidden] (all three or none: without them the layer has no bias), dy [tokens, hidden] (needed
// for the gradients); outputs y, dx, dw_gate, dw_up, dw_down, db_gate, db_up, db_down, each
// optional. The suite's data holds fc1 fused, [w_gate; w_up]: the case's halves are stacked.
#include "compare/compare.hpp"
#include "compare/config_fields.hpp"
#include "ops/mlp/mlp_spec.hpp"
#include "suites/mlp/mlp_case.hpp"
#include "suites/mlp/mlp_mutants.hpp"
#include "suites/upstream_gradient.hpp"

#include <algorithm>
#include <optional>
#include <vector>

namespace shardcheck::check {
namespace {

// The config's field `key`, `got`, must be the manifest's size `of` (absent, it was set to it).
void require_same_size(cases::Fields& f, const std::string& key, std::size_t got,
                       const cases::CaseManifest& m, const std::string& of) {
  const std::size_t want = m.size(of);
  if (got != want) {
    f.fail(key, "is " + std::to_string(got) + " but sizes." + of + " is " + std::to_string(want) +
                    "; give the same size or leave the config's out");
  }
}

// [a; b]: a's rows, then b's (first dimensions added).
template <class T>
Tensor<T> stacked(const Tensor<T>& a, const Tensor<T>& b) {
  Shape s = a.shape();
  s[0] += b.shape()[0];
  Tensor<T> out(s);
  std::copy_n(a.data(), a.size(), out.data());
  std::copy_n(b.data(), b.size(), out.data() + a.size());
  return out;
}

}  // namespace

MlpCase case_of(const cases::CaseManifest& m, MlpCase* /*tag*/) {
  auto c = case_at_mesh<MlpCase>(m);
  c.tokens = m.size("tokens");
  c.hidden = m.size("hidden");
  c.has_bias = m.input("b_up") != nullptr;
  cases::Fields f = m.config;
  MlpConfig& k = c.cfg;
  k.ffn_features = m.size("ffn");  // absent: the sizes
  k.tokens = c.tokens;
  read_fields(f, k);
  require_same_size(f, "ffn_features", k.ffn_features, m, "ffn");
  require_same_size(f, "tokens", k.tokens, m, "tokens");
  f.done();
  // The dots: up over hidden, down over ffn, dx over the fused ffn axis (swiglu: gate and up),
  // the weight and bias gradients over tokens.
  c.accumulate = require_accumulate_bounded(
      m, std::max({c.tokens, c.hidden, up_rows_per_feature(k.activation) * c.ffn()}),
      "the largest of tokens, hidden, and ffn (twice ffn for swiglu)");
  return c;
}

// The projections' bounds take any accumulator that holds T (compare.hpp:
// require_accumulate_holds); the activation stays in acc_t<T> (reference/mlp/mlp_bound.hpp).
constexpr bool takes_declared_accumulate(const MlpCase* /*tag*/) { return true; }

// The diagnosis of a large MLP case on a cut-down one (docs/compare.md, "Diagnosis at real
// sizes"): some token rows, the hidden and ffn features intact (fc2 sums over ffn, fc1's dx over
// it too). y and dx [tokens, hidden] are exact at the kept rows, since every token row goes
// through the layer alone; the weight and bias gradients, sums over tokens, are not, so a case
// that gives any of them keeps the full run. Under sequence parallelism the token split becomes
// an explicit split of each rank's kept rows (no mlp signature depends on the split's sizes).
template <class T>
std::optional<DiagnosisCut<T, MlpCase, MlpData, MlpExpected>> diagnosis_cut(
    const MlpCase& c, const MlpData<T>& d, const MlpExpected& e, const CaseVerdict& given,
    const DiagnosisCutSize& size) {
  const double work =
      static_cast<double>(c.tokens) * static_cast<double>(c.hidden) * static_cast<double>(c.ffn());
  if (work <= size.above || c.tokens <= size.rows) return std::nullopt;
  const auto worst_token = worst_rows(given, {"y", "dx"});
  if (!worst_token) return std::nullopt;
  const bool sp = c.cfg.sequence_parallel;
  const auto pieces =
      sp ? split_sizes(c.cfg.token_split, c.tokens, c.world) : std::vector<std::size_t>{c.tokens};
  const KeptIndices tk = keep_rows(pieces, size, *worst_token);
  const std::size_t tokens = tk.index.size();
  const auto kept = flat_rows(c.hidden, tk.index);

  DiagnosisCut<T, MlpCase, MlpData, MlpExpected> cut{c, d, e, {{"y", kept}, {"dx", kept}}, "", {}};
  cut.c.tokens = cut.c.cfg.tokens = tokens;
  cut.c.cfg.token_split = sp ? SplitPolicy::explicit_sizes(tk.sizes) : SplitPolicy::chunk();
  cut.d.x = select_flat(d.x, kept, {tokens, c.hidden});
  cut.d.dy = select_flat(d.dy, kept, {tokens, c.hidden});
  cut.e.y = select_expected(e.y, kept, {tokens, c.hidden});
  cut.e.dx = select_expected(e.dx, kept, {tokens, c.hidden});
  cut.words = kept_tokens_words(tokens, c.tokens);
  return cut;
}

template <class T>
void read_tensors(CaseReader& r, const MlpCase& c, MlpData<T>& d, MlpRun<T>& run) {
  const bool gate = c.cfg.activation == Activation::swiglu;
  r.input("x", d.x);
  r.input("w_up", d.w_up);
  r.input("w_down", d.w_down);
  if (c.has_bias) {
    r.input("b_up", d.b_up);
    r.input("b_down", d.b_down);
  }
  if (gate) {  // fc1 fused as [w_gate; w_up] (and its bias [b_gate; b_up])
    Tensor<T> w_gate, b_gate;
    r.input("w_gate", w_gate);
    d.w_up = stacked(w_gate, d.w_up);
    if (c.has_bias) {
      r.input("b_gate", b_gate);
      d.b_up = stacked(b_gate, d.b_up);
    }
  }
  read_upstream_gradient(r, "dy", d.dy, {c.tokens, c.hidden},
                         {"dx", "dw_gate", "dw_up", "dw_down", "db_gate", "db_up", "db_down"});
  read_listed_outputs<T>(r, c, run);
}

void register_mlp_compare() {
  CompareRegistry::instance().add("parallel_mlp",
                                  compare_as<MlpCase, MlpData, MlpRun, &mlp_mutants>);
}

}  // namespace shardcheck::check
