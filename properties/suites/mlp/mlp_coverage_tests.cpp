// The mlp suite's configuration coverage (generators/structure.hpp): its structure is drawn
// unscaled, so each activation, with and without bias, with and without sequence parallelism,
// each ffn split kind, a rank without ffn features, each reduce algorithm and each kernel
// appear within the first 30 cases, and every world size 1..8 within the first 60, at every one
// of 10 seeds. A label the draw cannot make ("P=9" with max_world 8) is reported missing: the
// check can fail (linear_coverage_tests shows a scaled world draw failing it).
#include "generators/layout_gen.hpp"
#include "generators/structure.hpp"
#include "suites/mlp/mlp_case.hpp"
#include "testing/coverage.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shardcheck::check {
namespace {

std::vector<std::string> labels(const MlpCase& c) {
  std::vector<std::string> out = {"P=" + std::to_string(c.world),
                                  std::string(name(c.cfg.activation)),
                                  c.has_bias ? "bias" : "no bias",
                                  c.cfg.sequence_parallel ? "sequence parallel" : "tensor parallel",
                                  "ffn split " + gen::policy_kind(c.cfg.ffn_split),
                                  std::string(name(c.cfg.reduce_algorithm)),
                                  "kernel " + std::string(name(c.cfg.kernel))};
  if (gen::has_empty_piece(c.cfg.ffn_split, c.ffn(), c.world)) {
    out.emplace_back("a rank without ffn features");
  }
  return out;
}

TEST(MlpCoverage, EveryActivationSplitAndKernelWithin30CasesAtEverySeed) {
  const RunConfig config;
  EXPECT_TRUE(
      test::covers(gen_case(config, MlpCaseOptions{}),
                   {std::string(name(Activation::gelu)), std::string(name(Activation::gelu_tanh)),
                    std::string(name(Activation::swiglu)), "bias", "no bias", "sequence parallel",
                    "tensor parallel", "ffn split chunk", "ffn split balanced",
                    "ffn split explicit", "a rank without ffn features",
                    std::string(name(Algorithm::ring)), std::string(name(Algorithm::sequential)),
                    "kernel " + std::string(name(Kernel::deterministic)),
                    "kernel " + std::string(name(Kernel::fast))},
                   labels));
}

TEST(MlpCoverage, EveryWorldSizeWithin60CasesAtEverySeed) {
  EXPECT_TRUE(test::covers_every_world_size(gen_case(RunConfig{}, MlpCaseOptions{}), labels));
}

TEST(MlpCoverage, ALabelTheDrawCannotMakeIsReportedMissing) {
  // max_world 8: "P=9" is missing at every seed.
  EXPECT_TRUE(test::misses_an_impossible_world(gen_case(RunConfig{}, MlpCaseOptions{}), labels));
}

}  // namespace
}  // namespace shardcheck::check
