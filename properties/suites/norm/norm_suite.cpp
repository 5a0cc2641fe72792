// The norm suite: sequence-parallel LayerNorm / RMSNorm, and Megatron's sequence-parallel block
// around it, forward and backward, against the dense high-precision reference, the declared
// traffic, and the bit-exactness that holds by construction.
#include "suites/norm/norm_suite.hpp"

#include "engine/bit_identity.hpp"
#include "engine/rank_family.hpp"
#include "engine/slicing.hpp"
#include "engine/verdict.hpp"
#include "layout/materialize.hpp"
#include "suites/norm/norm_expected.hpp"
#include "suites/norm/norm_mutants.hpp"
#include "suites/norm/norm_run.hpp"

#include <rapidcheck.h>

namespace shardcheck::check {
namespace {

template <class T>
void norm_checks(CaseVerdict& v, const NormCase& c, const NormRun<T>& run, const NormExpected& e) {
  const auto pl = norm_placements(c);
  using O = BlockRankOutputs<T>;
  auto one = [&](const char* name, Tensor<T> O::*member, const Placement& p,
                 const ExpectedTensor& x) {
    v.tensors.push_back(check_pieces<T>(name, pieces_of(run.outputs, member), p, x, c.world));
  };
  one("y", &O::y, pl.y, e.y);
  one("dx", &O::dx, pl.dx, e.dx);
  one("dgamma", &O::dgamma, pl.dgamma, e.dgamma);
  if (has_beta(c.kind())) one("dbeta", &O::dbeta, pl.dbeta, e.dbeta);
  if (c.op == NormOp::block) {
    one("dw1", &O::dw1, pl.dw1, e.dw1);
    one("dw2", &O::dw2, pl.dw2, e.dw2);
  }
}

// The sequence-parallel forward and dx are local per token: each rank's bits against the dense
// norm of its tokens in the same type.
enum class NormOwnCheck { forward_local_bits };

template <class T>
void forward_local_bits(CaseVerdict& v, const NormCase& c, const NormData<T>& d,
                        const NormRun<T>& run) {
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
}

struct NormFamily : RankFamily<NormFamily> {
  using Interface = NormImplementation;
  using Case = NormCase;
  using Options = NormCaseOptions;
  using Own = NormOwnCheck;
  template <class T>
  using Data = NormData<T>;

  static constexpr const char* name = "norm";
  static constexpr const char* description =
      "sequence-parallel LayerNorm/RMSNorm and Megatron's sequence-parallel block, forward and "
      "backward";
  static constexpr const char* library_description =
      "the library's own ops (lib/ops/norm/norm.hpp; the block with lib/ops/linear/linear.hpp and "
      "the case's kernel)";

  static const std::vector<Property<NormFamily>>& properties() {
    static const std::vector<Property<NormFamily>> table = {
        {{"matches_reference",
          "sequence_parallel_norm (layer_norm with and without bias, rms_norm) and Megatron's SP "
          "block (norm, g, column-parallel, row-parallel, ḡ), forward and backward (y, dx, "
          "dgamma, dbeta, dW1, dW2), equal the dense high-precision reference within the "
          "rounding-error bound on every element, for any world size, uneven token split (empty "
          "ranks included), shape and element type",
          /*numeric=*/true},
         Check::reference},
        {{"block_matches_reference",
          "the same, for Megatron's sequence-parallel block only, with P >= 2", /*numeric=*/true},
         Check::reference,
         [](Options& o, const RunConfig&) {
           o.op = NormOp::block;
           o.min_world = 2;
         }},
        {{"declared_traffic",
          "every rank's ledger shows exactly the collectives the op declares: one all_reduce of "
          "the parameter gradients (and for the block the g/ḡ all_gathers and reduce_scatters), "
          "no more and no fewer"},
         Check::traffic},
        {{"param_grads_bit_identical",
          "dgamma and dbeta, after the all_reduce, are bit-identical on every rank (P >= 2)"},
         Check::replicated_bit_identical,
         [](Options& o, const RunConfig&) { o.min_world = 2; }},
        {{"forward_local_bit_identical",
          "the sequence-parallel forward and dx are local per token: each rank reproduces the "
          "dense norm's bits (lib/ops/norm/norm.hpp) for its tokens in the same type"},
         Check::own,
         [](Options& o, const RunConfig&) { o.op = NormOp::norm; },
         /*deterministic_only=*/true,
         Own::forward_local_bits},
    };
    return table;
  }

  static std::shared_ptr<const Interface> library() {
    return std::make_shared<const NormAdapter<LibraryNorm>>();
  }
  static std::span<const Mutant<Interface>> mutants() { return norm_mutants(); }

  static rc::Gen<Case> gen_case(const RunConfig& config, const Options& options) {
    return genNormCase(config, options);
  }
  static int world(const Case& c) { return c.world; }
  static std::string op_name(const Case& c) { return to_string(c.op); }

  template <class T>
  static rc::Gen<Data<T>> gen_data(const Case& c) {
    return genNormData<T>(c);
  }
  template <class T>
  static NormRun<T> run(const Interface& impl, const Case& c, const Data<T>& d) {
    return run_norm(impl, c, d);
  }
  static std::vector<std::vector<DeclaredCall>> declared_traffic(const Case& c) {
    return norm_declared_traffic(c);
  }
  template <class T>
  static NormExpected expected(const Case& c, const Data<T>& d) {
    return norm_expected(c, d);
  }
  template <class T>
  static void add_checks(CaseVerdict& v, const Case& c, const NormRun<T>& run,
                         const NormExpected& e) {
    norm_checks(v, c, run, e);
  }
  template <class T>
  static void own_check(Own, CaseVerdict& v, const Case& c, const Data<T>& d,
                        const NormRun<T>& run) {
    forward_local_bits(v, c, d, run);
  }
};

}  // namespace

void register_norm_suite() { register_family<NormFamily>(); }

}  // namespace shardcheck::check
