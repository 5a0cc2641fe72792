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
  return c;
}

template <class T>
void read_tensors(CaseReader& r, const NormCase& c, NormData<T>& d, NormRun<T>& run) {
  using O = BlockRankOutputs<T>;
  auto& out = run.outputs;
  const bool beta = has_beta(c.kind());
  r.input("x", d.x);
  r.input("gamma", d.gamma);
  if (beta) r.input("beta", d.beta);
  read_upstream_gradient(r, "dy", d.dy, {c.tokens(), c.hidden}, {"dx", "dgamma", "dbeta"});
  r.output("y", out, &O::y);
  r.output("dx", out, &O::dx);
  r.output("dgamma", out, &O::dgamma);
  if (beta) r.output("dbeta", out, &O::dbeta);
}

void register_norm_compare() {
  CompareRegistry::instance().add("sequence_parallel_norm",
                                  compare_as<NormCase, NormData, NormRun, &norm_mutants>);
}

}  // namespace shardcheck::check
