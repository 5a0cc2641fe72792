// The model's training step (lib/ops/model/model.hpp) on fixed meshes: what holds bit for bit
// (pipeline parallelism moves activations and gradients without touching their bits), the
// shards' placement, and the errors a caller can make.
#include "ops/model/model.hpp"

#include "engine/rank_family.hpp"
#include "engine/traffic.hpp"
#include "suites/model/model_case.hpp"
#include "suites/model/model_mutants.hpp"

#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace shardcheck {
namespace {

using test::random_tensor;

// random_tensor's values (|v| < 8) scaled by 2^-3 / 2^ceil(log2 sqrt(fan-in)): about the std of
// a real initialization, so that scores and activations stay O(1).
template <class T>
Tensor<T> scaled(Tensor<T> t, std::size_t fan_in) {
  const int e = 3 + static_cast<int>(std::ceil(std::log2(std::sqrt(double(fan_in)))));
  for (auto& v : t.values()) v = static_cast<T>(std::ldexp(double(v), -e));
  return t;
}

// Every parameter of model_param_shapes' list at random, scaled like an initialization.
template <class T>
ModelParams<T> random_model(const ModelConfig& c, std::uint64_t seed) {
  ModelParams<T> p;
  p.layers.resize(c.layers);
  ModelParams<double> shapes = model_param_shapes(c);
  for_each_param(p, shapes, [&](const std::string& n, Tensor<T>& t, const Tensor<double>& s) {
    if (s.ndim() == 0) return;
    const std::size_t fan_in = s.ndim() == 2 && n != "embedding" ? s.dim(1) : 1;
    t = scaled(random_tensor<T>(s.shape(), seed++), fan_in);
  });
  return p;
}

ModelBatch random_batch(const ModelConfig& c, std::size_t b, std::size_t l, std::uint64_t seed) {
  test::Rng rng(seed);
  ModelBatch batch{b, l, {}, {}};
  for (std::size_t i = 0; i < b * l; ++i) {
    batch.ids.push_back(static_cast<std::int64_t>(rng.below(c.vocab)));
    batch.targets.push_back(rng.below(5) == 0 ? -100
                                              : static_cast<std::int64_t>(rng.below(c.vocab)));
  }
  return batch;
}

// Three layers of width 6, GQA (4 query heads, 2 kv heads of 3), SwiGLU of 5, LayerNorm,
// biases, vocabulary 7.
ModelConfig small_model() {
  ModelConfig c;
  c.vocab = 7;
  c.hidden = 6;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = c.layers = 3;
  c.ffn = 5;
  c.activation = Activation::swiglu;
  c.linear_bias = true;
  return c;
}

template <class T>
std::vector<ModelStepResult<T>> step_on_mesh(const ModelConfig& c, const ModelParallelConfig& par,
                                             const OptimizerConfig& opt,
                                             const ModelParams<T>& dense, const ModelBatch& b) {
  const int world = par.pp * par.dp * par.cp * par.tp;
  std::vector<ModelParams<T>> shards;
  shards.reserve(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) shards.push_back(shard_model_params(c, par, dense, r));
  return test::on_ranks<ModelStepResult<T>>(world, [&](Communicator& comm) {
    return model_train_step(comm, c, par, opt, shards[static_cast<std::size_t>(comm.rank())], b);
  });
}

template <class T>
void expect_bit_equal(const ModelParams<T>& a, const ModelParams<T>& b, const std::string& what) {
  ASSERT_EQ(a.layers.size(), b.layers.size()) << what;
  auto eq = [&](const Tensor<T>& x, const Tensor<T>& y, const std::string& name) {
    EXPECT_TRUE(bit_equal(x, y)) << what << ": " << name;
  };
  eq(a.embedding, b.embedding, "embedding");
  eq(a.output, b.output, "output");
  eq(a.final_gamma, b.final_gamma, "final_gamma");
  eq(a.final_beta, b.final_beta, "final_beta");
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    const auto& x = a.layers[l];
    const auto& y = b.layers[l];
    const std::string n = "layer " + std::to_string(l) + " ";
    eq(x.norm1_gamma, y.norm1_gamma, n + "norm1_gamma");
    eq(x.wq, y.wq, n + "wq");
    eq(x.wk, y.wk, n + "wk");
    eq(x.wv, y.wv, n + "wv");
    eq(x.wo, y.wo, n + "wo");
    eq(x.bo, y.bo, n + "bo");
    eq(x.norm2_gamma, y.norm2_gamma, n + "norm2_gamma");
    eq(x.w_up, y.w_up, n + "w_up");
    eq(x.w_down, y.w_down, n + "w_down");
    eq(x.b_down, y.b_down, n + "b_down");
  }
}

