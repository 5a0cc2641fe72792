// Running a vocab case on the ranks: each rank's inputs cut from the global tensors, the
// implementation run on P ranks, and what the suite expects back: the outputs' placements and
// the collectives the op declares.
#pragma once

#include "engine/rank_family.hpp"
#include "engine/traffic.hpp"
#include "layout/placement.hpp"
#include "runtime/ledger.hpp"
#include "suites/vocab/vocab_case.hpp"
#include "suites/vocab/vocab_impl.hpp"

#include <string>
#include <vector>

namespace shardcheck::check {

template <class T>
using VocabRun = RankRun<VocabRankOutputs<T>>;

template <class T>
VocabRankInputs<T> vocab_rank_inputs(const VocabCase& c, const VocabData<T>& d, int r);

template <class T>
VocabRun<T> run_vocab(const VocabImplementation& impl, const VocabCase& c, const VocabData<T>& d);

struct VocabPlacements {
  Placement y, dw, loss, dlogits;
};
VocabPlacements vocab_placements(const VocabCase& c);

// The collectives the op declares for one forward and backward on every rank (element counts):
//   embedding       all_reduce y [tokens*h] in T, or with sequence_parallel_output
//                   reduce_scatter y [tokens*h] and all_gather dy [tokens*h]
//   cross_entropy   all_reduce(max) [tokens] and all_reduce(sum) [2*tokens] (3*tokens with label
//                   smoothing) in acc_t<T>, with or without class and token weights (the
//                   class-weighted Σ c_v·z_v takes Σ z_v's slot); the backward none. Never
//                   the logits.
std::vector<DeclaredCall> vocab_declared_traffic(const VocabCase& c);

// Most elements any cross-entropy collective may move per token (the ledger property).
constexpr std::uint64_t ce_max_elements_per_token = 3;

}  // namespace shardcheck::check
