// Bugs at the seams of a partitioned training step, each the library's ModelRankStep with one
// step replaced (lib/ops/model/model_step.hpp names the steps).
#include "suites/model/model_mutants.hpp"

#include "ops/model/model_step.hpp"
#include "suites/model/model_case.hpp"

#include <array>

namespace shardcheck::check {
namespace {

// A mutant implementation: the library's step, run by the subclass Step<T>.
template <template <class> class Step>
struct StepMutant {
  template <class T>
  ModelStepResult<T> train_step(Communicator& world, const ModelCase& c,
                                const ModelData<T>& d) const {
    const ModelParams<T> shard = shard_model_params(c.cfg, c.par, d.params, world.rank());
    Step<T> step(world, c.cfg, c.par, shard, d.batch);
    return step.run(c.opt);
  }
};

// The data-parallel sum averaged too: the per-token loss already divides by the global token
// count, and a DDP "average" on top divides the gradient by dp·cp again (the loss-scaling
// confusion behind torchtitan #3280's TP2×CP2 loss half of TP4's).
template <class T>
struct GradsAveragedTwice : ModelRankStep<T> {
  using Base = ModelRankStep<T>;
  using Base::Base;
  using typename Base::A;
  void scale_by_tokens(std::size_t n) override {
    Base::scale_by_tokens(n);
    this->scale_grads(A(1) / static_cast<A>(this->par_.dp * this->par_.cp));
  }
};

// Gradients summed over dp only: the cp ranks saw other tokens of the same sequences, and their
// partial gradients are never added (context parallelism bolted onto a DDP that knows only dp).
template <class T>
struct CpGradsNotReduced : ModelRankStep<T> {
  using Base = ModelRankStep<T>;
  using Base::Base;
  Communicator& data_parallel_group(const std::string&) override {
    return this->groups_.mesh.along("dp");
  }
};

// A tied embedding whose two copies' gradients are never summed: the first stage steps with the
// embedding's gradient alone and the last stage with the output projection's (Megatron-LM's
// embedding group all_reduce left out).
template <class T>
struct TiedEmbeddingNotSummed : ModelRankStep<T> {
  using Base = ModelRankStep<T>;
  using Base::Base;
  void sum_tied_embedding() override {}
};

// Gradient accumulation over micro-batches that overwrites instead of adding: only the last
// micro-batch's backward survives.
template <class T>
struct AccumulationOverwrites : ModelRankStep<T> {
  using Base = ModelRankStep<T>;
  using Base::Base;
  using typename Base::A;
  void accumulate(Tensor<A>& acc, const Tensor<T>& g) override {
    for (std::size_t i = 0; i < g.size(); ++i) acc[i] = static_cast<A>(g[i]);
  }
};

// A stage that computes micro-batch k on the activation it received for micro-batch k − 1 (a
// receive buffer reused one step late), when the two have the same shape.
template <class T>
struct StaleMicroBatchActivation : ModelRankStep<T> {
  using Base = ModelRankStep<T>;
  using Base::Base;
  Tensor<T> stage_input(std::size_t k) override {
    Tensor<T> x = Base::stage_input(k);
    if (this->coords_.first_stage()) return x;
    Tensor<T> use = previous_.shape() == x.shape() && k > 0 ? previous_ : x;
    previous_ = std::move(x);
    return use;
  }
  Tensor<T> previous_;
};

// The loss averaged per micro-batch, then the micro-batches and the data-parallel ranks averaged
// again: every micro-batch weighs the same whatever its token count, so a micro-batch with few
// non-ignored tokens pulls too hard (Megatron-LM's loss before calculate_per_token_loss).
template <class T>
struct LossAveragedPerMicroBatch : ModelRankStep<T> {
  using Base = ModelRankStep<T>;
  using Base::Base;
  using typename Base::A;
  Tensor<T> loss_seed(std::size_t k) override {
    std::size_t n = 0;
    for (const std::int64_t t : this->micro_[k].targets) {
      n += !this->cfg_.ignore_index || t != *this->cfg_.ignore_index;
    }
    return Tensor<T>(Shape{1}, std::vector<T>{n == 0 ? T(0) : static_cast<T>(1.0 / n)});
  }
  void scale_by_tokens(std::size_t) override {
    this->scale_grads(A(1) / static_cast<A>(this->micro_.size() * this->par_.dp * this->par_.cp));
  }
};

// The norms' parameter gradients summed over dp but not over cp (the norms are replicated
// everywhere, so a sum over "the other data-parallel group" is easy to miss for them).
template <class T>
struct NormGradsNotReducedOverCp : ModelRankStep<T> {
  using Base = ModelRankStep<T>;
  using Base::Base;
  Communicator& data_parallel_group(const std::string& n) override {
    const bool norm = n.find("norm") != std::string::npos || n.rfind("final_", 0) == 0;
    return norm ? this->groups_.mesh.along("dp") : Base::data_parallel_group(n);
  }
};

// The optimizer steps on the rank's own gradients before the data-parallel all_reduce (the
// step hooked to the backward, ahead of the reduction): each dp × cp rank moves its parameters
// by its own tokens' gradient, and the replicas drift apart.
template <class T>
struct StepBeforeAllReduce : ModelRankStep<T> {
  using Base = ModelRankStep<T>;
  using Base::Base;
  using typename Base::A;
  void reduce_over_data_parallel() override {
    local_ = this->grads_;
    Base::reduce_over_data_parallel();
  }
  ModelParams<T> sgd(const OptimizerConfig& opt, A coef) override {
    ModelParams<A> reduced = std::move(this->grads_);
    this->grads_ = local_;
    const std::size_t n = this->count_tokens();
    Base::scale_by_tokens(n);
    ModelParams<T> p = Base::sgd(opt, coef);
    this->grads_ = std::move(reduced);
    return p;
  }
  ModelParams<A> local_;
};

// A parameter replicated over tp (the norms, bo, b_down) counted in the global norm once per tp
// rank: the norm comes out too large and clipping too strong (ROCm/TransformerEngine #715,
// NVIDIA-NeMo/RL #3788: the gradient norm inflated 1.52×).
template <class T>
struct ReplicatedNormCountedPerTpRank : ModelRankStep<T> {
  using Base = ModelRankStep<T>;
  using Base::Base;
  bool counted_in_norm(const std::string& name) const override {
    return name != "output" || !this->cfg_.tied_embedding;
  }
};

// The loss reported from the rank's own tokens only: the last stage never sums the loss over
// dp × cp.
template <class T>
struct LossNotReducedOverDp : ModelRankStep<T> {
  using Base = ModelRankStep<T>;
  using Base::Base;
  using typename Base::A;
  A global_loss(std::size_t n) override {
    return n == 0 ? A(0) : this->loss_sum_ / static_cast<A>(n);
  }
};

// Under sequence parallelism, the norms' gamma/beta gradients left as each tp rank's partial
// sum over its own token rows (Megatron-LM's SP LayerNorm gradients never all_reduced over tp:
// NVIDIA/Megatron-LM #1446 saw them differ across tp ranks).
template <class T>
struct SpNormGradsNotReduced : ModelRankStep<T> {
  using Base = ModelRankStep<T>;
  using Base::Base;
  NormGrads<T> norm_grads(std::size_t k, const Tensor<T>& x, const Tensor<T>& gamma,
                          const Tensor<T>& dy) override {
    if (!this->par_.sequence_parallel) return Base::norm_grads(k, x, gamma, dy);
    return norm_backward(this->cfg_.norm, x, gamma, dy);
  }
};

// The clip coefficient from the rank's own part of the global norm: the squares are never
// summed over the model-parallel group (tp × pp), so each rank clips by another number.
template <class T>
struct GradNormNotReduced : ModelRankStep<T> {
  using Base = ModelRankStep<T>;
  using Base::Base;
  using typename Base::A;
  A global_norm() override {
    A sq(0);
    for_each_param(this->grads_, this->grads_,
                   [&](const std::string& name, const Tensor<A>& g, auto&) {
                     if (!this->counted_in_norm(name)) return;
                     for (const A v : g.values()) sq += v * v;
                   });
    using std::sqrt;
    return sqrt(sq);
  }
};

// The loss's token count taken on the dp rank (its own non-ignored targets), not over the
// global batch: the mean's denominator differs between dp ranks.
template <class T>
struct TokensCountedPerDpRank : ModelRankStep<T> {
  using Base = ModelRankStep<T>;
  using Base::Base;
  std::size_t count_tokens() const override {
    std::size_t n = 0;
    const auto& b = this->batch_;
    for (std::size_t s = this->sequences_.offset;
         s < this->sequences_.offset + this->sequences_.size; ++s) {
      for (std::size_t t = 0; t < b.seq_len; ++t) {
        const std::int64_t y = b.targets[s * b.seq_len + t];
        n += !this->cfg_.ignore_index || y != *this->cfg_.ignore_index;
      }
    }
    return n;
  }
};

template <template <class> class Step>
std::shared_ptr<const ModelImplementation> make() {
  return std::make_shared<const ModelAdapter<StepMutant<Step>>>();
}

const std::array<Mutant<ModelImplementation>, 13> catalog = {{
    {"grads-averaged-twice",
     "the dp × cp gradient sum also averaged (divided by dp·cp) after the per-token loss "
     "already divided by the global token count (torchtitan #3280's loss-scaling class)",
     &make<GradsAveragedTwice>},
    {"cp-grads-not-reduced",
     "parameter gradients summed over dp only: the cp ranks' partial gradients of their own "
     "tokens never added",
     &make<CpGradsNotReduced>},
    {"tied-embedding-not-summed",
     "a tied embedding's two uses (input embedding, output projection) never have their "
     "gradients summed (Megatron-LM's embedding group all_reduce left out)",
     &make<TiedEmbeddingNotSummed>},
    {"accumulation-overwrites",
     "gradient accumulation over micro-batches overwrites instead of adding",
     &make<AccumulationOverwrites>},
    {"stale-micro-batch-activation",
     "a pipeline stage computes micro-batch k on micro-batch k − 1's activation (a receive "
     "buffer reused one step late)",
     &make<StaleMicroBatchActivation>},
    {"loss-averaged-per-micro-batch",
     "the loss averaged per micro-batch, then over micro-batches and dp ranks: micro-batches "
     "weigh the same whatever their token counts",
     &make<LossAveragedPerMicroBatch>},
    {"norm-grads-not-reduced-over-cp",
     "the norms' gamma/beta gradients summed over dp but not over cp",
     &make<NormGradsNotReducedOverCp>},
    {"step-before-all-reduce",
     "the optimizer steps on each rank's own gradients before the dp × cp all_reduce: the "
     "replicas drift apart",
     &make<StepBeforeAllReduce>},
    {"replicated-norm-counted-per-tp-rank",
     "parameters replicated over tp (norms, bo, b_down) counted in the global gradient norm on "
     "every tp rank (ROCm/TransformerEngine #715: the norm inflated 1.52×)",
     &make<ReplicatedNormCountedPerTpRank>},
    {"loss-not-reduced-over-dp",
     "the reported loss from the rank's own tokens: never summed over dp × cp",
     &make<LossNotReducedOverDp>},
    {"sp-norm-grads-not-reduced",
     "under sequence parallelism the norms' gradients stay each tp rank's partial sum over its "
     "token rows (NVIDIA/Megatron-LM #1446)",
     &make<SpNormGradsNotReduced>},
    {"grad-norm-not-reduced",
     "the clip coefficient from the rank's own squares: the norm never summed over tp × pp",
     &make<GradNormNotReduced>},
    {"tokens-counted-per-dp-rank",
     "the mean's token count taken over the dp rank's own targets, not the global batch's",
     &make<TokensCountedPerDpRank>},
}};

}  // namespace

std::span<const Mutant<ModelImplementation>> model_mutants() { return catalog; }

}  // namespace shardcheck::check