// Stages only pass activations and gradients along: with the same micro-batches every bit of
// the loss, the gradients and the new parameters is the one-stage run's.
TEST(ModelStep, PipelineStagesChangeNoBit) {
  ModelConfig c = small_model();
  for (const bool tied : {false, true}) {
    c.tied_embedding = tied;
    const auto dense = random_model<double>(c, 11);
    const ModelBatch batch = random_batch(c, 3, 5, 12);
    const OptimizerConfig opt;  // no clipping: the norm's sum is grouped by stage
    ModelParallelConfig one;
    one.micro_batches = 2;
    const auto ref = step_on_mesh(c, one, opt, dense, batch);
    for (const int pp : {2, 3}) {
      for (const auto& split : {SplitPolicy::chunk(), SplitPolicy::explicit_sizes({2, 0, 1})}) {
        if (pp == 2 && split.kind() != SplitPolicy::Kind::chunk) continue;
        ModelParallelConfig par = one;
        par.pp = pp;
        par.layer_split = split;
        const auto got = step_on_mesh(c, par, opt, dense, batch);
        const std::string what = "pp=" + std::to_string(pp) + " tied=" + std::to_string(tied);
        EXPECT_EQ(*got.back().loss, *ref[0].loss) << what;
        for (int r = 0; r < pp; ++r) {
          const ModelParams<double> expect = shard_model_params(c, par, ref[0].params, r);
          expect_bit_equal(got[static_cast<std::size_t>(r)].params, expect,
                           what + " stage " + std::to_string(r));
        }
      }
    }
  }
}

// The shards' checks name the rank, what it holds and what to pass.
TEST(ModelStep, UsageErrorsNameTheRankAndTheFix) {
  const ModelConfig c = small_model();
  const auto dense = random_model<double>(c, 21);
  const ModelBatch batch = random_batch(c, 2, 3, 22);
  ModelParallelConfig par;
  par.pp = 2;
  std::vector<ModelParams<double>> shards{shard_model_params(c, par, dense, 0),
                                          shard_model_params(c, par, dense, 1)};
  auto step = [&](const std::vector<ModelParams<double>>& s, const ModelBatch& b) {
    return test::usage_error_of(2, [&](Communicator& comm) {
      model_train_step(comm, c, par, OptimizerConfig{}, s[static_cast<std::size_t>(comm.rank())],
                       b);
    });
  };
  // Rank 1 given rank 0's shard: its stage holds other layers and no embedding.
  const auto swapped = step({shards[0], shards[0]}, batch);
  EXPECT_EQ(swapped.rank, 1);
  test::expect_parts(swapped.message, {"model_train_step on rank 1", "pp 1", "holds 2 layers",
                                       "this stage holds 1", "pass shard_model_params' shard"});
  // A batch whose ids do not cover sequences·seq_len.
  ModelBatch short_batch = batch;
  short_batch.ids.pop_back();
  const auto bad = step(shards, short_batch);
  test::expect_parts(bad.message, {"the batch has 5 ids and 6 targets", "sequences·seq_len = 2·3",
                                   "pass one id and one target per token"});
  // More micro-batches than a count makes no sense for: 0.
  ModelParallelConfig zero = par;
  zero.micro_batches = 0;
  test::expect_parts(test::usage_error_of([&] { (void)micro_batch_pieces(zero, 3); }),
                     {"micro_batches is 0", "pass at least 1"});
  // A layer split that cannot cut the layers over the stages.
  ModelParallelConfig uneven = par;
  uneven.layer_split = SplitPolicy::explicit_sizes({1, 1});
  test::expect_parts(test::usage_error_of([&] { (void)shard_model_params(c, uneven, dense, 0); }),
                     {"layer_split", "cannot cut 3 into 2 pieces"});
}

