// The mlp suite: Megatron-LM's ParallelMLP (column-parallel fc1, activation, row-parallel fc2),
// forward and backward, against the dense high-precision reference under its derived bound, the
// declared traffic, and the bit-identity of what every rank holds.
#include "suites/mlp/mlp_suite.hpp"

#include "engine/rank_family.hpp"
#include "engine/verdict.hpp"
#include "suites/mlp/mlp_expected.hpp"
#include "suites/mlp/mlp_mutants.hpp"
#include "suites/mlp/mlp_run.hpp"

#include <rapidcheck.h>

namespace shardcheck::check {
namespace {

template <class T>
void mlp_checks(CaseVerdict& v, const MlpCase& c, const MlpRun<T>& run, const MlpExpected& e) {
  const auto pl = mlp_placements(c);
  using O = MlpRankOutputs<T>;
  const OutputChecks one{v, run.outputs, c.world};
  const bool swiglu = c.cfg.activation == Activation::swiglu;
  one("y", &O::y, pl.y, e.y);
  one("dx", &O::dx, pl.dx, e.dx);
  if (swiglu) one("dw_gate", &O::dw_gate, pl.dw_gate, e.dw_gate);
  one("dw_up", &O::dw_up, pl.dw_up, e.dw_up);
  one("dw_down", &O::dw_down, pl.dw_down, e.dw_down);
  if (c.has_bias) {
    if (swiglu) one("db_gate", &O::db_gate, pl.db_gate, e.db_gate);
    one("db_up", &O::db_up, pl.db_up, e.db_up);
    one("db_down", &O::db_down, pl.db_down, e.db_down);
  }
}

struct MlpFamily : RankFamily<MlpFamily, MlpImplementation, MlpCase, MlpCaseOptions, MlpData> {
  static constexpr const char* name = "mlp";
  static constexpr const char* description =
      "Megatron-LM's ParallelMLP (column-parallel fc1, gelu / gelu_tanh / swiglu, row-parallel "
      "fc2), forward and backward, with and without sequence parallelism";
  static constexpr const char* library_description =
      "the library's own ParallelMLP (lib/ops/mlp/mlp.hpp), composed of its linear layers";

  static const std::vector<Property<MlpFamily>>& properties() {
    static const std::vector<Property<MlpFamily>> table = {
        {{"matches_reference",
          "parallel_mlp and its backward (y, dx, the gradients of every weight and bias) equal "
          "the dense high-precision reference within the derived bound on every element, for "
          "every activation, with and without sequence parallelism, any element type, world "
          "size and (uneven, empty) ffn split",
          /*numeric=*/true},
         Check::reference},
        {{"swiglu_matches_reference",
          "the same for swiglu only: the fused [Wg_r; Wu_r] fc1 of every rank, its gate and up "
          "gradients",
          /*numeric=*/true},
         Check::reference,
         [](Options& o, const RunConfig&) { o.activation = Activation::swiglu; }},
        {{"sequence_parallel_matches_reference",
          "the same with sequence parallelism only: x and dy arrive as token shards, y and dx "
          "leave as token shards",
          /*numeric=*/true},
         Check::reference,
         [](Options& o, const RunConfig&) { o.sequence_parallel = true; }},
        {{"declared_traffic",
          "every rank's ledger shows exactly the collectives ParallelMLP declares (two "
          "all_reduces, or with sequence parallelism three all_gathers and two reduce_scatters), "
          "no more and no fewer"},
         Check::traffic},
        {{"replicated_bit_identical",
          "results that every rank holds (y and dx after their all_reduce, db_down) are "
          "bit-identical on every rank"},
         Check::replicated_bit_identical,
         pin_several_ranks<Options>},
    };
    return table;
  }

  using Library = MlpAdapter<LibraryMlp>;
  static constexpr auto mutants = mlp_mutants;
  static constexpr auto gen_case = genMlpCase;
  static std::string op_name(const Case&) { return "parallel_mlp"; }

  template <class T>
  static constexpr auto gen_data = genMlpData<T>;
  template <class T>
  static constexpr auto run = run_mlp<T>;
  static constexpr auto declared_traffic = mlp_declared_traffic;
  template <class T>
  static constexpr auto expected = mlp_expected<T>;
  template <class T>
  static constexpr auto add_checks = mlp_checks<T>;
};

}  // namespace

void register_mlp_suite() { register_family<MlpFamily>(); }

}  // namespace shardcheck::check
