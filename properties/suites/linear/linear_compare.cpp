// column_parallel_linear and row_parallel_linear as cases on disk (docs/case-format.md,
// compare/compare.hpp): the config's fields as ops/linear/linear_spec.cpp writes them, the sizes
// tokens, in, out, the mesh {"tp": P}; inputs x [tokens, in], w [out, in], b [out] (optional:
// without it the layer has no bias), dy [tokens, out] (needed for the gradients); outputs y, dx,
// dw, db, each optional.
#include "compare/compare.hpp"
#include "compare/config_fields.hpp"
#include "ops/linear/linear_spec.hpp"
#include "suites/linear/linear_case.hpp"
#include "suites/linear/linear_mutants.hpp"
#include "suites/upstream_gradient.hpp"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <iterator>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::check {

namespace {
// The two places of the bias, in words (docs/compare.md, "Contract").
const std::string kAfterSumWords =
    "y's bias added once in T after the dot (and the cross-rank sum), as lib/ops/linear and "
    "Megatron-LM";
const std::string kFusedBiasWords =
    "y's bias one more term of one rank's dot accumulation, rounded once with it, as cuBLASLt's "
    "bias epilogue and vLLM's RowParallelLinear (the bias on rank 0's matmul)";
}  // namespace

LinearCase case_of(const cases::CaseManifest& m, LinearCase* /*tag*/) {
  auto c = case_at_mesh<LinearCase>(m);
  c.layer =
      m.op == "row_parallel_linear" ? LinearLayer::row_parallel : LinearLayer::column_parallel;
  c.tokens = m.size("tokens");
  c.in = m.size("in");
  c.out = m.size("out");
  c.has_bias = m.input("b") != nullptr;
  cases::Fields f = m.config;
  if (c.layer == LinearLayer::column_parallel) {
    c.column.out_features = c.out;  // absent: the sizes
    c.column.tokens = c.tokens;
    read_fields(f, c.column);
  } else {
    read_fields(f, c.row);
  }
  f.done();
  // The contract: where the kernel adds y's bias (reference/bounds.hpp, steps (c) and (f)).
  using reference::BiasPlacement;
  static const std::pair<std::string, BiasPlacement> known[] = {
      {"bias_after_sum", BiasPlacement::after_sum}, {"fused_bias", BiasPlacement::fused}};
  c.bias_placement = BiasPlacement::either;  // no contract: a bound that covers both kernels
  if (!m.contract.empty()) {
    const auto* it = std::find_if(std::begin(known), std::end(known),
                                  [&](const auto& k) { return k.first == m.contract; });
    if (it == std::end(known)) {
      throw cases::CaseError(m.file + ": contract: is \"" + m.contract + "\" but " + m.op +
                             " knows \"bias_after_sum\" (" + kAfterSumWords +
                             ") and \"fused_bias\" (" + kFusedBiasWords +
                             "); omit the field for a bound that covers both");
    }
    c.bias_placement = it->second;
  }
  // A fused bias is one more term of y's dot over in.
  const std::size_t with_bias =
      c.has_bias && c.bias_placement != BiasPlacement::after_sum ? c.in + 1 : c.in;
  c.accumulate = require_accumulate_bounded(
      m, std::max({c.tokens, with_bias, c.out}),
      "the largest of tokens, in (+ 1 for a bias that may be fused), out");
  return c;
}

// The bounds take any accumulator that holds T (compare.hpp: require_accumulate_holds).
constexpr bool takes_declared_accumulate(const LinearCase* /*tag*/) { return true; }

