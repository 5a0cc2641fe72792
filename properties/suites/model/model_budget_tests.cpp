// The step's activation memory measured against its model (lib/budget/model_activations.hpp): on
// generated cases (the model suite's draw: every mesh, uneven splits, sequence and context
// parallelism, micro-batches), each rank runs the library's step under a live-bytes count
// (ops/workspace.hpp), which the step's ops add their collective buffers to and the step its kept
// activations; the most bytes live at once must equal the model's peak exactly, and nothing may
// stay live after the step.
#include "budget/model_activations.hpp"
#include "ops/model/model.hpp"
#include "ops/workspace.hpp"
#include "suites/model/model_case.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace shardcheck::check {
namespace {

struct Counted {
  std::uint64_t peak = 0, live_after = 0;
};

template <class T>
std::vector<Counted> measure(const ModelCase& c) {
  const ModelData<T> d = *gen_data<T>(c);
  std::vector<ModelParams<T>> shards;
  shards.reserve(static_cast<std::size_t>(c.world));
  for (int r = 0; r < c.world; ++r) shards.push_back(shard_model_params(c.cfg, c.par, d.params, r));
  return test::on_ranks<Counted>(c.world, [&](Communicator& comm) {
    LiveByteCount count;
    {
      const Workspace::CountingScope scope(count);
      (void)model_train_step(comm, c.cfg, c.par, c.opt,
                             shards[static_cast<std::size_t>(comm.rank())], d.batch);
    }
    return Counted{count.peak(), count.live()};
  });
}

RC_GTEST_PROP(ModelBudget, PeakLiveBytesEqualTheModelOnEveryRank, ()) {
  const ModelCase c = *gen_case(RunConfig{}, ModelCaseOptions{});
  std::vector<Counted> got;
  visit_float_dtype(c.dtype, [&]<class T>(T) { got = measure<T>(c); });
  for (int r = 0; r < c.world; ++r) {
    const auto want = budget::model_step_activations(c.cfg, c.par, c.sequences, c.seq_len, r,
                                                     budget::element_bytes(c.dtype));
    const Counted& g = got[static_cast<std::size_t>(r)];
    std::string terms;
    for (const auto& t : want.peak_terms) terms += "\n  " + t.name + ": " + std::to_string(t.bytes);
    RC_ASSERT_FALSE(g.live_after != 0);
    if (g.peak != want.peak) {
      RC_FAIL("rank " + std::to_string(r) + " of " + c.describe() + ": measured peak " +
              std::to_string(g.peak) + " B, the model says " + std::to_string(want.peak) +
              " B at " + want.at + ":" + terms);
    }
  }
}

}  // namespace
}  // namespace shardcheck::check
