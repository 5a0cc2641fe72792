// The check engine's lockstep under a case driver (engine/case_driver.hpp), without mpirun: a
// fake driver (testing/fake_case_driver.hpp) plays one process of several. Outputs that travel
// as bytes (engine/rank_bytes.hpp) give the verdicts a run without a driver gives; a process
// that is not the checker ends each case with the checker's outcome; a process that drew
// another case, or ended one otherwise, abandons the run; a case with more ranks than
// processes is discarded with the reason. (properties/mpi/ runs the same under mpirun.)
#include "engine/rank_bytes.hpp"
#include "engine/runner.hpp"
#include "engine/suite.hpp"
#include "ops/model/model.hpp"
#include "runtime/exception_holds.hpp"
#include "suites/linear/linear_impl.hpp"
#include "testing/fake_case_driver.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace shardcheck::check {
namespace {

using testing::FakeCaseDriver;
using testing::ScopedCaseDriver;

template <class T>
Tensor<T> ramp(Shape shape, double start) {
  Tensor<T> t(std::move(shape));
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = T(start + static_cast<double>(i));
  return t;
}

TEST(RankBytes, ARanksOutputsComeBackAsTheyWere) {
  LinearRankOutputs<bfloat16> o;
  o.y = ramp<bfloat16>({3, 2}, 1);
  o.dx = ramp<bfloat16>({3, 5}, -4);
  o.dw = ramp<bfloat16>({0, 5}, 0);  // an empty piece keeps its shape
  const auto back = from_bytes<LinearRankOutputs<bfloat16>>(to_bytes(o));
  EXPECT_TRUE(bit_equal(back.y, o.y));
  EXPECT_TRUE(bit_equal(back.dx, o.dx));
  EXPECT_EQ(back.dw.shape(), (Shape{0, 5}));
  EXPECT_EQ(back.db.ndim(), 0U);
}

TEST(RankBytes, AModelStepComesBackWithItsLayersAndItsLoss) {
  ModelStepResult<float> r;
  r.loss = 2.5;
  r.tokens = 7;
  r.grad_norm = 3;
  r.params.layers.resize(2);
  r.params.layers[1].w_down = ramp<float>({2, 3}, 9);
  r.grads.embedding = ramp<acc_t<float>>({4, 2}, 0.5);
  r.input_grads = {ramp<float>({1, 2}, 1), ramp<float>({2, 2}, 5)};
  const auto back = from_bytes<ModelStepResult<float>>(to_bytes(r));
  ASSERT_TRUE(back.loss.has_value());
  EXPECT_EQ(*back.loss, 2.5);
  EXPECT_EQ(back.tokens, 7U);
  EXPECT_EQ(back.grad_norm, 3);
  ASSERT_EQ(back.params.layers.size(), 2U);
  EXPECT_TRUE(bit_equal(back.params.layers[1].w_down, r.params.layers[1].w_down));
  EXPECT_TRUE(bit_equal(back.grads.embedding, r.grads.embedding));
  ASSERT_EQ(back.input_grads.size(), 2U);
  EXPECT_TRUE(bit_equal(back.input_grads[1], r.input_grads[1]));
  ModelStepResult<float> none;  // a stage without the loss
  EXPECT_FALSE(from_bytes<ModelStepResult<float>>(to_bytes(none)).loss.has_value());
}

TEST(RankBytes, ALedgerComesBackEntryForEntry) {
  const auto ledgers = run(3, [](Communicator& c) {
    std::vector<float> x(5, 1.0f);
    c.all_reduce(std::span<float>(x), ReduceOp::sum);
    c.barrier();
  });
  const auto back = from_bytes<Ledger>(to_bytes(ledgers.ledgers[1]));
  ASSERT_EQ(back.size(), ledgers.ledgers[1].size());
  for (std::size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back.entries()[i].to_string(), ledgers.ledgers[1].entries()[i].to_string());
  }
}

TEST(RankBytes, BytesOfAnotherProgramAreAnError) {
  LinearRankOutputs<float> o;
  o.y = ramp<float>({4}, 0);
  auto bytes = to_bytes(o);
  const std::vector<std::byte> cut(bytes.begin(), bytes.end() - 3);
  const auto read = [](const std::vector<std::byte>& b) {
    return test_support::message_of<Error>([&] { (void)from_bytes<LinearRankOutputs<float>>(b); });
  };
  const std::string short_bytes = read(cut);
  EXPECT_NE(short_bytes.find("bytes end before the field"), std::string::npos) << short_bytes;
  bytes.push_back(std::byte{0});
  const std::string extra_bytes = read(bytes);
  EXPECT_NE(extra_bytes.find("hold more than the outputs"), std::string::npos) << extra_bytes;
}

const Suite& linear_suite() {
  register_builtin_suites();
  return *SuiteRegistry::instance().find("linear");
}

PropertyOutcome run_linear(const std::string& property, const std::string& impl, int cases = 40,
                           int max_world = 4) {
  RunParams params;
  params.seed = 20261206;
  params.cases = cases;
  RunConfig config;
  config.max_world = max_world;
  Collector collector;
  return run_property(linear_suite(), property, impl, config, params, collector);
}

