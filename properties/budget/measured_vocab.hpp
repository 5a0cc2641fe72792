// The vocabulary-parallel embedding and cross-entropy (ops/vocab/) measured against the budget's
// model: a generated case (ids, vocabulary split, sequence-parallel output, label smoothing,
// reduction), one run of each op's forward and backward under measured_support.hpp's Probe, and
// the model's prediction for each rank.
#pragma once

#include "measured_support.hpp"
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace shardcheck::budget::measured {

struct VocabCase {
  int p = 1;
  std::size_t tokens = 1, hidden = 1;
  std::vector<std::int64_t> ids;
  VocabEmbeddingConfig emb;
  VocabCrossEntropyConfig ce;
};

inline VocabCase gen_vocab_case() {
  VocabCase k;
  k.p = *rc::gen::inRange(1, 5);
  k.tokens = *rc::gen::inRange<std::size_t>(1, 8);
  k.hidden = *rc::gen::inRange<std::size_t>(1, 5);
  const auto vocab = *rc::gen::inRange<std::size_t>(1, 10);
  for (std::size_t t = 0; t < k.tokens; ++t) {
    k.ids.push_back(*rc::gen::inRange<std::int64_t>(0, static_cast<std::int64_t>(vocab)));
  }
  k.emb.vocab = vocab;
  k.emb.vocab_split = *gen_split(vocab, k.p);
  k.emb.sequence_parallel_output = *rc::gen::arbitrary<bool>();
  k.emb.token_split = *gen_split(k.tokens, k.p);
  k.emb.reduce_algorithm = gen_algorithm();
  k.ce.vocab = vocab;
  k.ce.vocab_split = k.emb.vocab_split;
  k.ce.label_smoothing = *rc::gen::element(0.0, 0.25);
  k.ce.reduction = *rc::gen::element(LossReduction::none, LossReduction::sum, LossReduction::mean);
  k.ce.reduce_algorithm = gen_algorithm();
  return k;
}

template <class T>
std::vector<Measured> run_embedding(const VocabCase& k) {
  return measure_ranks(k.p, [&](Communicator& c, Probe& probe) {
    const int r = c.rank();
    const auto& cfg = k.emb;
    const auto w = zeros<T>({piece_of(cfg.vocab_split, cfg.vocab, k.p, r), k.hidden});
    probe.forward([&] { return vocab_parallel_embedding(c, cfg, std::span(k.ids), w); });
    probe.keep(k.ids);
    const std::size_t tr =
        cfg.sequence_parallel_output ? piece_of(cfg.token_split, k.tokens, k.p, r) : k.tokens;
    const auto dy = zeros<T>({tr, k.hidden});
    probe.backward([&] { (void)vocab_parallel_embedding_backward(c, cfg, std::span(k.ids), dy); });
  });
}

inline Predict predict_embedding(const VocabCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{vocab_embedding_traffic(k.emb, k.tokens, k.hidden, k.p, r, e),
                      vocab_embedding_activations(k.emb, k.tokens, k.hidden, k.p, r, e)};
  };
}

template <class T>
std::vector<Measured> run_cross_entropy(const VocabCase& k) {
  return measure_ranks(k.p, [&](Communicator& c, Probe& probe) {
    const int r = c.rank();
    const auto& cfg = k.ce;
    const auto logits = zeros<T>({k.tokens, piece_of(cfg.vocab_split, cfg.vocab, k.p, r)});
    const auto out = probe.forward(
        [&] { return vocab_parallel_cross_entropy(c, cfg, logits, std::span(k.ids)); });
    probe.keep(logits);
    probe.keep(k.ids);
    probe.keep(out.saved.max);
    probe.keep(out.saved.sum_exp);
    const auto dloss = zeros<T>({cfg.reduction == LossReduction::none ? k.tokens : std::size_t{1}});
    probe.backward([&] {
      (void)vocab_parallel_cross_entropy_backward(c, cfg, logits, std::span(k.ids), out.saved,
                                                  dloss);
    });
  });
}

inline Predict predict_cross_entropy(const VocabCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{vocab_cross_entropy_traffic(k.ce, k.tokens, k.p, r, e),
                      vocab_cross_entropy_activations(k.ce, k.tokens, k.p, r, e)};
  };
}

}  // namespace shardcheck::budget::measured