std::optional<std::string> contract_words(const LinearCase& c, DType t) {
  const std::string head = default_contract(t, c.accumulate) + "; ";
  switch (c.bias_placement) {
    case reference::BiasPlacement::after_sum:
      return head + "contract bias_after_sum: " + kAfterSumWords;
    case reference::BiasPlacement::fused: return head + "contract fused_bias: " + kFusedBiasWords;
    case reference::BiasPlacement::either: break;
  }
  return head + kAfterSumWords + ", or " + kFusedBiasWords + ": the larger bound";
}
// The diagnosis of a large linear case on a cut-down one (docs/compare.md, "Diagnosis at real
// sizes"): some token rows and some output features, the contraction over in intact, each cut
// dimension's split made explicit over the kept elements so every rank keeps its shard
// boundaries. y [tokens, out] is exact at the kept rows and features; dx [tokens, in] (a sum
// over out) only with every feature kept, dw [out, in] and db [out] (sums over tokens) only with
// every token kept. So tokens are cut only when the case gives neither dw nor db, features only
// when it gives neither dx nor dw (dw-transposed reshapes dw by its per-rank shape), and
// neither under gather_output (gather-wrong-axis reshapes y by its per-rank shape) nor tokens
// under a sequence-parallel input with an uneven token split (floor-split-loses-rows depends on
// the sizes; an even one keeps equal sizes, keep_along's contract).
template <class T>
std::optional<DiagnosisCut<T, LinearCase, LinearData, LinearExpected>> diagnosis_cut(
    const LinearCase& c, const LinearData<T>& d, const LinearExpected& e, const CaseVerdict& given,
    const DiagnosisCutSize& size) {
  const double work =
      static_cast<double>(c.tokens) * static_cast<double>(c.in) * static_cast<double>(c.out);
  if (work <= size.above) return std::nullopt;
  const auto gives = [&](const char* name) {
    return std::any_of(given.tensors.begin(), given.tensors.end(),
                       [&](const TensorCheck& t) { return t.name == name; });
  };
  const bool column = c.layer == LinearLayer::column_parallel;
  const bool gather = column && c.column.gather_output;
  const bool tokens_split = c.sequence_parallel();
  const auto token_pieces = tokens_split ? split_sizes(c.token_split(), c.tokens, c.world)
                                         : std::vector<std::size_t>{c.tokens};
  const bool uneven_tokens = std::adjacent_find(token_pieces.begin(), token_pieces.end(),
                                                std::not_equal_to<>()) != token_pieces.end();
  const bool cut_tokens = !gather && !gives("dw") && !gives("db") &&
                          !(column && tokens_split && uneven_tokens) && c.tokens > size.rows;
  const bool cut_out = !gather && !gives("dx") && !gives("dw") && c.out > size.columns;
  if (!cut_tokens && !cut_out) return std::nullopt;

  // The worst element of every tensor given: its token row and output feature are kept.
  std::vector<std::size_t> worst_token, worst_feature;
  for (const auto& t : given.tensors) {
    if (t.worst_index.empty() || t.values.empty()) continue;
    if (t.name == "y" || t.name == "dx") worst_token.push_back(t.worst_index[0]);
    if (t.name == "y") worst_feature.push_back(t.worst_index[1]);
    if (t.name == "dw" || t.name == "db") worst_feature.push_back(t.worst_index[0]);
  }
  const auto per_piece = [&](std::size_t total, std::size_t pieces) {
    return std::max<std::size_t>(4, (total + pieces - 1) / pieces);
  };
  const auto keep = [&](bool cut, const std::vector<std::size_t>& pieces, std::size_t total,
                        const std::vector<std::size_t>& must) {
    if (cut) return keep_along(pieces, per_piece(total, pieces.size()), must);
    KeptIndices all{
        std::vector<std::size_t>(std::accumulate(pieces.begin(), pieces.end(), std::size_t{0})),
        pieces};
    std::iota(all.index.begin(), all.index.end(), std::size_t{0});
    return all;
  };
  const auto out_pieces =
      column ? split_sizes(c.column.out_split, c.out, c.world) : std::vector<std::size_t>{c.out};
  const KeptIndices tk = keep(cut_tokens, token_pieces, size.rows, worst_token);
  const KeptIndices fk = keep(cut_out, out_pieces, size.columns, worst_feature);
  const std::size_t tokens = tk.index.size(), out = fk.index.size();

  DiagnosisCut<T, LinearCase, LinearData, LinearExpected> cut;
  LinearCase& s = cut.c;
  s = c;
  s.tokens = tokens;
  s.out = out;
  if (column) {
    s.column.tokens = tokens;
    s.column.out_features = out;
    s.column.out_split = SplitPolicy::explicit_sizes(fk.sizes);
  }
  SplitPolicy& token_split = column ? s.column.token_split : s.row.token_split;
  token_split = tokens_split ? SplitPolicy::explicit_sizes(tk.sizes) : SplitPolicy::chunk();

  const std::vector<std::size_t> all_in = [&] {
    std::vector<std::size_t> v(c.in);
    std::iota(v.begin(), v.end(), std::size_t{0});
    return v;
  }();
  const auto y_kept = flat_indices(c.out, tk.index, fk.index);
  const auto dx_kept = flat_indices(c.in, tk.index, all_in);
  const auto dw_kept = flat_indices(c.in, fk.index, all_in);
  cut.d.x = select_flat(d.x, dx_kept, {tokens, c.in});
  cut.d.w = select_flat(d.w, dw_kept, {out, c.in});
  if (c.has_bias) cut.d.b = select_flat(d.b, fk.index, {out});
  cut.d.dy = select_flat(d.dy, y_kept, {tokens, out});
  // Each expected tensor at the same elements (dx's under a cut of out, dw's and db's under a
  // cut of tokens are not the cut case's, but then the case gives none of them).
  const auto expect = [](const ExpectedTensor& x, const std::vector<std::size_t>& kept,
                         const Shape& shape) {
    return ExpectedTensor{select_flat(x.value, kept, shape), select_flat(x.bound, kept, shape)};
  };
  cut.e.y = expect(e.y, y_kept, {tokens, out});
  cut.e.dx = expect(e.dx, dx_kept, {tokens, c.in});
  cut.e.dw = expect(e.dw, dw_kept, {out, c.in});
  if (c.has_bias) cut.e.db = expect(e.db, fk.index, {out});
  cut.kept = {{"y", y_kept}, {"dx", dx_kept}, {"dw", dw_kept}, {"db", fk.index}};

  std::string words;
  if (cut_tokens) words = std::to_string(tokens) + " of " + std::to_string(c.tokens) + " tokens";
  if (cut_out) {
    words += (words.empty() ? "" : " and ") + std::to_string(out) + " of " + std::to_string(c.out) +
             " output features";
  }
  cut.words = words + ", every shard boundary and the worst elements kept";
  return cut;
}

template <class T>
void read_tensors(CaseReader& r, const LinearCase& c, LinearData<T>& d, LinearRun<T>& run) {
  r.input("x", d.x);
  r.input("w", d.w);
  if (c.has_bias) r.input("b", d.b);
  read_upstream_gradient(r, "dy", d.dy, {c.tokens, c.out}, {"dx", "dw", "db"});
  read_listed_outputs<T>(r, c, run);
}

void register_linear_compare() {
  for (const char* op : {"column_parallel_linear", "row_parallel_linear"}) {
    CompareRegistry::instance().add(op,
                                    compare_as<LinearCase, LinearData, LinearRun, &linear_mutants>);
  }
}

}  // namespace shardcheck::check
