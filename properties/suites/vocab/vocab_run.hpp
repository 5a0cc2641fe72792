// Running a vocab case on the ranks: each rank's inputs cut from the global tensors by the
// placements of the op's spec, and the implementation run on P ranks (the engine's steps,
// engine/rank_family.hpp).
#pragma once

#include "engine/rank_family.hpp"
#include "engine/verdict.hpp"
#include "ops/vocab/vocab_spec.hpp"
#include "suites/vocab/vocab_case.hpp"
#include "suites/vocab/vocab_expected.hpp"
#include "suites/vocab/vocab_impl.hpp"

#include <vector>

namespace shardcheck::check {

template <class T>
using VocabRun = RankRun<VocabRankOutputs<T>>;

template <class T>
VocabRun<T> run_ranks(const VocabImplementation& impl, const VocabCase& c, const VocabData<T>& d);

// The op's spec for this case (vocab_parallel_embedding or vocab_parallel_cross_entropy): its
// tensors' placements and its collectives (ops/vocab/vocab_spec.hpp).
spec::OpSpec op_spec(const VocabCase& c);

// Every output of the case's op materialized by its spec's placement and checked against `e`,
// appended to v: y and dw (embedding), loss and dlogits (cross_entropy) (vocab_suite.cpp;
// `shardcheck compare` calls it too, compare/compare.hpp).
template <class T>
void check_outputs(CaseVerdict& v, const VocabCase& c, const VocabRun<T>& run,
                   const VocabExpected& e);

// Most elements any cross-entropy collective may move per token (the ledger property).
constexpr std::uint64_t ce_max_elements_per_token = 3;

}  // namespace shardcheck::check
