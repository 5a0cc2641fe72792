// model_local_param_shapes (ops/model/model.hpp) against shard_model_params: on the model suite's
// draw (every mesh, uneven vocab, ffn and head splits, GQA, swiglu, biases, betas, tied
// embeddings, empty stages), every rank's shapes, names and order are those of its shards; and on
// one rank they are the dense parameters' (model_param_shapes), which model_train_step_spec reads
// them as.
#include "ops/model/model.hpp"
#include "suites/model/model_case.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <vector>

namespace shardcheck::check {
namespace {

RC_GTEST_PROP(ModelLocalParamShapes, AreShardModelParamsShapesOnEveryRank, ()) {
  const ModelCase c = *gen_case(RunConfig{}, ModelCaseOptions{});
  const ModelParams<double> dense = model_param_shapes(c.cfg);
  for (int r = 0; r < c.world; ++r) {
    ModelParams<double> shard = shard_model_params(c.cfg, c.par, dense, r);
    std::vector<NamedShape> want;
    for_each_param(shard, shard, [&](const std::string& n, const Tensor<double>& t, auto&) {
      want.push_back({n, t.ndim() == 0 ? Shape{} : t.shape()});
    });
    const std::vector<NamedShape> got = model_local_param_shapes(c.cfg, c.par, r);
    RC_ASSERT(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (got[i].name != want[i].name || got[i].shape != want[i].shape) {
        RC_FAIL("rank " + std::to_string(r) + " of " + c.describe() + ": " + got[i].name + " " +
                format_shape(got[i].shape) + ", shard_model_params gives " + want[i].name + " " +
                format_shape(want[i].shape));
      }
    }
  }
}

RC_GTEST_PROP(ModelLocalParamShapes, OnOneRankAreTheDenseParameters, ()) {
  const ModelCase c = *gen_case(RunConfig{}, ModelCaseOptions{});
  ModelParams<double> dense = model_param_shapes(c.cfg);
  std::vector<NamedShape> want;
  for_each_param(dense, dense, [&](const std::string& n, const Tensor<double>& t, auto&) {
    want.push_back({n, t.ndim() == 0 ? Shape{} : t.shape()});
  });
  const std::vector<NamedShape> got = model_local_param_shapes(c.cfg, ModelParallelConfig{}, 0);
  RC_ASSERT(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    RC_ASSERT(got[i].name == want[i].name);
    RC_ASSERT(got[i].shape == want[i].shape);
  }
}

}  // namespace
}  // namespace shardcheck::check
