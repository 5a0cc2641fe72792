// The vocab suite: vocab_parallel_embedding and vocab_parallel_cross_entropy, forward and
// backward, against the dense high-precision reference, the declared traffic (the logits are
// never gathered), and the replication that holds by construction.
#include "suites/vocab/vocab_suite.hpp"

#include "engine/verdict.hpp"
#include "layout/materialize.hpp"
#include "suites/vocab/vocab_expected.hpp"
#include "suites/vocab/vocab_mutants.hpp"
#include "suites/vocab/vocab_run.hpp"

#include <rapidcheck.h>

namespace shardcheck::check {
namespace {

const std::vector<PropertyInfo>& vocab_properties() {
  static const std::vector<PropertyInfo> props = {
      {"embedding_matches_reference",
       "vocab_parallel_embedding's output equals the dense lookup exactly and its weight "
       "gradient equals the dense reference within the rounding-error bound, with ids on shard "
       "boundaries, repeated ids and padding_idx, for any world size, uneven vocabulary split "
       "(empty shards included) and element type",
       /*numeric=*/true},
      {"cross_entropy_matches_reference",
       "vocab_parallel_cross_entropy's loss and logit gradient equal the dense high-precision "
       "reference within their bounds, with ignore_index, label smoothing over the global "
       "vocabulary, PyTorch's per-class weights and per-token weights (zeros and all-zero "
       "included), every reduction, every token ignored, for any world size, uneven split and "
       "element type",
       /*numeric=*/true},
      {"extreme_logits",
       "with logits of magnitude ~1e4 (exp of the max overflows float and double), the loss and "
       "gradient stay finite and within the bound",
       /*numeric=*/true},
      {"declared_traffic",
       "every rank's ledger shows exactly the collectives the op declares; no cross-entropy "
       "collective moves more than 3 elements per token (the logits are never gathered)"},
      {"replicated_bit_identical",
       "results every rank holds (the all_reduced embedding output, the loss) are bit-identical "
       "on every rank"},
  };
  return props;
}

template <class T>
void add_check(CaseVerdict& v, const VocabCase& c, const char* name,
               const std::vector<Tensor<T>>& pieces, const Placement& p, const ExpectedTensor& x) {
  v.tensors.push_back(check_pieces<T>(name, pieces, p, x, c.world));
}

template <class T>
void run_typed(const std::string& property, const VocabImplementation& impl, const VocabCase& c) {
  const VocabData<T> d = *genVocabData<T>(c);
  const VocabRun<T> run = run_vocab(impl, c, d);
  CaseVerdict v;
  if (!begin_verdict(v, to_string(c.op), c.dtype, c.world, c.describe(), run.error)) return;
  if (property == "declared_traffic") {
    if (auto f = check_traffic(vocab_declared_traffic(c), run.ledgers); !f.empty()) {
      v.failures.push_back(f);
    }
    if (c.op == VocabOp::cross_entropy) {
      for (std::size_t r = 0; r < run.ledgers.size(); ++r) {
        for (const auto& e : run.ledgers[r].entries()) {
          if (e.op != Collective::barrier && e.count > ce_max_elements_per_token * c.tokens) {
            v.failures.push_back("rank " + std::to_string(r) + " made a " +
                                 std::string(name(e.op)) + " of " + std::to_string(e.count) +
                                 " elements for " + std::to_string(c.tokens) +
                                 " tokens: more than 3 per token (were the logits gathered?)");
          }
        }
      }
    }
    conclude(v);
    return;
  }
  const auto pl = vocab_placements(c);
  const auto e = vocab_expected(c, d);
  auto pieces = [&](auto member) {
    std::vector<Tensor<T>> out;
    for (const auto& o : run.outputs) out.push_back(o.*member);
    return out;
  };
  if (c.op == VocabOp::embedding) {
    add_check(v, c, "y", pieces(&VocabRankOutputs<T>::y), pl.y, e.y);
    add_check(v, c, "dw", pieces(&VocabRankOutputs<T>::dw), pl.dw, e.dw);
  } else {
    add_check(v, c, "loss", pieces(&VocabRankOutputs<T>::loss), pl.loss, e.loss);
    add_check(v, c, "dlogits", pieces(&VocabRankOutputs<T>::dlogits), pl.dlogits, e.dlogits);
  }
  if (property == "replicated_bit_identical") {
    keep_only_divergence(v);
  }
  conclude(v);
}

}  // namespace

std::string VocabSuite::name() const { return "vocab"; }

std::string VocabSuite::description() const {
  return "Megatron-LM's vocabulary-parallel embedding and cross-entropy (PyTorch semantics), "
         "forward and backward";
}

std::vector<PropertyInfo> VocabSuite::properties() const { return vocab_properties(); }

void VocabSuite::run_case(const std::string& property, const std::string& impl,
                          const RunConfig& config) const {
  const VocabImplementation& target = implementation(impl);
  VocabCaseOptions options;
  if (property == "embedding_matches_reference") {
    options.op = VocabOp::embedding;
  } else if (property == "cross_entropy_matches_reference") {
    options.op = VocabOp::cross_entropy;
  } else if (property == "extreme_logits") {
    options.op = VocabOp::cross_entropy;
    options.logits = LogitProfile::extreme;
  } else if (property == "replicated_bit_identical") {
    options.world = config.max_world >= 2 ? *rc::gen::inRange(2, config.max_world + 1) : 1;
  } else if (property != "declared_traffic") {
    throw UsageError("vocab suite: unknown property '" + property + "'");
  }
  const VocabCase c = *genVocabCase(config, options);
  visit_float_dtype(c.dtype, [&]<class T>(T) { run_typed<T>(property, target, c); });
}

void register_vocab_suite() {
  register_builtin_suite<VocabSuite>(
      "the library's own ops (lib/ops/vocab/vocab_embedding.hpp, lib/ops/vocab/vocab_cross_entropy.hpp)",
      std::make_shared<VocabAdapter<LibraryVocab>>(), register_vocab_mutants);
}

}  // namespace shardcheck::check
