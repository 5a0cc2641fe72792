// One generated case of the model suite: the model, the mesh and every split of it, the batch,
// the optimizer and the parameters. Everything is drawn on the main thread before any rank runs.
#pragma once

#include "engine/steps.hpp"
#include "engine/suite.hpp"
#include "ops/model/model.hpp"
#include "ops/model/model_spec.hpp"
#include "reference/model/model_bound.hpp"
#include "suites/model/model_impl.hpp"
#include "tensor/tensor.hpp"

#include <rapidcheck.h>

#include <optional>
#include <string>

namespace shardcheck::check {

struct ModelCase {
  DType dtype = DType::float32;
  int world = 1;  // pp·dp·cp·tp
  ModelConfig cfg;
  ModelParallelConfig par;
  OptimizerConfig opt;
  std::size_t sequences = 1, seq_len = 1;

  // "layers=2 H=6 heads=4/2 d=3 ffn=5 V=7 layer_norm swiglu bias tied B=3 L=5 mesh (pp=2, dp=1,
  // cp=2, tp=2) ..." (every field).
  std::string describe() const;
};

// What a property pins of the draw.
struct ModelCaseOptions {
  std::optional<int> min_world;  // at least this many ranks (when max_world allows)
  std::optional<int> min_pp;     // at least this many pipeline stages
  std::optional<bool> clipping;  // max_grad_norm > 0 and below the norm's scale
  std::optional<bool> tied;      // tied_embedding
};

// The global tensors: the dense parameters (values of T, exact in R) and the batch (ids and
// targets).
template <class T>
struct ModelData {
  ModelParams<T> params;
  ModelBatch batch;
};

// What the suite expects of a case: the exact step in high precision with every result's bound
// on the case's mesh (reference/model/model_bound.hpp), and the partition it was evaluated on.
struct ModelExpected {
  reference::ModelExpected<reference::hp> step;
  reference::ModelPartition partition;
};

template <class T>
using ModelRun = RankRun<ModelStepResult<T>>;

// The partition the bound needs, derived from the case's mesh by the library's own layout
// functions (lib/ops/model/model.hpp): every op call's tokens, the sequence-parallel rows, the tp
// ranks' heads, ffn and vocabulary pieces, and the ring's key blocks.
reference::ModelPartition model_partition(const ModelCase& c);

// The declared traffic per mesh axis: every rank's ledger, call by call with the world ranks of
// the group it ran on, against the spec's calls with theirs (model_check.cpp).
template <class T>
void model_traffic_per_axis(CaseVerdict& v, const ModelCase& c, const ModelData<T>& d,
                            const ModelRun<T>& run);

// The steps (engine/steps.hpp): the draw, the data, the implementation on the ranks, the spec
// (ops/model/model_spec.hpp), the expected step, and every output checked (model_check.cpp).
SHARDCHECK_DECLARE_RANK_STEPS(ModelImplementation, ModelCase, ModelCaseOptions, ModelData, ModelRun,
                              ModelExpected)

}  // namespace shardcheck::check
