#include "suites/vocab/vocab_case.hpp"

#include "engine/instantiate.hpp"
#include "generators/layout_gen.hpp"

#include <algorithm>

namespace shardcheck::check {
namespace {

// Sizes: the high-precision reference (exp/log in float128 per logit) stays cheap.
constexpr std::size_t max_tokens = 16;
constexpr std::size_t max_vocab = 40;
constexpr std::size_t max_hidden = 12;

std::string opt_str(const std::optional<std::int64_t>& v) {
  return v ? std::to_string(*v) : std::string("none");
}

// The first and last row of every non-empty shard: where ownership masks go wrong.
std::vector<std::int64_t> boundary_ids(const SplitPolicy& policy, std::size_t vocab, int world) {
  std::vector<std::int64_t> out;
  for (const Piece& p : split(policy, vocab, world)) {
    if (p.size == 0) continue;
    out.push_back(static_cast<std::int64_t>(p.offset));
    out.push_back(static_cast<std::int64_t>(p.offset + p.size - 1));
  }
  return out;
}

}  // namespace

std::string VocabCase::describe() const {
  std::string s = to_string(op) + " tokens=" + std::to_string(tokens) +
                  " V=" + std::to_string(vocab) + " P=" + std::to_string(world) +
                  " vocab_split=" + vocab_split().to_string();
  std::string ids_text;
  for (auto i : ids) ids_text += (ids_text.empty() ? "" : ",") + std::to_string(i);
  if (op == VocabOp::embedding) {
    s += " h=" + std::to_string(hidden) + " padding_idx=" + opt_str(embedding.padding_idx);
    if (embedding.sequence_parallel_output) {
      s += " sequence_parallel_output token_split=" + embedding.token_split.to_string();
    }
    s += " profile=" + gen::to_string(profile) + " ids=[" + ids_text + "]";
  } else {
    s += " ignore_index=" + opt_str(ce.ignore_index) +
         " label_smoothing=" + std::to_string(ce.label_smoothing) +
         " reduction=" + std::string(name(ce.reduction)) + " profile=" + to_string(logits) +
         " targets=[" + ids_text + "]";
    auto list = [](const std::vector<double>& w) {
      std::string t;
      for (double x : w) {
        std::string n = std::to_string(x);
        n.erase(n.find_last_not_of('0') + 1);
        if (!n.empty() && n.back() == '.') n.pop_back();
        t += (t.empty() ? "" : ",") + n;
      }
      return "[" + t + "]";
    };
    if (!ce.token_weight.empty()) s += " token_weight=" + list(ce.token_weight);
    if (!ce.class_weight.empty()) s += " class_weight=" + list(ce.class_weight);
    if (all_ignored) s += " (every token ignored)";
  }
  return s;
}

rc::Gen<VocabCase> gen_case(const RunConfig& config, const VocabCaseOptions& options) {
  return rc::gen::exec([config, options] {
    VocabCase c;
    c.op = options.op ? *options.op : *rc::gen::element(VocabOp::embedding, VocabOp::cross_entropy);
    c.dtype = *gen::genFloatDType(config.dtypes);
    c.world = options.world ? *options.world : *gen::genWorld(config.max_world);
    c.tokens = *gen::genDim(max_tokens);
    c.vocab = *gen::genDim(max_vocab);
    c.hidden = *gen::genDim(max_hidden);
    const SplitPolicy vsplit = *gen::genSplit(c.vocab, c.world);
    const Algorithm algo = *rc::gen::element(Algorithm::ring, Algorithm::sequential);
    const auto bounds = boundary_ids(vsplit, c.vocab, c.world);
    // Ids: shard boundaries on purpose, and any id; repeats come from the small pool.
    auto gen_id = rc::gen::weightedOneOf<std::int64_t>({
        {3, rc::gen::elementOf(bounds)},
        {2, rc::gen::inRange<std::int64_t>(0, static_cast<std::int64_t>(c.vocab))},
    });
    c.ids = *rc::gen::container<std::vector<std::int64_t>>(c.tokens, gen_id);
    if (c.op == VocabOp::embedding) {
      auto& e = c.embedding;
      e.vocab = c.vocab;
      e.vocab_split = vsplit;
      e.reduce_algorithm = algo;
      if (*rc::gen::arbitrary<bool>()) e.padding_idx = *gen_id;
      e.sequence_parallel_output = *rc::gen::weightedElement<bool>({{2, false}, {1, true}});
      e.token_split = *gen::genSplit(c.tokens, c.world);
      c.profile =
          *rc::gen::element(gen::Profile::unit, gen::Profile::wide, gen::Profile::cancellation);
      RC_TAG(e.padding_idx ? "padding_idx" : "no padding");
    } else {
      auto& ce = c.ce;
      ce.vocab = c.vocab;
      ce.vocab_split = vsplit;
      ce.reduce_algorithm = algo;
      ce.reduction =
          *rc::gen::element(LossReduction::none, LossReduction::sum, LossReduction::mean);
      // Dyadic ε: exact in every accumulator, 1 − ε exact too
      // (reference/vocab/vocab_cross_entropy.hpp).
      ce.label_smoothing = *rc::gen::weightedElement<double>(
          {{3, 0.0}, {1, 0.5}, {1, 0.25}, {1, 0.125}, {1, 0.0625}});
      ce.ignore_index = *rc::gen::weightedOneOf<std::optional<std::int64_t>>({
          {2, rc::gen::just(std::optional<std::int64_t>(-100))},
          {1, rc::gen::just(std::optional<std::int64_t>())},
          {1, rc::gen::map(gen_id, [](std::int64_t i) { return std::optional<std::int64_t>(i); })},
      });
      if (ce.ignore_index) {
        c.all_ignored = *rc::gen::weightedElement<bool>({{9, false}, {1, true}});
        for (auto& y : c.ids) {
          if (c.all_ignored || *rc::gen::weightedElement<bool>({{4, false}, {1, true}})) {
            y = *ce.ignore_index;
          }
        }
      }
      // Weights (values exact in every T): sometimes per-token, sometimes per-class, with zeros
      // and, one time in eight, all zero (the mean's D = 0 convention).
      auto gen_weights = [](std::size_t n) {
        if (*rc::gen::weightedElement<bool>({{7, false}, {1, true}})) {
          return std::vector<double>(n, 0.0);
        }
        return *rc::gen::container<std::vector<double>>(
            n, rc::gen::weightedElement<double>(
                   {{2, 0.0}, {1, 0.25}, {1, 0.5}, {3, 1.0}, {1, 1.5}, {2, 2.0}, {1, 3.0}}));
      };
      if (*rc::gen::weightedElement<bool>({{2, false}, {1, true}})) {
        ce.token_weight = gen_weights(c.tokens);
      }
      if (*rc::gen::weightedElement<bool>({{2, false}, {1, true}})) {
        ce.class_weight = gen_weights(c.vocab);
      }
      RC_CLASSIFY(!ce.token_weight.empty(), "token weights");
      RC_CLASSIFY(!ce.class_weight.empty(), "class weights");
      c.logits = options.logits
                     ? *options.logits
                     : *rc::gen::weightedElement<LogitProfile>({{2, LogitProfile::unit},
                                                                {1, LogitProfile::large},
                                                                {1, LogitProfile::extreme}});
      RC_TAG(to_string(c.logits));
    }
    RC_CLASSIFY(gen::has_empty_piece(vsplit, c.vocab, c.world), "empty vocab shard");
    RC_TAG(gen::policy_kind(vsplit));
    return c;
  });
}

namespace {

template <class T>
int table_max_exp() {
  // dW sums ≤ 16 values < 2^e: < 2^(e+4) stays below float16's 2^16.
  if constexpr (std::is_same_v<T, float16>) return 8;
  else if constexpr (std::is_same_v<T, double>) return 200;
  else return 40;
}

template <class T>
rc::Gen<T> genLogit(LogitProfile p) {
  if (p == LogitProfile::unit) return gen::genValue<T>(gen::Profile::unit, 0);
  if (p == LogitProfile::large) {
    return rc::gen::apply(
        [](bool neg, int e, std::uint64_t m) { return gen::make_value<T>(neg, e, m); },
        rc::gen::arbitrary<bool>(), rc::gen::inRange(-4, 7), rc::gen::arbitrary<std::uint64_t>());
  }
  return rc::gen::weightedOneOf<T>({
      {3, rc::gen::apply([](bool neg, std::uint64_t m) { return gen::make_value<T>(neg, 13, m); },
                         rc::gen::arbitrary<bool>(), rc::gen::arbitrary<std::uint64_t>())},
      {1, gen::genValue<T>(gen::Profile::unit, 0)},
  });
}

}  // namespace

template <class T>
rc::Gen<VocabData<T>> gen_data(const VocabCase& c) {
  return rc::gen::exec([c] {
    VocabData<T> d;
    if (c.op == VocabOp::embedding) {
      d.w = *gen::genTensor<T>({c.vocab, c.hidden}, c.profile, table_max_exp<T>());
      d.dy = *gen::genTensor<T>({c.tokens, c.hidden}, c.profile, table_max_exp<T>());
    } else {
      d.logits =
          Tensor<T>(Shape{c.tokens, c.vocab},
                    *rc::gen::container<std::vector<T>>(c.tokens * c.vocab, genLogit<T>(c.logits)));
      const std::size_t n = c.ce.reduction == LossReduction::none ? c.tokens : 1;
      d.dloss = *gen::genTensor<T>({n}, gen::Profile::unit, 0);
    }
    return d;
  });
}

SHARDCHECK_INSTANTIATE_GEN_DATA(VocabCase, VocabData)

}  // namespace shardcheck::check
