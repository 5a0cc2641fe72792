// The norm suite: sequence-parallel LayerNorm / RMSNorm, and Megatron's sequence-parallel block
// around it, forward and backward, against the dense high-precision reference, the declared
// traffic, and the bit-exactness that holds by construction.
#include "suites/norm/norm_suite.hpp"

#include "engine/bit_identity.hpp"
#include "engine/instantiate.hpp"
#include "engine/rank_family.hpp"
#include "engine/slicing.hpp"
#include "engine/verdict.hpp"
#include "layout/materialize.hpp"
#include "suites/norm/norm_case.hpp"
#include "suites/norm/norm_mutants.hpp"

#include <rapidcheck.h>

namespace shardcheck::check {

// Every output of the op (for_each_output, norm_case.hpp), materialized by its spec's placement,
// against the reference (found by the engine beside the case type: engine/rank_family.hpp).
SHARDCHECK_CHECK_LISTED_OUTPUTS(NormCase, NormRun, NormExpected)

namespace {

// The sequence-parallel forward and dx are local per token: each rank's bits against the dense
// norm of its tokens in the same type.
enum class NormOwnCheck { forward_local_bits };

template <class T>
void own_check(NormOwnCheck /*own*/, CaseVerdict& v, const NormCase& c, const NormData<T>& d,
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

struct NormFamily : RankFamily<NormFamily, NormImplementation, NormCase, NormCaseOptions, NormData,
                               NormOwnCheck> {
  static constexpr FamilyInfo info = {
      "norm",
      "sequence-parallel LayerNorm/RMSNorm and Megatron's sequence-parallel block, forward and "
      "backward",
      "the library's own ops (lib/ops/norm/norm.hpp; the block with lib/ops/linear/linear.hpp and "
      "the case's kernel)"};

  static constexpr Row properties[] = {
      reference_property(
          "matches_reference",
          "sequence_parallel_norm (layer_norm with and without bias, rms_norm) and Megatron's SP "
          "block (norm, g, column-parallel, row-parallel, ḡ), forward and backward (y, dx, "
          "dgamma, dbeta, dW1, dW2), equal the dense high-precision reference within the "
          "rounding-error bound on every element, for any world size, uneven token split (empty "
          "ranks included), shape and element type"),
      reference_property("block_matches_reference",
                         "the same, for Megatron's sequence-parallel block only, with P >= 2",
                         pin_fields<&Options::op, NormOp::block, &Options::min_world, 2>),
      traffic_property(
          "every rank's ledger shows exactly the collectives the op declares: one all_reduce of "
          "the parameter gradients (and for the block the g/ḡ all_gathers and reduce_scatters), "
          "no more and no fewer"),
      {{"param_grads_bit_identical",
        "dgamma and dbeta, after the all_reduce, are bit-identical on every rank (P >= 2)"},
       Check::replicated_bit_identical,
       pin_min_world<2>},
      own_property({"forward_local_bit_identical",
                    "the sequence-parallel forward and dx are local per token: each rank "
                    "reproduces the dense norm's bits (lib/ops/norm/norm.hpp) for its tokens in "
                    "the same type"},
                   Own::forward_local_bits, pin_op<NormOp::norm>,
                   /*deterministic_only=*/true),
  };

  using Library = NormAdapter<LibraryNorm>;
  static constexpr auto mutants = norm_mutants;
};

}  // namespace

void register_norm_suite() { register_family<NormFamily>(); }

}  // namespace shardcheck::check
