// Configuration coverage of the vocab suite's generator for the padded vocabulary: the first 30
// cases at each of 10 seeds, drawn as a 100-case run draws them (generators/structure.hpp's
// sample_cases), contain, for each op, a padded case, a rank holding real rows and padding, and
// a rank holding only padding (docs/vocab.md, "Padded vocabulary"). The padding is drawn with
// gen::chance and the split of V_pad, unscaled, so it appears from the first case on.
#include "generators/layout_gen.hpp"
#include "generators/structure.hpp"
#include "suites/vocab/vocab_case.hpp"
#include "testing/coverage.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace shardcheck::check {
namespace {

// "padded", "a rank of real and padding rows", "a rank of padding only" when the case has them.
std::vector<std::string> padding_labels(const VocabCase& c) {
  const std::size_t real = c.real_vocab();
  if (real == c.vocab) return {};
  std::vector<std::string> out = {"padded"};
  for (const Piece& p : split(c.vocab_split(), c.vocab, c.world)) {
    if (p.size == 0) continue;
    if (p.offset >= real) out.emplace_back("a rank of padding only");
    if (p.offset < real && p.offset + p.size > real) out.emplace_back("a rank of real and padding");
  }
  return out;
}

TEST(VocabCoverage, PaddingOnEveryKindOfRankWithin30CasesAtEverySeed) {
  const RunConfig config;  // max_world 8, as shardcheck check runs
  const std::vector<std::string> wanted = {"padded", "a rank of real and padding",
                                           "a rank of padding only"};
  for (VocabOp op : {VocabOp::embedding, VocabOp::cross_entropy}) {
    SCOPED_TRACE(to_string(op));
    VocabCaseOptions options;
    options.op = op;
    EXPECT_TRUE(test::covers(gen_case(config, options), wanted, padding_labels));
  }
}

// The cross-entropy's options and the world: every reduction, smoothing on, each kind of
// ignore_index, each kind of weights, each split kind and a rank without columns.
std::vector<std::string> ce_labels(const VocabCase& c) {
  std::vector<std::string> out = {"P=" + std::to_string(c.world),
                                  "reduction " + std::string(name(c.ce.reduction)),
                                  "split " + gen::policy_kind(c.vocab_split())};
  if (c.ce.label_smoothing > 0) out.emplace_back("label smoothing");
  if (!c.ce.ignore_index) out.emplace_back("no ignore_index");
  if (c.ce.ignore_index && *c.ce.ignore_index == -100) out.emplace_back("ignore_index -100");
  if (c.ce.ignore_index && *c.ce.ignore_index >= 0) out.emplace_back("ignore_index a real id");
  if (!c.ce.token_weight.empty()) out.emplace_back("token weights");
  if (!c.ce.class_weight.empty()) out.emplace_back("class weights");
  if (gen::has_empty_piece(c.vocab_split(), c.vocab, c.world)) {
    out.emplace_back("a rank without columns");
  }
  return out;
}

VocabCaseOptions cross_entropy() {
  VocabCaseOptions options;
  options.op = VocabOp::cross_entropy;
  return options;
}

TEST(VocabCoverage, EveryCrossEntropyOptionWithin30CasesAtEverySeed) {
  const RunConfig config;
  EXPECT_TRUE(test::covers(
      gen_case(config, cross_entropy()),
      {"reduction none", "reduction sum", "reduction mean", "label smoothing", "no ignore_index",
       "ignore_index -100", "ignore_index a real id", "token weights", "class weights",
       "split chunk", "split balanced", "split explicit", "a rank without columns"},
      ce_labels));
}

TEST(VocabCoverage, EveryWorldSizeWithin60CasesAtEverySeed) {
  EXPECT_TRUE(test::covers_every_world_size(gen_case(RunConfig{}, cross_entropy()), ce_labels));
}

TEST(VocabCoverage, ALabelTheDrawCannotMakeIsReportedMissing) {
  // max_world 8: "P=9" is missing at every seed.
  EXPECT_TRUE(test::misses_an_impossible_world(gen_case(RunConfig{}, cross_entropy()), ce_labels));
}

}  // namespace
}  // namespace shardcheck::check
