// The model suite's configuration coverage (generators/structure.hpp): its structure is drawn
// unscaled, so every mesh axis above 1, sequence parallelism, a tied embedding, both cp layouts
// and algorithms, a kv head shared by tp ranks, an empty pipeline stage, clipping and a model
// with no layer appear within the first 30 cases, and every world size 1..8 within the first 60,
// at every one of 10 seeds. The world-size test can fail (an impossible P = 9 is missing at all
// seeds, checked below).
#include "suites/model/model_case.hpp"
#include "testing/coverage.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shardcheck::check {
namespace {

std::vector<std::string> labels(const ModelCase& c) {
  const auto& p = c.par;
  std::vector<std::string> out = {"P=" + std::to_string(c.world)};
  auto add = [&](bool on, const char* label) {
    if (on) out.emplace_back(label);
  };
  add(p.pp > 1, "pp > 1");
  add(p.dp > 1, "dp > 1");
  add(p.cp > 1, "cp > 1");
  add(p.tp > 1, "tp > 1");
  add(p.sequence_parallel && p.tp > 1, "sequence parallel");
  add(c.cfg.tied_embedding, "tied embedding");
  add(p.cp > 1 && p.cp_layout == CpLayout::zigzag, "zigzag");
  add(p.cp > 1 && p.cp_algorithm == CpAlgorithm::all_gather, "all_gather cp");
  add(c.cfg.kv_heads < static_cast<std::size_t>(p.tp), "kv head shared by tp ranks");
  add(p.micro_batches > 1, "micro-batches");
  add(c.opt.max_grad_norm > 0, "clipping");
  add(c.cfg.layers == 0, "no layer");
  if (p.pp > 1) {
    for (const Piece& s : split(p.layer_split, c.cfg.layers, p.pp)) {
      if (s.size == 0) {
        out.emplace_back("an empty stage");
        break;
      }
    }
  }
  return out;
}

TEST(ModelCoverage, EveryAxisAndSeamWithin30CasesAtEverySeed) {
  EXPECT_TRUE(
      test::covers(gen_case(RunConfig{}, ModelCaseOptions{}),
                   {"pp > 1", "dp > 1", "cp > 1", "tp > 1", "sequence parallel", "tied embedding",
                    "zigzag", "all_gather cp", "kv head shared by tp ranks", "micro-batches",
                    "clipping", "no layer", "an empty stage"},
                   labels));
}

TEST(ModelCoverage, EveryWorldSizeWithin60CasesAtEverySeed) {
  EXPECT_TRUE(test::covers_every_world_size(gen_case(RunConfig{}, ModelCaseOptions{}), labels));
  EXPECT_TRUE(test::misses_an_impossible_world(gen_case(RunConfig{}, ModelCaseOptions{}), labels));
}

}  // namespace
}  // namespace shardcheck::check
