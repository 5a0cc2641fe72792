// sequence_parallel_norm as a case on disk (docs/case-format.md, compare/compare.hpp): the
// config's fields as ops/norm/norm_spec.cpp writes them (kind, eps, tokens, token_split,
// reduce_algorithm), the sizes tokens, hidden, the mesh {"tp": P}; inputs x [tokens, hidden],
// gamma [hidden], beta [hidden] (layer_norm only, required there), dy [tokens, hidden] (needed
// for the gradients); outputs y, dx, dgamma, dbeta (layer_norm only), each optional.
// megatron_sp_block is not comparable yet.
#include "compare/compare.hpp"
#include "compare/config_fields.hpp"
#include "suites/norm/norm_case.hpp"
#include "suites/norm/norm_mutants.hpp"
#include "suites/upstream_gradient.hpp"

#include <algorithm>
#include <optional>
#include <string>

namespace shardcheck::check {
namespace {

// @throws cases::CaseError listing the three kinds.
NormKind kind_or(cases::Fields& f, const std::string& key, NormKind fallback) {
  if (!f.has(key)) return fallback;
  const std::string k = f.choice(key, {"layer_norm", "layer_norm_no_bias", "rms_norm"});
  if (k == "layer_norm_no_bias") return NormKind::layer_norm_no_bias;
  return k == "rms_norm" ? NormKind::rms_norm : NormKind::layer_norm;
}

// The sequence-parallel norm's config from `f` (norm_spec.cpp's to_json), at the manifest's
// token count. @throws cases::CaseError: a field of the wrong type, an unknown kind, eps not
// positive, a config tokens other than sizes.tokens.
SequenceParallelNormConfig sp_norm_config(const cases::CaseManifest& m, cases::Fields& f) {
  SequenceParallelNormConfig k;
  k.norm.kind = kind_or(f, "kind", k.norm.kind);
  k.norm.eps = f.number_or("eps", k.norm.eps);
  if (!(k.norm.eps > 0)) {
    f.fail("eps", "is " + std::to_string(k.norm.eps) + "; the norm needs eps > 0");
  }
  const std::size_t tokens = m.size("tokens");
  k.tokens = f.size_or("tokens", tokens);
  if (k.tokens != tokens) {
    f.fail("tokens", "is " + std::to_string(k.tokens) + " but sizes.tokens is " +
                         std::to_string(tokens) +
                         "; give the same token count or leave the config's out");
  }
  k.token_split = split_or(f, "token_split", k.token_split);
  k.reduce_algorithm = algorithm_or(f, "reduce_algorithm", k.reduce_algorithm);
  return k;
}

}  // namespace

NormCase case_of(const cases::CaseManifest& m, NormCase* /*tag*/) {
  NormCase c;
  c.op = NormOp::norm;
  c.dtype = m.dtype;
  c.world = m.world();
  c.hidden = m.size("hidden");
  cases::Fields f = m.config;
  c.block.norm = sp_norm_config(m, f);
  f.done();
  // The contract: how the kernel forms layer_norm's xhat (reference/norm/norm_bound.hpp).
  using reference::NormXhat;
  if (m.contract.empty()) {
    c.xhat_forms = {NormXhat::difference, NormXhat::fused};  // covers both kernels
  } else if (m.contract == "two_pass") {
    c.xhat_forms = {NormXhat::difference};
  } else if (m.contract == "fused_rstd_mean") {
    c.xhat_forms = {NormXhat::fused};
  } else {
    throw cases::CaseError(m.file + ": contract: is \"" + m.contract +
                           "\" but sequence_parallel_norm knows \"two_pass\" (xhat = (x − "
                           "mean)·rstd, as lib/ops/norm) and \"fused_rstd_mean\" (xhat = "
                           "fma(x, rstd, −rstd·mean), as PyTorch's CPU LayerNorm); omit the field "
                           "for a bound that covers both");
  }
  return c;
}

std::optional<std::string> contract_words(const NormCase& c, DType t) {
  using reference::NormXhat;
  const bool two = std::find(c.xhat_forms.begin(), c.xhat_forms.end(), NormXhat::difference) !=
                   c.xhat_forms.end();
  const bool fused =
      std::find(c.xhat_forms.begin(), c.xhat_forms.end(), NormXhat::fused) != c.xhat_forms.end();
  std::string xhat = two && fused ? "layer_norm's xhat as (x − mean)·rstd or as fma(x, rstd, "
                                    "−rstd·mean) (PyTorch's CPU kernel): the larger bound"
                     : fused      ? "contract fused_rstd_mean: layer_norm's xhat as fma(x, rstd, "
                                    "−rstd·mean) (PyTorch's CPU kernel)"
                                  : "contract two_pass: layer_norm's xhat as (x − mean)·rstd";
  return default_contract(t) + "; " + xhat + "; the variance in two passes";
}

template <class T>
void read_tensors(CaseReader& r, const NormCase& c, NormData<T>& d, NormRun<T>& run) {
  const bool beta = has_beta(c.kind());
  r.input("x", d.x);
  r.input("gamma", d.gamma);
  if (beta) r.input("beta", d.beta);
  read_upstream_gradient(r, "dy", d.dy, {c.tokens(), c.hidden}, {"dx", "dgamma", "dbeta"});
  read_listed_outputs<T>(r, c, run);
}

void register_norm_compare() {
  CompareRegistry::instance().add("sequence_parallel_norm",
                                  compare_as<NormCase, NormData, NormRun, &norm_mutants>);
}

}  // namespace shardcheck::check
