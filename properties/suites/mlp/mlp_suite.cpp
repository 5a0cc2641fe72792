// The mlp suite: Megatron-LM's ParallelMLP (column-parallel fc1, activation, row-parallel fc2),
// forward and backward, against the dense high-precision reference under its derived bound, the
// declared traffic, and the bit-identity of what every rank holds.
#include "suites/mlp/mlp_suite.hpp"

#include "engine/instantiate.hpp"
#include "engine/rank_family.hpp"
#include "engine/verdict.hpp"
#include "suites/mlp/mlp_case.hpp"
#include "suites/mlp/mlp_mutants.hpp"

#include <rapidcheck.h>

namespace shardcheck::check {

// Every output of the op (for_each_output, mlp_case.hpp), materialized by its spec's placement,
// against the reference (found by the engine beside the case type: engine/rank_family.hpp).
SHARDCHECK_CHECK_LISTED_OUTPUTS(MlpCase, MlpRun, MlpExpected)

namespace {

struct MlpFamily : RankFamily<MlpFamily, MlpImplementation, MlpCase, MlpCaseOptions, MlpData> {
  static constexpr FamilyInfo info = {
      "mlp",
      "Megatron-LM's ParallelMLP (column-parallel fc1, gelu / gelu_tanh / swiglu, row-parallel "
      "fc2), forward and backward, with and without sequence parallelism",
      "the library's own ParallelMLP (lib/ops/mlp/mlp.hpp), composed of its linear layers"};

  static constexpr Row properties[] = {
      reference_property(
          "matches_reference",
          "parallel_mlp and its backward (y, dx, the gradients of every weight and bias) equal "
          "the dense high-precision reference within the derived bound on every element, for "
          "every activation, with and without sequence parallelism, any element type, world "
          "size and (uneven, empty) ffn split"),
      reference_property(
          "swiglu_matches_reference",
          "the same for swiglu only: the fused [Wg_r; Wu_r] fc1 of every rank, its gate and up "
          "gradients",
          pin_fields<&Options::activation, Activation::swiglu>),
      reference_property(
          "sequence_parallel_matches_reference",
          "the same with sequence parallelism only: x and dy arrive as token shards, y and dx "
          "leave as token shards",
          pin_fields<&Options::sequence_parallel, true>),
      traffic_property(
          "every rank's ledger shows exactly the collectives ParallelMLP declares (two "
          "all_reduces, or with sequence parallelism three all_gathers and two reduce_scatters), "
          "no more and no fewer"),
      replication_property(
          "results that every rank holds (y and dx after their all_reduce, db_down) are "
          "bit-identical on every rank"),
  };

  using Library = MlpAdapter<LibraryMlp>;
  static constexpr auto mutants = mlp_mutants;
};

}  // namespace

void register_mlp_suite() { register_family<MlpFamily>(); }

}  // namespace shardcheck::check
