// The vocab suite: vocab_parallel_embedding and vocab_parallel_cross_entropy, forward and
// backward, against the dense high-precision reference, the declared traffic (the logits are
// never gathered), and the replication that holds by construction.
#include "suites/vocab/vocab_suite.hpp"

#include "engine/instantiate.hpp"
#include "engine/rank_family.hpp"
#include "engine/verdict.hpp"
#include "layout/materialize.hpp"
#include "suites/vocab/vocab_case.hpp"
#include "suites/vocab/vocab_mutants.hpp"

#include <rapidcheck.h>

namespace shardcheck::check {

// Every output of the op (for_each_output, vocab_case.hpp), materialized by its spec's placement,
// against the reference (found by the engine beside the case type: engine/rank_family.hpp).
SHARDCHECK_CHECK_LISTED_OUTPUTS(VocabCase, VocabRun, VocabExpected)

namespace {

// The declared collectives, and no cross-entropy collective larger than 3 elements per token
// (the logits are never gathered).
enum class VocabOwnCheck { traffic_without_logits };

template <class T>
void own_check(VocabOwnCheck /*own*/, CaseVerdict& v, const VocabCase& c, const VocabData<T>& /*d*/,
               const VocabRun<T>& run) {
  if (auto f = check_traffic_per_rank(declared_calls(op_spec(c), c.dtype), run.ledgers);
      !f.empty()) {
    v.failures.push_back(f);
  }
  if (c.op != VocabOp::cross_entropy) return;
  for (std::size_t r = 0; r < run.ledgers.size(); ++r) {
    for (const auto& e : run.ledgers[r].entries()) {
      if (e.op != Collective::barrier && e.count > ce_max_elements_per_token * c.tokens) {
        v.failures.push_back("rank " + std::to_string(r) + " made a " + std::string(name(e.op)) +
                             " of " + std::to_string(e.count) + " elements for " +
                             std::to_string(c.tokens) +
                             " tokens: more than 3 per token (were the logits gathered?)");
      }
    }
  }
}

struct VocabFamily : RankFamily<VocabFamily, VocabImplementation, VocabCase, VocabCaseOptions,
                                VocabData, VocabOwnCheck> {
  static constexpr FamilyInfo info = {
      "vocab",
      "Megatron-LM's vocabulary-parallel embedding and cross-entropy (PyTorch semantics), "
      "forward and backward",
      "the library's own ops (lib/ops/vocab/vocab_embedding.hpp, "
      "lib/ops/vocab/vocab_cross_entropy.hpp)"};

  static constexpr Row properties[] = {
      reference_property(
          "embedding_matches_reference",
          "vocab_parallel_embedding's output equals the dense lookup exactly and its weight "
          "gradient equals the dense reference within the rounding-error bound, with ids on "
          "shard boundaries, repeated ids and padding_idx, for any world size, uneven "
          "vocabulary split (empty shards included) and element type",
          pin_op<VocabOp::embedding>),
      reference_property(
          "cross_entropy_matches_reference",
          "vocab_parallel_cross_entropy's loss and logit gradient equal the dense "
          "high-precision reference within their bounds, with ignore_index, label smoothing "
          "over the global vocabulary, PyTorch's per-class weights and per-token weights (zeros "
          "and all-zero included), every reduction, every token ignored, for any world size, "
          "uneven split and element type",
          pin_op<VocabOp::cross_entropy>),
      reference_property("extreme_logits",
                         "with logits of magnitude ~1e4 (exp of the max overflows float and "
                         "double), the loss and gradient stay finite and within the bound",
                         pin_fields<&Options::op, VocabOp::cross_entropy, &Options::logits,
                                    LogitProfile::extreme>),
      own_property({"declared_traffic",
                    "every rank's ledger shows exactly the collectives the op declares; no "
                    "cross-entropy collective moves more than 3 elements per token (the logits "
                    "are never gathered)"},
                   Own::traffic_without_logits),
      replication_property(
          "results every rank holds (the all_reduced embedding output, the loss) are "
          "bit-identical on every rank"),
  };

  using Library = VocabAdapter<LibraryVocab>;
  static constexpr auto mutants = vocab_mutants;
};

}  // namespace

void register_vocab_suite() { register_family<VocabFamily>(); }

}  // namespace shardcheck::check