// The checker's verdicts on outputs that came through bytes are those of the threads alone, to
// the message and the worst bound ratio: a property that passes and a mutant's shrunk failure.
TEST(Lockstep, TheCheckerGivesTheVerdictsOfARunWithoutADriver) {
  const auto plain_pass = run_linear("matches_reference", "shardcheck");
  const auto plain_fail = run_linear("matches_reference", "mutant:bias-on-every-rank");
  const auto plain_traffic = run_linear("declared_traffic", "shardcheck");
  const FakeCaseDriver checker(4, 0);
  const ScopedCaseDriver scope(checker);
  const auto pass = run_linear("matches_reference", "shardcheck");
  const auto fail = run_linear("matches_reference", "mutant:bias-on-every-rank");
  const auto traffic = run_linear("declared_traffic", "shardcheck");
  EXPECT_TRUE(plain_pass.passed);
  EXPECT_TRUE(pass.passed);
  EXPECT_EQ(pass.cases, plain_pass.cases);
  EXPECT_EQ(pass.max_ratio, plain_pass.max_ratio);
  EXPECT_FALSE(plain_fail.passed);
  EXPECT_FALSE(fail.passed);
  EXPECT_EQ(fail.cases, plain_fail.cases);
  EXPECT_EQ(fail.message, plain_fail.message);
  EXPECT_TRUE(traffic.passed) << traffic.message;
  EXPECT_EQ(traffic.cases, plain_traffic.cases);
  EXPECT_TRUE(checker.abandoned.empty());
}

// Another process compares nothing: a case fails there exactly when the checker says it failed,
// with the checker's message, and passes when the checker says so even for a planted bug.
TEST(Lockstep, AnotherProcessEndsEachCaseWithTheCheckersOutcome) {
  FakeCaseDriver other(4, 2);
  other.checker_says = [](const std::string& v) {
    return v == "p" ? std::string("fthe checker's verdict") : v;
  };
  {
    const ScopedCaseDriver scope(other);
    const auto r = run_linear("matches_reference", "shardcheck");
    EXPECT_FALSE(r.passed);
    EXPECT_EQ(r.message, "the checker's verdict");
  }
  FakeCaseDriver quiet(4, 1);  // the checker passes every case
  const ScopedCaseDriver scope(quiet);
  EXPECT_TRUE(run_linear("matches_reference", "mutant:bias-on-every-rank").passed);
  EXPECT_TRUE(quiet.abandoned.empty());
}

// A process that drew another case than the checker's stops the run, naming both cases.
TEST(Lockstep, AProcessThatDrewAnotherCaseAbandonsTheRun) {
  FakeCaseDriver other(4, 3);
  other.checker_says = [](const std::string& v) {
    return v.find("tokens=") != std::string::npos ? std::string("another case") : v;
  };
  const ScopedCaseDriver scope(other);
  EXPECT_FALSE(run_linear("matches_reference", "shardcheck", 3).passed);
  ASSERT_FALSE(other.abandoned.empty());
  EXPECT_NE(other.abandoned[0].find("where process 0 drew\n  another case"), std::string::npos)
      << other.abandoned[0];
  EXPECT_NE(other.abandoned[0].find("the same seed, cases, max-world and dtypes"),
            std::string::npos);
}

// A process whose own outcome is a failure the checker did not have has left the lockstep: here
// every run throws on this process only (redistribute lets a rank failure fail the case).
TEST(Lockstep, AProcessThatFailedWhereTheCheckerPassedAbandonsTheRun) {
  FakeCaseDriver other(4, 1);
  other.fail_runs = true;
  other.checker_says = [](const std::string& v) { return v[0] == 'f' ? std::string("p") : v; };
  const ScopedCaseDriver scope(other);
  RunParams params;
  params.cases = 3;
  Collector collector;
  register_builtin_suites();
  const auto r =
      run_property(*SuiteRegistry::instance().find("redistribute"), "preserves_the_global_tensor",
                   "shardcheck", RunConfig{}, params, collector);
  EXPECT_FALSE(r.passed);
  ASSERT_FALSE(other.abandoned.empty());
  EXPECT_NE(other.abandoned[0].find("the case stopped with an exception: planted run failure"),
            std::string::npos)
      << other.abandoned[0];
  EXPECT_NE(other.abandoned[0].find("where process 0 ended it with\n  p"), std::string::npos);
}

// A case of more ranks than processes is discarded with the reason; with every case so, RapidCheck
// gives up and says why.
TEST(Lockstep, ACaseOfMoreRanksThanProcessesIsDiscardedWithTheReason) {
  const FakeCaseDriver one(1, 0);
  const ScopedCaseDriver scope(one);
  const auto r = run_linear("replicated_bit_identical", "shardcheck", 10, 4);
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(r.gave_up);
  EXPECT_NE(r.message.find("mpirun started 1 processes"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace shardcheck::check
