// Running a vocab case on the ranks: each rank's inputs cut from the global tensors, the
// implementation run on P ranks, and what the suite expects back: the outputs' placements and
// the collectives the op declares.
#pragma once

#include "engine/rank_family.hpp"
#include "engine/traffic.hpp"
#include "layout/placement.hpp"
#include "ops/vocab/vocab_spec.hpp"
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

// The op's spec for this case (vocab_parallel_embedding or vocab_parallel_cross_entropy): its
// tensors' placements and its collectives (ops/vocab/vocab_spec.hpp).
spec::OpSpec vocab_spec(const VocabCase& c);

struct VocabPlacements {
  Placement y, dw, loss, dlogits;
};
VocabPlacements vocab_placements(const VocabCase& c);

// The collectives each rank's op declares for one forward and backward: the op's spec's
// (ops/vocab/vocab_spec.hpp), with this case's element type.
std::vector<std::vector<DeclaredCall>> vocab_declared_traffic(const VocabCase& c);

// Most elements any cross-entropy collective may move per token (the ledger property).
constexpr std::uint64_t ce_max_elements_per_token = 3;

}  // namespace shardcheck::check
