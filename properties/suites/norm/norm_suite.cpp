// The norm suite: sequence-parallel LayerNorm / RMSNorm, and Megatron's sequence-parallel block
// around it, forward and backward, against the dense high-precision reference, the declared
// traffic, and the bit-exactness that holds by construction.
#include "suites/norm/norm_suite.hpp"

#include "engine/bit_identity.hpp"
#include "engine/slicing.hpp"
#include "engine/verdict.hpp"
#include "layout/materialize.hpp"
#include "suites/norm/norm_expected.hpp"
#include "suites/norm/norm_mutants.hpp"
#include "suites/norm/norm_run.hpp"

#include <rapidcheck.h>

namespace shardcheck::check {
namespace {

const std::vector<PropertyInfo>& norm_properties() {
  static const std::vector<PropertyInfo> props = {
      {"matches_reference",
       "sequence_parallel_norm (layer_norm with and without bias, rms_norm) and Megatron's SP "
       "block (norm, g, column-parallel, row-parallel, ḡ), forward and backward (y, dx, dgamma, "
       "dbeta, dW1, dW2), equal the dense high-precision reference within the rounding-error "
       "bound on every element, for any world size, uneven token split (empty ranks included), "
       "shape and element type",
       /*numeric=*/true},
      {"block_matches_reference",
       "the same, for Megatron's sequence-parallel block only, with P >= 2", /*numeric=*/true},
      {"declared_traffic",
       "every rank's ledger shows exactly the collectives the op declares: one all_reduce of "
       "the parameter gradients (and for the block the g/ḡ all_gathers and reduce_scatters), "
       "no more and no fewer"},
      {"param_grads_bit_identical",
       "dgamma and dbeta, after the all_reduce, are bit-identical on every rank (P >= 2)"},
      {"forward_local_bit_identical",
       "the sequence-parallel forward and dx are local per token: each rank reproduces the "
       "dense norm's bits (lib/ops/norm/norm.hpp) for its tokens in the same type"},
  };
  return props;
}

template <class T>
void add_checks(CaseVerdict& v, const NormCase& c, const NormRun<T>& run, const NormExpected& e) {
  const auto pl = norm_placements(c);
  auto one = [&](const char* name, auto member, const Placement& p, const ExpectedTensor& x) {
    std::vector<Tensor<T>> pieces;
    for (const auto& o : run.outputs) pieces.push_back(o.*member);
    v.tensors.push_back(check_pieces<T>(name, pieces, p, x, c.world));
  };
  using O = BlockRankOutputs<T>;
  one("y", &O::y, pl.y, e.y);
  one("dx", &O::dx, pl.dx, e.dx);
  one("dgamma", &O::dgamma, pl.dgamma, e.dgamma);
  if (has_beta(c.kind())) one("dbeta", &O::dbeta, pl.dbeta, e.dbeta);
  if (c.op == NormOp::block) {
    one("dw1", &O::dw1, pl.dw1, e.dw1);
    one("dw2", &O::dw2, pl.dw2, e.dw2);
  }
}

template <class T>
void run_typed(const std::string& property, const NormImplementation& impl, const NormCase& c) {
  const NormData<T> d = *genNormData<T>(c);
  const NormRun<T> run = run_norm(impl, c, d);
  CaseVerdict v;
  if (!begin_verdict(v, to_string(c.op), c.dtype, c.world, c.describe(), run.error)) return;
  if (property == "declared_traffic") {
    if (auto f = check_traffic(norm_declared_traffic(c), run.ledgers); !f.empty()) {
      v.failures.push_back(f);
    }
  } else if (property == "forward_local_bit_identical") {
    const auto& cfg = c.norm();
    for (int r = 0; r < c.world; ++r) {
      const Tensor<T> xr = shard(d.x, 0, cfg.token_split, c.world, r);
      const Tensor<T> dyr = shard(d.dy, 0, cfg.token_split, c.world, r);
      const auto& o = run.outputs[static_cast<std::size_t>(r)];
      const Tensor<T> y = norm_forward(cfg.norm, xr, d.gamma, d.beta);
      const auto g = norm_backward(cfg.norm, xr, d.gamma, dyr);
      for (const auto& f : {first_bit_difference("y", r, o.y, y, "the dense norm"),
                            first_bit_difference("dx", r, o.dx, g.dx, "the dense norm")}) {
        if (!f.empty()) v.failures.push_back(f);
      }
    }
  } else {
    add_checks(v, c, run, norm_expected(c, d));
    if (property == "param_grads_bit_identical") {
      keep_only_divergence(v);
    }
  }
  conclude(v);
}

}  // namespace

std::string NormSuite::name() const { return "norm"; }

std::string NormSuite::description() const {
  return "sequence-parallel LayerNorm/RMSNorm and Megatron's sequence-parallel block, forward "
         "and backward";
}

std::vector<PropertyInfo> NormSuite::properties() const { return norm_properties(); }

bool NormSuite::applies(const std::string& property, const std::string& impl) const {
  if (property != "forward_local_bit_identical") return true;
  return deterministic(impl);
}

void NormSuite::run_case(const std::string& property, const std::string& impl,
                         const RunConfig& config) const {
  const NormImplementation& target = implementation(impl);
  NormCaseOptions options;
  if (property == "block_matches_reference") {
    options.op = NormOp::block;
    options.min_world = 2;
  } else if (property == "forward_local_bit_identical") {
    options.op = NormOp::norm;
  } else if (property == "param_grads_bit_identical") {
    options.min_world = 2;
  }
  const NormCase c = *genNormCase(config, options);
  visit_float_dtype(c.dtype, [&]<class T>(T) { run_typed<T>(property, target, c); });
}

void register_norm_suite() {
  register_builtin_suite<NormSuite>(
      "the library's own ops (lib/ops/norm/norm.hpp; the block with lib/ops/linear/linear.hpp and the case's "
      "kernel)",
      std::make_shared<NormAdapter<LibraryNorm>>(), register_norm_mutants);
}

}  // namespace shardcheck::check
