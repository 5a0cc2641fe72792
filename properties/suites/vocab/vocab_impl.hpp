// The vocab suite's implementation interface: what one rank is given and what it returns, for
// vocab_parallel_embedding and vocab_parallel_cross_entropy, forward and backward in one call.
//
// A user checks their own vocabulary-parallel ops by writing a type with two member templates
// and registering it (as examples/custom_linear/ does for linear):
//
//   struct MyVocab {
//     template <class T> VocabRankOutputs<T> embedding(Communicator&,
//         const VocabEmbeddingConfig&, const VocabRankInputs<T>&) const;
//     template <class T> VocabRankOutputs<T> cross_entropy(Communicator&,
//         const VocabCrossEntropyConfig&, const VocabRankInputs<T>&) const;
//   };
//   static Registration<VocabImplementation> reg({.name = "mine"},
//                                                std::make_shared<VocabAdapter<MyVocab>>());
//
// Layouts (lib/ops/vocab/vocab_embedding.hpp, lib/ops/vocab/vocab_cross_entropy.hpp); the suite
// materializes the outputs by these placements:
//   embedding       y  R, or S(0)[token_split] with sequence_parallel_output;  dw S(0)[vocab_split]
//   cross_entropy   loss R ([tokens] or [1]);                                  dlogits
//   S(1)[vocab_split]
// The cross-entropy's weights travel in its config (VocabCrossEntropyConfig::class_weight, the
// full [V] vector, and ::token_weight, [tokens]; empty when the case draws none): every rank is
// given both whole, like the targets.
#pragma once

#include "engine/implementation.hpp"
#include "engine/registry.hpp"
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"
#include "runtime/communicator.hpp"
#include "tensor/tensor.hpp"

#include <cstdint>
#include <vector>

namespace shardcheck::check {

template <class T>
struct VocabRankInputs {
  std::vector<std::int64_t> ids;  // embedding ids or CE targets: every token, on every rank
  Tensor<T> w_shard;              // embedding: this rank's rows [V_r, h]
  Tensor<T> dy;            // embedding: [tokens, h], or this rank's token rows with SP output
  Tensor<T> logits_shard;  // cross_entropy: this rank's columns [tokens, V_r]
  Tensor<T> dloss;         // cross_entropy: [tokens] (none) or [1]
};

template <class T>
struct VocabRankOutputs {
  Tensor<T> y, dw;          // embedding
  Tensor<T> loss, dlogits;  // cross_entropy
};

template <class T, class F>  // f(every member): the MPI case driver's bytes (engine/rank_bytes.hpp)
void fields(VocabRankOutputs<T>& o, F&& f) {
  f(o.y, o.dw, o.loss, o.dlogits);
}
static_assert(sizeof(VocabRankOutputs<double>) == 4 * sizeof(Tensor<double>));

// The interface (VocabImplementation) and VocabAdapter<Impl>, which adapts a type with member
// templates embedding<T> and cross_entropy<T> (engine/implementation.hpp).
#define SHARDCHECK_VOCAB_METHODS(M, T)                                                     \
  M(T, VocabRankOutputs<T>, embedding,                                                     \
    (Communicator & tp, const VocabEmbeddingConfig& cfg, const VocabRankInputs<T>& in),    \
    (tp, cfg, in))                                                                         \
  M(T, VocabRankOutputs<T>, cross_entropy,                                                 \
    (Communicator & tp, const VocabCrossEntropyConfig& cfg, const VocabRankInputs<T>& in), \
    (tp, cfg, in))
SHARDCHECK_IMPLEMENTATION(VocabImplementation, VocabAdapter, SHARDCHECK_VOCAB_METHODS)
#undef SHARDCHECK_VOCAB_METHODS

// The library's own ops, as an implementation: "shardcheck".
struct LibraryVocab {
  template <class T>
  VocabRankOutputs<T> embedding(Communicator& tp, const VocabEmbeddingConfig& cfg,
                                const VocabRankInputs<T>& in) const {
    VocabRankOutputs<T> out;
    out.y = vocab_parallel_embedding<T>(tp, cfg, in.ids, in.w_shard);
    out.dw = vocab_parallel_embedding_backward<T>(tp, cfg, in.ids, in.dy);
    return out;
  }
  template <class T>
  VocabRankOutputs<T> cross_entropy(Communicator& tp, const VocabCrossEntropyConfig& cfg,
                                    const VocabRankInputs<T>& in) const {
    VocabRankOutputs<T> out;
    auto f = vocab_parallel_cross_entropy<T>(tp, cfg, in.logits_shard, in.ids);
    out.loss = std::move(f.loss);
    out.dlogits = vocab_parallel_cross_entropy_backward<T>(tp, cfg, in.logits_shard, in.ids,
                                                           f.saved, in.dloss);
    return out;
  }
};

}  // namespace shardcheck::check
