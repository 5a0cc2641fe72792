// The model suite: one training step (forward, backward, finalize, clip, SGD) of a small
// decoder-only transformer partitioned over a generated pp × dp × cp × tp mesh, against the dense
// high-precision step under the composed bound (reference/model/model_bound.hpp), the bits every
// copy of a replicated result must share, and the collectives the step declares.
#include "suites/model/model_suite.hpp"

#include "engine/rank_family.hpp"
#include "suites/model/model_case.hpp"
#include "suites/model/model_mutants.hpp"

namespace shardcheck::check {
namespace {

// The model's own check: the traffic per mesh axis (model_check.cpp), found by the engine
// beside the case type (engine/rank_family.hpp).
enum class ModelOwnCheck { traffic_per_axis };

template <class T>
void own_check(ModelOwnCheck, CaseVerdict& v, const ModelCase& c, const ModelData<T>& d,
               const ModelRun<T>& run) {
  model_traffic_per_axis(v, c, d, run);
}

struct ModelFamily : RankFamily<ModelFamily, ModelImplementation, ModelCase, ModelCaseOptions,
                                ModelData, ModelOwnCheck> {
  static constexpr FamilyInfo info = {
      "model",
      "one training step of a decoder-only transformer on a pp × dp × cp × tp mesh: loss, every "
      "gradient after every reduction, the global norm, clipping and the SGD step",
      "the library's step (lib/ops/model/model.hpp: the families' ops composed, GPipe schedule, "
      "Megatron-LM's finalize)"};

  static constexpr Row properties[] = {
      reference_property(
          "matches_reference",
          "one training step on any mesh the generator draws (uneven layers, sequences, "
          "micro-batches, positions, heads, ffn and vocabulary, empty ranks, sequence and context "
          "parallelism, tied embeddings, ignored targets): the loss, every parameter gradient as "
          "each rank holds it after every reduction, the input gradient, the global gradient "
          "norm, the clip coefficient and every parameter after SGD equal the dense "
          "high-precision step within the composed rounding-error bound"),
      reference_property("pipeline_matches_reference",
                         "the same with at least two pipeline stages (activations and their "
                         "gradients passed by send/recv, the tied embedding's copies on two "
                         "stages)",
                         pin_fields<&Options::min_pp, 2>),
      {{"replicated_bit_identical",
        "every copy of a replicated result is bit-identical: the loss on the last stage's "
        "ranks, the norm and the coefficient everywhere, a parameter replicated over tp, dp, "
        "cp or the embedding group and its gradient on every rank that holds it (P >= 2)"},
       Check::replicated_bit_identical,
       pin_min_world<2>},
      traffic_property(
          "every rank's ledger shows exactly the collectives and the send/recv the step declares "
          "(ops/model/model_spec.hpp: the ops' own, the stages' messages, the finalize's "
          "all_reduces over dp × cp and the embedding group, the loss's and the norm's), no more "
          "and no fewer"),
      own_property({"traffic_per_mesh_axis",
                    "the same call by call with the group each ran on: every collective and "
                    "message on the mesh axis (tp, cp, pp, dp × cp, tp × pp, the kv group, the "
                    "embedding group) the spec declares it on"},
                   ModelOwnCheck::traffic_per_axis),
  };

  using Library = ModelAdapter<LibraryModel>;
  static constexpr auto mutants = model_mutants;
};

}  // namespace

void register_model_suite() { register_family<ModelFamily>(); }

}  // namespace shardcheck::check
