// Configuration coverage of the vocab suite's generator for the padded vocabulary: the first 30
// cases at each of 10 seeds, drawn as a 100-case run draws them (generators/structure.hpp's
// sample_cases), contain, for each op, a padded case, a rank holding real rows and padding, and
// a rank holding only padding (docs/vocab.md, "Padded vocabulary"). The padding is drawn with
// gen::chance and the split of V_pad, unscaled, so it appears from the first case on.
#include "generators/structure.hpp"
#include "suites/vocab/vocab_case.hpp"

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
    const auto missing =
        gen::missing_configurations(gen_case(config, options), wanted, padding_labels);
    EXPECT_TRUE(missing.empty()) << gen::missing_text(missing);
  }
}

}  // namespace
}  // namespace shardcheck::check