// A reduction over a group of the right size but the wrong ranks: dp × cp = 2 × 2 summed over
// dp only moves the same counts, so the per-rank count check passes and the per-axis check
// names the group.
// One layer on dp = cp = 2, two sequences of 4 tokens, float64.
check::ModelCase dp_cp_case() {
  check::ModelCase c;
  c.dtype = DType::float64;
  c.cfg = small_model();
  c.cfg.layers = 1;
  c.par.dp = c.par.cp = 2;
  c.world = 4;
  c.sequences = 2;
  c.seq_len = 4;
  return c;
}

TEST(ModelTraffic, PerAxisCatchesAReductionOverTheWrongGroup) {
  const check::ModelCase c = dp_cp_case();
  check::ModelData<double> d{random_model<double>(c.cfg, 31), random_batch(c.cfg, 2, 4, 32)};
  std::shared_ptr<const check::ModelImplementation> impl;
  for (const auto& m : check::model_mutants()) {
    if (std::string(m.name) == "cp-grads-not-reduced") impl = m.make();
  }
  ASSERT_TRUE(impl);
  const auto run = check::run_ranks(*impl, c, d);
  ASSERT_TRUE(run.error.empty()) << run.error;
  EXPECT_EQ(
      check::check_traffic_per_rank(check::declared_calls(check::op_spec(c), c.dtype), run.ledgers),
      "");
  check::CaseVerdict v;
  check::model_traffic_per_axis(v, c, d, run);
  ASSERT_EQ(v.failures.size(), 1U);
  test::expect_parts(v.failures[0],
                     {"traffic per mesh axis: rank 0", "made all_reduce float64",
                      "over ranks {0,2}", "did not make the declared", "over dp_cp {0,1,2,3}"});
  // The library's step passes both.
  const auto ok = check::run_ranks(check::ModelAdapter<check::LibraryModel>(), c, d);
  check::CaseVerdict w;
  check::model_traffic_per_axis(w, c, d, ok);
  EXPECT_TRUE(w.failures.empty()) << w.failures.front();
}

// The same calls over the right groups by another algorithm move other bytes: the library's step
// with sequential all_reduces judged against a case that declares ring ones passes the call
// check and fails the per-axis bytes (budget/model_traffic.hpp).
TEST(ModelTraffic, PerAxisBytesCatchTheWrongAlgorithm) {
  const check::ModelCase c = dp_cp_case();
  check::ModelData<double> d{random_model<double>(c.cfg, 37), random_batch(c.cfg, 2, 4, 38)};
  check::ModelCase sequential = c;
  sequential.par.reduce_algorithm = Algorithm::sequential;
  const auto run = check::run_ranks(check::ModelAdapter<check::LibraryModel>(), sequential, d);
  ASSERT_TRUE(run.error.empty()) << run.error;
  check::CaseVerdict v;
  check::model_traffic_per_axis(v, c, d, run);
  ASSERT_EQ(v.failures.size(), 1U);
  test::expect_parts(v.failures[0], {"traffic per mesh axis: rank 0 moved", "dp_cp: ",
                                     "the traffic model (budget/model_traffic.hpp) says"});
}

}  // namespace
}  // namespace shardcheck
