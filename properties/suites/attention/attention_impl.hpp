// The attention suite's implementation interface: what one rank is given and what it returns,
// for the context-parallel core (q, k, v of the rank's positions) and for the whole attention
// layer with its projections on a (tp, cp) mesh.
//
// A user checks their own partitioned attention by writing a type with two member templates and
// registering it (as examples/custom_linear/ does for the linear suite):
//
//   struct MyAttention {
//     template <class T> CoreRankOutputs<T> core(Communicator& cp, const AttentionConfig&,
//         const ContextParallelConfig&, const CoreRankInputs<T>&) const;
//     template <class T> LayerRankOutputs<T> layer(Communicator& tp, Communicator& cp,
//         const HeadParallelConfig&, const LayerRankInputs<T>&) const;
//   };
//   static Registration<AttentionImplementation> reg({.name = "mine"},
//       std::make_shared<AttentionAdapter<MyAttention>>());
//
// The layer is given the DENSE weights on every rank and takes its own heads' shards (so a
// wrong head mapping is the implementation's bug, and shows); it returns its gradients' shards
// in the shapes of its shards (the suite checks them against the dense gradient's rows or
// columns of the rank's heads, lib/ops/attention/head_parallel_attention.hpp's assignment).
#pragma once

#include "engine/implementation.hpp"
#include "engine/registry.hpp"
#include "ops/attention/attention.hpp"
#include "ops/attention/context_parallel_attention.hpp"
#include "ops/attention/head_parallel_attention.hpp"
#include "runtime/communicator.hpp"

#include <memory>

namespace shardcheck::check {

template <class T>
struct CoreRankInputs {
  Tensor<T> q, k, v, dout;  // the rank's positions: [batch, L_r, h|g, d]
};

template <class T>
struct CoreRankOutputs {
  Tensor<T> out;         // [batch, L_r, h, d]
  Tensor<acc_t<T>> lse;  // [batch, h, L_r]
  Tensor<T> dq, dk, dv;  // the shapes of q, k, v
};

template <class T, class F>  // f(every member): the MPI case driver's bytes (engine/rank_bytes.hpp)
void fields(CoreRankOutputs<T>& o, F&& f) {
  f(o.out, o.lse, o.dq, o.dk, o.dv);
}
static_assert(sizeof(CoreRankOutputs<double>) == 5 * sizeof(Tensor<double>));

// Under cfg.sequence_parallel, x, dy, y and dx are the tp rank's token rows [rows_r, hidden]
// instead: cfg.token_split of the rank's positions flattened [batch·L_r, hidden] (batch-major).
template <class T>
struct LayerRankInputs {
  Tensor<T> x, dy;                 // [batch, L_r, hidden]: the rank's positions (cp)
  AttentionLayerWeights<T> dense;  // the dense parameters, on every rank
};

template <class T>
struct LayerRankOutputs {
  Tensor<T> y;                   // [batch, L_r, hidden]
  AttentionLayerGrads<T> grads;  // dx [batch, L_r, hidden], the rank's weight-gradient shards
};

template <class T, class F>  // f(every member): the MPI case driver's bytes (engine/rank_bytes.hpp)
void fields(LayerRankOutputs<T>& o, F&& f) {
  f(o.y, o.grads);
}
static_assert(sizeof(LayerRankOutputs<double>) == 10 * sizeof(Tensor<double>));

// The interface (AttentionImplementation) and AttentionAdapter<Impl>, which adapts a type with
// member templates core<T> and layer<T> (engine/implementation.hpp).
#define SHARDCHECK_ATTENTION_METHODS(M, T)                                           \
  M(T, CoreRankOutputs<T>, core,                                                     \
    (Communicator & cp, const AttentionConfig& cfg, const ContextParallelConfig& cc, \
     const CoreRankInputs<T>& in),                                                   \
    (cp, cfg, cc, in))                                                               \
  M(T, LayerRankOutputs<T>, layer,                                                   \
    (Communicator & tp, Communicator & cp, const HeadParallelConfig& cfg,            \
     const LayerRankInputs<T>& in),                                                  \
    (tp, cp, cfg, in))
SHARDCHECK_IMPLEMENTATION(AttentionImplementation, AttentionAdapter, SHARDCHECK_ATTENTION_METHODS)
#undef SHARDCHECK_ATTENTION_METHODS

// The library's own ops: "shardcheck".
struct LibraryAttention {
  template <class T>
  CoreRankOutputs<T> core(Communicator& cp, const AttentionConfig& cfg,
                          const ContextParallelConfig& cc, const CoreRankInputs<T>& in) const {
    auto fwd = context_parallel_attention(cp, cfg, cc, in.q, in.k, in.v);
    auto g = context_parallel_attention_backward(cp, cfg, cc, in.q, in.k, in.v, fwd, in.dout);
    return {std::move(fwd.out), std::move(fwd.lse), std::move(g.dq), std::move(g.dk),
            std::move(g.dv)};
  }
  template <class T>
  LayerRankOutputs<T> layer(Communicator& tp, Communicator& cp, const HeadParallelConfig& cfg,
                            const LayerRankInputs<T>& in) const {
    const auto w =
        shard_attention_weights(in.dense, cfg, head_assignment(cfg, tp.size(), tp.rank()));
    auto fwd = attention_layer(tp, cp, cfg, in.x, w);
    auto g = attention_layer_backward(tp, cp, cfg, in.x, w, fwd, in.dy);
    return {std::move(fwd.y), std::move(g)};
  }
};

}  // namespace shardcheck::check
