// sequence_parallel_norm and megatron_sp_block as cases on disk (docs/case-format.md,
// compare/compare.hpp), the mesh {"tp": P}.
//   sequence_parallel_norm  the config's fields as ops/norm/norm_spec.cpp writes them (kind, eps,
//            tokens, token_split, reduce_algorithm), the sizes tokens, hidden; inputs x [tokens,
//            hidden], gamma [hidden], beta [hidden] (layer_norm only, required there), dy
//            [tokens, hidden] (needed for the gradients); outputs y, dx, dgamma, dbeta
//            (layer_norm only), each optional.
//   megatron_sp_block  the config as sp_block_spec writes it: "norm" (the norm's fields above),
//            "ffn", "ffn_split", and "column", "row", the linear layers' configs the block
//            derives from those (given, each must be what it derives; their "kernel" is free);
//            the sizes tokens, hidden, ffn; inputs as the norm's plus w1 [ffn, hidden], w2
//            [hidden, ffn]; outputs as the norm's plus dw1, dw2.
#include "compare/compare.hpp"
#include "compare/config_fields.hpp"
#include "layout/split_policy.hpp"
#include "ops/linear/linear_spec.hpp"
#include "ops/norm/norm_spec.hpp"
#include "suites/norm/norm_case.hpp"
#include "suites/norm/norm_mutants.hpp"
#include "suites/upstream_gradient.hpp"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardcheck::check {
namespace {

// The sequence-parallel norm's config from `f` (norm_spec.cpp's to_json), at the manifest's
// token count. @throws cases::CaseError: a field of the wrong type, an unknown kind, eps not
// positive, a config tokens other than sizes.tokens.
SequenceParallelNormConfig sp_norm_config(const cases::CaseManifest& m, cases::Fields& f) {
  SequenceParallelNormConfig k;
  const std::size_t tokens = m.size("tokens");
  k.tokens = tokens;  // absent: sizes.tokens
  read_fields(f, k);
  if (!(k.norm.eps > 0)) {
    f.fail("eps", "is " + std::to_string(k.norm.eps) + "; the norm needs eps > 0");
  }
  if (k.tokens != tokens) {
    f.fail("tokens", "is " + std::to_string(k.tokens) + " but sizes.tokens is " +
                         std::to_string(tokens) +
                         "; give the same token count or leave the config's out");
  }
  return k;
}

// The kernel of the block's linear layer `key` ("column" or "row") when the config gives that
// layer's config, which must otherwise be what the block derives: `derived(kernel)`, as
// linear_spec.cpp's to_json writes it. @throws cases::CaseError naming the first field that
// differs (or is unknown) and what the block derives there.
template <class Derive>
Kernel derived_linear(cases::Fields& f, const std::string& key, Kernel fallback, Derive derived) {
  if (!f.has(key)) return fallback;
  cases::Fields layer = f.object(key);
  const Kernel k = named_or(layer, "kernel", fallback);
  const nlohmann::json want = nlohmann::json::parse(derived(k));
  for (const auto& [field, derived_value] : want.items()) {
    if (field == "kernel" || !layer.has(field)) continue;
    const nlohmann::json& given = layer.raw(field);
    if (given != derived_value) {
      layer.fail(field, "is " + given.dump() + " but the block derives " + derived_value.dump() +
                            " from its norm, ffn and ffn_split; give the same or leave " + key +
                            " out");
    }
  }
  layer.done();  // a field the layer's config does not have, named with the ones it has
  return k;
}

// megatron_sp_block's config (the file comment). @throws cases::CaseError: the norm's errors, an
// ffn other than sizes.ffn, a linear layer's field other than the derived one, two kernels.
BlockConfig block_config(const cases::CaseManifest& m, cases::Fields& f) {
  BlockConfig b;
  cases::Fields norm = f.has("norm")
                           ? f.object("norm")
                           : cases::Fields(nlohmann::json::object(), m.file, "config.norm");
  b.norm = sp_norm_config(m, norm);
  norm.done();
  const std::size_t ffn = m.size("ffn");
  b.ffn = f.size_or("ffn", ffn);
  if (b.ffn != ffn) {
    f.fail("ffn", "is " + std::to_string(b.ffn) + " but sizes.ffn is " + std::to_string(ffn) +
                      "; give the same or leave the config's out");
  }
  b.ffn_split = split_or(f, "ffn_split", b.ffn_split);
  b.kernel = derived_linear(f, "column", b.kernel, [&](Kernel k) {
    return to_json(sp_block_column_config(b.norm, b.ffn, b.ffn_split, k));
  });
  const Kernel row = derived_linear(f, "row", b.kernel, [&](Kernel k) {
    return to_json(sp_block_row_config(b.norm, b.ffn_split, k));
  });
  if (row != b.kernel) {
    f.fail("row", "has kernel " + std::string(name(row)) + " but column has " +
                      std::string(name(b.kernel)) +
                      "; the block runs both linear layers with one kernel");
  }
  return b;
}

// The norm's contracts (reference/norm/norm_bound.hpp, NormForm: xhat's order × the
// variance's × dx's; docs/compare.md, "Contract"). Each lists the forms its bound covers (each
// element's bound is the largest of theirs); the unnamed entry is the default, which covers
// every kernel of the first three contracts.
using reference::NormDx;
using reference::NormForm;
using reference::NormVariance;
using reference::NormXhat;
constexpr NormXhat kDiff = NormXhat::difference, kFma = NormXhat::fused;
constexpr NormVariance kTwo = NormVariance::two_pass, kOne = NormVariance::one_pass,
                       kWelford = NormVariance::welford;
constexpr NormDx kCentered = NormDx::centered, kAffine = NormDx::affine;

// The four forms of one variance order: each xhat order with each dx order.
std::vector<NormForm> every_xhat_and_dx(NormVariance variance) {
  return {{kDiff, variance, kCentered},
          {kFma, variance, kCentered},
          {kDiff, variance, kAffine},
          {kFma, variance, kAffine}};
}

struct NormContract {
  std::string_view name;     // as a case declares it; empty: the default
  std::string_view summary;  // for the refusal's list
  std::string_view words;    // the verdict's contract line
  std::vector<NormForm> forms;
};

const std::vector<NormContract> kNormContracts = {
    {"two_pass",
     "var = Σ(x − mean)²/n, xhat = (x − mean)·rstd, as lib/ops/norm",
     "contract two_pass: layer_norm's xhat as (x − mean)·rstd; the variance in two passes",
     {{kDiff, kTwo, kCentered}}},
    {"fused_rstd_mean",
     "the same variance, xhat = fma(x, rstd, −rstd·mean) and dx = a·g + b·x + c, PyTorch's CPU "
     "LayerNorm's orders",
     "contract fused_rstd_mean: layer_norm's xhat as fma(x, rstd, −rstd·mean) and dx as "
     "((g − c1) − xhat·c2)·rstd or as a·g + b·x + c (PyTorch's CPU kernel); the variance in two "
     "passes: the larger bound",
     {{kFma, kTwo, kCentered}, {kFma, kTwo, kAffine}}},
    {"one_pass",
     "var = Σx²/n − mean², optionally clamped at 0, xhat in either order",
     "contract one_pass: layer_norm's xhat as (x − mean)·rstd or as fma(x, rstd, −rstd·mean) "
     "(PyTorch's CPU kernel); the variance in one pass (Σx²/n − mean², optionally clamped at "
     "0): the larger bound",
     {{kDiff, kOne, kCentered}, {kFma, kOne, kCentered}}},
    {"welford",
     "mean and M2 of Welford states merged in any tree, var = M2/n, xhat and dx in either "
     "order: PyTorch's CPU and CUDA kernels, Apex",
     "contract welford: the mean and M2 of Welford states merged in any tree (var = M2/n); "
     "layer_norm's xhat as (x − mean)·rstd or as fma(x, rstd, −rstd·mean), dx as ((g − c1) − "
     "xhat·c2)·rstd or as a·g + b·x + c: the larger bound",
     every_xhat_and_dx(kWelford)},
    {"",
     "",
     "layer_norm's xhat as (x − mean)·rstd or as fma(x, rstd, −rstd·mean) (PyTorch's CPU "
     "kernel), dx as ((g − c1) − xhat·c2)·rstd or as a·g + b·x + c; the variance in two passes "
     "or in one (Σx²/n − mean²): the larger bound",
     {{kDiff, kTwo, kCentered},
      {kFma, kTwo, kCentered},
      {kFma, kTwo, kAffine},
      {kDiff, kOne, kCentered},
      {kFma, kOne, kCentered}}},
};

// The contract a case declares (empty: the default), nullptr when the norm has none of the name.
const NormContract* norm_contract(std::string_view name) {
  for (const auto& k : kNormContracts) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

// A sequence-parallel norm signature's cost per element of x in multiply-adds of a linear
// signature's (DiagnosisCutSize::above): measured, docs/compare.md "Diagnosis at real sizes".
constexpr double kNormElementCost = 512;

}  // namespace

NormCase case_of(const cases::CaseManifest& m, NormCase* /*tag*/) {
  auto c = case_at_mesh<NormCase>(m);
  c.op = m.op == "megatron_sp_block" ? NormOp::block : NormOp::norm;
  c.hidden = m.size("hidden");
  cases::Fields f = m.config;
  if (c.op == NormOp::block) {
    c.block = block_config(m, f);
  } else {
    c.block.norm = sp_norm_config(m, f);
  }
  f.done();
  const auto* contract = norm_contract(m.contract);
  if (contract == nullptr) {
    std::string known;
    for (const auto& k : kNormContracts) {
      if (k.name.empty()) continue;
      known += (known.empty()         ? ""
                : k.name == "welford" ? " and "
                                      : ", ") +
               ("\"" + std::string(k.name) + "\" (" + std::string(k.summary) + ")");
    }
    throw cases::CaseError(m.file + ": contract: is \"" + m.contract + "\" but " + m.op +
                           " knows " + known +
                           "; omit the field for a bound that covers the first three");
  }
  c.forms = contract->forms;
  return c;
}

std::optional<std::string> contract_words(const NormCase& c, DType t) {
  for (const auto& k : kNormContracts) {
    if (k.forms.size() == c.forms.size() &&
        std::equal(k.forms.begin(), k.forms.end(), c.forms.begin(),
                   [](const NormForm& a, const NormForm& b) {
                     return a.xhat == b.xhat && a.variance == b.variance && a.dx == b.dx;
                   })) {
      return default_contract(t) + "; " + std::string(k.words);
    }
  }
  return default_contract(t) + "; the library's orders (lib/ops/norm)";
}

// The diagnosis of a large sequence_parallel_norm case on a cut-down one (docs/compare.md,
// "Diagnosis at real sizes"): some token rows, the hidden features intact (each token's
// statistics run over them). y and dx [tokens, hidden] are exact at the kept rows, since every
// token is normalized alone; dgamma and dbeta, sums over tokens, are not, so a case that gives
// either keeps the full run, and so does megatron_sp_block (its weight gradients sum over tokens
// too, and its cases at real sizes are not measured). The token split becomes an explicit split
// of each rank's kept rows (no norm signature depends on the split's sizes);
// normalized-over-token-axis, whose statistics run over each rank's every token, runs on the
// full case. The work of a signature run is tokens × hidden elements, each about
// kNormElementCost multiply-adds of a linear signature's (DiagnosisCutSize::above's unit).
template <class T>
std::optional<DiagnosisCut<T, NormCase, NormData, NormExpected>> diagnosis_cut(
    const NormCase& c, const NormData<T>& d, const NormExpected& e, const CaseVerdict& given,
    const DiagnosisCutSize& size) {
  const double work =
      static_cast<double>(c.tokens()) * static_cast<double>(c.hidden) * kNormElementCost;
  if (c.op != NormOp::norm || work <= size.above || c.tokens() <= size.rows) return std::nullopt;
  const auto worst_token = worst_rows(given, {"y", "dx"});
  if (!worst_token) return std::nullopt;
  const KeptIndices tk =
      keep_rows(split_sizes(c.norm().token_split, c.tokens(), c.world), size, *worst_token);
  const std::size_t tokens = tk.index.size();
  const auto kept = flat_rows(c.hidden, tk.index);

  DiagnosisCut<T, NormCase, NormData, NormExpected> cut{
      c, d, e, {{"y", kept}, {"dx", kept}}, "", {"normalized-over-token-axis"}};
  cut.c.block.norm.tokens = tokens;
  cut.c.block.norm.token_split = SplitPolicy::explicit_sizes(tk.sizes);
  cut.d.x = select_flat(d.x, kept, {tokens, c.hidden});
  cut.d.dy = select_flat(d.dy, kept, {tokens, c.hidden});
  cut.e.y = select_expected(e.y, kept, {tokens, c.hidden});
  cut.e.dx = select_expected(e.dx, kept, {tokens, c.hidden});
  cut.words = kept_tokens_words(tokens, c.tokens(), cut.whole);
  return cut;
}

template <class T>
void read_tensors(CaseReader& r, const NormCase& c, NormData<T>& d, NormRun<T>& run) {
  const bool beta = has_beta(c.kind());
  r.input("x", d.x);
  r.input("gamma", d.gamma);
  if (beta) r.input("beta", d.beta);
  if (c.op == NormOp::block) {
    r.input("w1", d.w1);
    r.input("w2", d.w2);
  }
  read_upstream_gradient(r, "dy", d.dy, {c.tokens(), c.hidden},
                         {"dx", "dgamma", "dbeta", "dw1", "dw2"});
  read_listed_outputs<T>(r, c, run);
}

void register_norm_compare() {
  for (const char* op : {"sequence_parallel_norm", "megatron_sp_block"}) {
    CompareRegistry::instance().add(op, compare_as<NormCase, NormData, NormRun, &norm_mutants>);
  }
}

}  // namespace shardcheck::check
