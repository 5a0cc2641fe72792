// One generated case of the vocab suite: the op (vocabulary-parallel embedding or cross-entropy),
// its options, the shapes, the world and the splits, and the global tensors. Everything is drawn
// on the main thread before any rank runs.
#pragma once

#include "engine/steps.hpp"
#include "engine/suite.hpp"
#include "generators/values.hpp"
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"
#include "ops/vocab/vocab_spec.hpp"
#include "suites/vocab/vocab_impl.hpp"
#include "tensor/tensor.hpp"

#include <rapidcheck.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardcheck::check {

enum class VocabOp { embedding, cross_entropy };

inline std::string to_string(VocabOp o) {
  return o == VocabOp::embedding ? "vocab_parallel_embedding" : "vocab_parallel_cross_entropy";
}

// Logit magnitudes: unit |z| < 2; large |z| < 2^7; extreme |z| in [2^13, 2^14) for most entries
// (±1e4: exp(m) overflows float and double, gaps beyond exp's range), the rest unit.
enum class LogitProfile { unit, large, extreme };

inline std::string to_string(LogitProfile p) {
  return p == LogitProfile::unit ? "unit" : p == LogitProfile::large ? "large" : "extreme";
}

// A padded vocabulary (docs/vocab.md, "Padded vocabulary"): `vocab` is then V_pad, the rows of
// the table or the columns of the logits, split over the ranks, and the op's config says the
// real V (real_vocab). Megatron-style: V rounded up to a multiple of `multiple` = k·P, plus
// `extra` padding rows beyond it (vLLM pads further for LoRA's added vocabulary).
struct VocabPadding {
  std::size_t multiple = 0;  // k·P; 0: no padding
  std::size_t extra = 0;     // rows beyond the rounded-up count
};

struct VocabCase {
  VocabOp op = VocabOp::embedding;
  DType dtype = DType::float32;
  int world = 1;
  std::size_t tokens = 1, vocab = 1, hidden = 1;  // vocab: V_pad when padded
  VocabEmbeddingConfig embedding;             // op == embedding (vocab, vocab_split set in both)
  VocabCrossEntropyConfig ce;                 // op == cross_entropy
  VocabPadding padding;                       // how vocab was padded (for describe())
  gen::Profile profile = gen::Profile::unit;  // embedding table and dy values
  LogitProfile logits = LogitProfile::unit;
  std::vector<std::int64_t> ids;  // embedding ids or CE targets, with shard boundaries
  bool all_ignored = false;

  const SplitPolicy& vocab_split() const {
    return op == VocabOp::embedding ? embedding.vocab_split : ce.vocab_split;
  }
  // The real vocabulary V (= vocab without padding), from the op's config.
  std::size_t real_vocab() const {
    return op == VocabOp::embedding ? real_vocab_size(embedding) : real_vocab_size(ce);
  }
  // "op=... tokens=5 V=7 h=3 P=3 vocab_split=explicit[2,0,5] padding_idx=4 ...", with
  // "V=5 V_pad=8 (padded to a multiple of 4 = 2·P, +0 extra; ...)" for a padded vocabulary.
  std::string describe() const;
};

struct VocabCaseOptions {
  std::optional<VocabOp> op;
  std::optional<int> world;
  std::optional<LogitProfile> logits;
};

// The global tensors: embedding w [V_pad, h], dy [tokens, h]; CE logits [tokens, V_pad], dloss
// [tokens] (none) or [1] (V_pad = V without padding). Padding rows of w are garbage, padding
// columns of the logits mostly above every real logit: values that change the result unless
// they are masked.
template <class T>
struct VocabData {
  Tensor<T> w, dy, logits, dloss;
};

// What the vocab suite expects of a case: the exact values in high precision, each with its
// elementwise a-priori bound for the case's element type (reference/vocab/vocab_embedding.hpp,
// reference/vocab/vocab_cross_entropy.hpp; derivations in docs/vocab.md).
struct VocabExpected {
  ExpectedTensor y, dw;          // embedding (y's bound is 0: exact data movement)
  ExpectedTensor loss, dlogits;  // cross_entropy
};

// The outputs of a case, named once: fn(name, its member in a rank's outputs, its member in the
// expected values) for the case's op, y and dw (embedding) or loss and dlogits (cross_entropy).
// The suite checks them (check_outputs, by the engine's check_listed_outputs) and `shardcheck
// compare` reads them (vocab_compare.cpp).
template <class T, class Fn>
void for_each_output(const VocabCase& c, Fn&& fn) {
  using O = VocabRankOutputs<T>;
  using E = VocabExpected;
  if (c.op == VocabOp::embedding) {
    fn("y", &O::y, &E::y);
    fn("dw", &O::dw, &E::dw);
  } else {
    fn("loss", &O::loss, &E::loss);
    fn("dlogits", &O::dlogits, &E::dlogits);
  }
}

// Most elements any cross-entropy collective may move per token (the ledger property).
constexpr std::uint64_t ce_max_elements_per_token = 3;

template <class T>
using VocabRun = RankRun<VocabRankOutputs<T>>;

// Its steps (engine/steps.hpp):
// The op's spec for this case (vocab_parallel_embedding or vocab_parallel_cross_entropy): its
// tensors' placements and its collectives (ops/vocab/vocab_spec.hpp).
//
// Every output of the case's op materialized by its spec's placement and checked against `e`,
// appended to v: y and dw (embedding), loss and dlogits (cross_entropy) (vocab_suite.cpp;
// `shardcheck compare` calls it too, compare/compare.hpp).
SHARDCHECK_DECLARE_RANK_STEPS(VocabImplementation, VocabCase, VocabCaseOptions, VocabData, VocabRun,
                              VocabExpected)

}  // namespace shardcheck::check
