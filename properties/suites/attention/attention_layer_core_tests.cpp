// The property layer_around_the_implementations_core sees the context-parallel core's code
// path on its own: the library's layer around each core mutant fails it (every mutant of the
// ring and all-gather paths that the layer's self-attention can reach), so a user's core is
// checked inside a layer, not only alone. The mutant wrong only when Lq != Lk passes it (the
// layer is self-attention), which shows the property runs the implementation's core and not the
// library's.
#include "engine/runner.hpp"
#include "engine/suite.hpp"

#include <gtest/gtest.h>

#include <string>

namespace shardcheck::check {
namespace {

constexpr const char* kProperty = "layer_around_the_implementations_core";

PropertyOutcome run(const std::string& impl) {
  register_builtin_suites();
  RunParams params;
  params.seed = 1;
  params.cases = 300;
  Collector collector;
  return run_property(*SuiteRegistry::instance().find("attention"), kProperty, impl, RunConfig{},
                      params, collector);
}

TEST(AttentionLayerAroundCore, FailsForEveryCoreMutantTheLayerReaches) {
  for (const char* m :
       {"cp-average-outputs", "cp-local-lse-merge", "cp-merge-by-block-max", "cp-top-left-mask",
        "cp-zigzag-off-by-one", "ring-backward-local-kv", "ring-backward-step-lse",
        "dkdv-not-returned", "all-gather-no-reduce-scatter", "kv-head-i-mod-g"}) {
    EXPECT_FALSE(run(std::string("mutant:") + m).passed) << m << " passed " << kProperty;
  }
}

TEST(AttentionLayerAroundCore, RunsTheImplementationsCoreNotTheLibrarys) {
  // Wrong only when Lq != Lk: the layer's self-attention cannot show it.
  EXPECT_TRUE(run("mutant:causal-top-left-for-bottom-right").passed);
  EXPECT_TRUE(run("shardcheck").passed);
}

}  // namespace
}  // namespace shardcheck::check
