// Measured against predicted (issue 6), as properties: real sharded runs of every partitioned op
// of lib/ops on generated shapes, splits (uneven and empty pieces included), world sizes and
// element types, where
//   (a) every rank's ledger equals the calculator's traffic (budget/traffic.hpp) exactly: the
//       ordered entries (collective, bytes sent, bytes received) of the forward and of the
//       backward, and the per-collective totals (Ledger::calls/bytes_sent/bytes_recv);
//   (b) the tracker (budget/live_bytes.hpp) measures exactly the library's own model
//       (budget/library_activations.hpp): the bytes kept for the backward and the peak of the
//       collective buffers in the forward and in the backward; and every buffer is freed.
// The runs and predictions are in measured_<family>.hpp; the fixed cases in
// measured_figures_tests.cpp and measured_mutants_tests.cpp.
#include "measured_attention.hpp"
#include "measured_linear.hpp"
#include "measured_mlp.hpp"
#include "measured_norm.hpp"
#include "measured_support.hpp"
#include "measured_vocab.hpp"

#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <type_traits>
#include <vector>

namespace shardcheck::budget::measured {
namespace {

// Runs f(std::type_identity<T>{}) for the element type drawn: float64, float32, bfloat16, float16.
template <class F>
void for_drawn_type(F&& f) {
  switch (*rc::gen::inRange(0, 4)) {
    case 0: f(std::type_identity<double>{}); break;
    case 1: f(std::type_identity<float>{}); break;
    case 2: f(std::type_identity<bfloat16>{}); break;
    default: f(std::type_identity<float16>{}); break;
  }
}

// Every rank's measured ledger and tracker equal the model's prediction for it.
void expect_model(const std::vector<Measured>& measured, const Predict& predict) {
  const auto d = compare_all(measured, predict);
  RC_ASSERT(d == std::string());
}

// One property per op: a generated case, a run in the drawn type, the model for it. `run` names
// a function template (run_column), so it cannot be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SHARDCHECK_MEASURED(run, predict, k)      \
  for_drawn_type([&](auto t) {                    \
    using T = typename decltype(t)::type;         \
    expect_model(run<T>(k), predict(k, eb<T>())); \
  })
// NOLINTEND(bugprone-macro-parentheses)

// ------------------------------------------------------------------ column / row parallel

RC_GTEST_PROP(measured, column_parallel_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_linear_case();
  RC_TAG(k.col.sequence_parallel_input ? "sp" : "full x", k.col.gather_output ? "gather" : "");
  SHARDCHECK_MEASURED(run_column, predict_column, k);
}

RC_GTEST_PROP(measured, row_parallel_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_linear_case();
  RC_TAG(k.row.sequence_parallel_output ? "sp" : "all_reduce",
         k.row.input_is_parallel ? "parallel input" : "full input");
  SHARDCHECK_MEASURED(run_row, predict_row, k);
}

// ------------------------------------------------------------------ SP norm and SP block

RC_GTEST_PROP(measured, sp_norm_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_norm_case();
  SHARDCHECK_MEASURED(run_norm, predict_norm, k);
}

RC_GTEST_PROP(measured, sp_block_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_norm_case();
  SHARDCHECK_MEASURED(run_block, predict_block, k);
}

// ------------------------------------------------------------------ tensor-parallel MLP

RC_GTEST_PROP(measured, parallel_mlp_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_mlp_case();
  RC_TAG(k.cfg.sequence_parallel ? "sp" : "all_reduce", std::string(name(k.cfg.activation)));
  SHARDCHECK_MEASURED(run_mlp, predict_mlp, k);
}

// ------------------------------------------------------------------ vocabulary-parallel

RC_GTEST_PROP(measured, vocab_embedding_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_vocab_case();
  SHARDCHECK_MEASURED(run_embedding, predict_embedding, k);
}

RC_GTEST_PROP(measured, vocab_cross_entropy_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_vocab_case();
  SHARDCHECK_MEASURED(run_cross_entropy, predict_cross_entropy, k);
}

// ------------------------------------------------------------------ context-parallel attention

RC_GTEST_PROP(measured, cp_attention_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_cp_case();
  RC_TAG(to_string(k.cc.algorithm), to_string(k.cc.layout));
  SHARDCHECK_MEASURED(run_cp, predict_cp, k);
}

// ------------------------------------------------------------------ head-parallel layer

RC_GTEST_PROP(measured, head_parallel_layer_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_head_case();
  RC_TAG(k.cfg.context_parallel ? "cp" : "no cp", k.cfg.sequence_parallel ? "sp" : "no sp");
  SHARDCHECK_MEASURED(run_head, predict_head, k);
}

}  // namespace
}  // namespace shardcheck::budget::measured
