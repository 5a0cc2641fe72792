// The redistribute suite's configuration coverage (generators/structure.hpp): its structure is
// drawn unscaled, so within the first 30 cases of the exact draw (the one preserves_the_global
// _tensor uses), at every one of 10 seeds, appear: meshes of 1, 2 and 3 dimensions, every kind
// of transition on a mesh dimension (R -> S, S -> R, S(d) -> S(d') with d != d', P -> R,
// P -> S, R -> P, P -> P and no change), an explicit split, nested shards of one tensor
// dimension, every reduce op with a Partial, an empty tensor and a 3-D tensor. A label the draw
// cannot make (a 4-D mesh) is reported missing: the check can fail.
#include "generators/structure.hpp"
#include "suites/redistribute/redistribute_case.hpp"
#include "testing/coverage.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shardcheck::check {
namespace {

char letter(const Placement& p) { return p.is_shard() ? 'S' : p.is_partial() ? 'P' : 'R'; }

std::vector<std::string> labels(const RedistributeCase& c) {
  std::vector<std::string> out = {std::to_string(c.mesh.ndim()) + "-D mesh",
                                  std::to_string(c.global.size()) + "-D tensor"};
  bool partial = false;
  for (std::size_t i = 0; i < c.from.size(); ++i) {
    const Placement &f = c.from[i], &t = c.to[i];
    partial = partial || f.is_partial() || t.is_partial();
    if (f == t) {
      out.emplace_back("no change");
    } else if (f.is_shard() && t.is_shard()) {
      if (f.dim() != t.dim()) out.emplace_back("S -> S along another dimension");
    } else {
      out.push_back(std::string(1, letter(f)) + " -> " + letter(t));
    }
    for (const auto* p : {&f, &t}) {
      if (p->is_shard() && p->policy().kind() == SplitPolicy::Kind::explicit_sizes) {
        out.emplace_back("an explicit split");
      }
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (f.is_shard() && c.from[j].is_shard() && c.from[j].dim() == f.dim()) {
        out.emplace_back("nested shards");
      }
    }
  }
  if (partial) out.push_back("reduce op " + std::string(name(c.op)));
  if (numel(c.global) == 0) out.emplace_back("an empty tensor");
  return out;
}

RedistributeOptions exact() { return RedistributeOptions{RedistributeDraw::exact}; }

TEST(RedistributeCoverage, EveryTransitionMeshAndReduceOpWithin30CasesAtEverySeed) {
  const RunConfig config;
  EXPECT_TRUE(
      test::covers(gen_case(config, exact()),
                   {"1-D mesh", "2-D mesh", "3-D mesh", "R -> S", "S -> R",
                    "S -> S along another dimension", "P -> R", "P -> S", "R -> P", "no change",
                    "an explicit split", "nested shards", "reduce op sum", "reduce op avg",
                    "reduce op max", "reduce op min", "an empty tensor", "3-D tensor"},
                   labels));
}

TEST(RedistributeCoverage, ALabelTheDrawCannotMakeIsReportedMissing) {
  const RunConfig config;
  const auto missing = gen::missing_configurations(gen_case(config, exact()), {"4-D mesh"}, labels);
  ASSERT_EQ(missing.size(), 1U);
  EXPECT_EQ(missing.at("4-D mesh").size(), 10U);
}

}  // namespace
}  // namespace shardcheck::check
