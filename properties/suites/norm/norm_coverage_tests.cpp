// The norm suite's configuration coverage (generators/structure.hpp): its structure is drawn
// unscaled, so each op (the sequence-parallel norm and Megatron's SP block), each norm kind,
// each token split kind, a rank without tokens, each reduce algorithm and each block kernel
// appear within the first 30 cases, and every world size 1..8 within the first 60, at every one
// of 10 seeds. A label the draw cannot make ("P=9" with max_world 8) is reported missing: the
// check can fail (linear_coverage_tests shows a scaled world draw failing it).
#include "generators/layout_gen.hpp"
#include "generators/structure.hpp"
#include "suites/norm/norm_case.hpp"
#include "testing/coverage.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shardcheck::check {
namespace {

std::vector<std::string> labels(const NormCase& c) {
  std::vector<std::string> out = {"P=" + std::to_string(c.world), to_string(c.op),
                                  to_string(c.kind()),
                                  "split " + gen::policy_kind(c.norm().token_split),
                                  std::string(name(c.norm().reduce_algorithm))};
  if (gen::has_empty_piece(c.norm().token_split, c.tokens(), c.world)) {
    out.emplace_back("a rank without tokens");
  }
  if (c.op == NormOp::block) out.push_back("block kernel " + std::string(name(c.block.kernel)));
  return out;
}

TEST(NormCoverage, EveryOpKindSplitAndKernelWithin30CasesAtEverySeed) {
  const RunConfig config;
  EXPECT_TRUE(
      test::covers(gen_case(config, NormCaseOptions{}),
                   {"sequence_parallel_norm", "megatron_sp_block", to_string(NormKind::layer_norm),
                    to_string(NormKind::layer_norm_no_bias), to_string(NormKind::rms_norm),
                    "split chunk", "split balanced", "split explicit", "a rank without tokens",
                    std::string(name(Algorithm::ring)), std::string(name(Algorithm::sequential)),
                    "block kernel " + std::string(name(Kernel::deterministic)),
                    "block kernel " + std::string(name(Kernel::fast))},
                   labels));
}

TEST(NormCoverage, EveryWorldSizeWithin60CasesAtEverySeed) {
  EXPECT_TRUE(test::covers_every_world_size(gen_case(RunConfig{}, NormCaseOptions{}), labels));
}

TEST(NormCoverage, ALabelTheDrawCannotMakeIsReportedMissing) {
  // max_world 8: "P=9" is missing at every seed.
  EXPECT_TRUE(test::misses_an_impossible_world(gen_case(RunConfig{}, NormCaseOptions{}), labels));
}

}  // namespace
}  // namespace shardcheck::check
