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
#include "measured_norm.hpp"
#include "measured_support.hpp"
#include "measured_vocab.hpp"

#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>

namespace shardcheck::budget::measured {
namespace {

#define SHARDCHECK_BY_TYPE(fn, type, ...)     \
  switch (type) {                             \
    case 0: fn<double>(__VA_ARGS__); break;   \
    case 1: fn<float>(__VA_ARGS__); break;    \
    case 2: fn<bfloat16>(__VA_ARGS__); break; \
    default: fn<float16>(__VA_ARGS__); break; \
  }

// ------------------------------------------------------------------ column / row parallel

template <class T>
void check_column(const LinearCase& k) {
  const auto d = compare_all(run_column<T>(k), predict_column(k, eb<T>()));
  RC_ASSERT(d == std::string());
}
template <class T>
void check_row(const LinearCase& k) {
  const auto d = compare_all(run_row<T>(k), predict_row(k, eb<T>()));
  RC_ASSERT(d == std::string());
}

RC_GTEST_PROP(measured, column_parallel_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_linear_case();
  RC_TAG(k.col.sequence_parallel_input ? "sp" : "full x", k.col.gather_output ? "gather" : "");
  SHARDCHECK_BY_TYPE(check_column, *rc::gen::inRange(0, 4), k)
}

RC_GTEST_PROP(measured, row_parallel_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_linear_case();
  RC_TAG(k.row.sequence_parallel_output ? "sp" : "all_reduce",
         k.row.input_is_parallel ? "parallel input" : "full input");
  SHARDCHECK_BY_TYPE(check_row, *rc::gen::inRange(0, 4), k)
}

// ------------------------------------------------------------------ SP norm and SP block

template <class T>
void check_norm(const NormCase& k) {
  const auto d = compare_all(run_norm<T>(k), predict_norm(k, eb<T>()));
  RC_ASSERT(d == std::string());
}
template <class T>
void check_block(const NormCase& k) {
  const auto d = compare_all(run_block<T>(k), predict_block(k, eb<T>()));
  RC_ASSERT(d == std::string());
}

RC_GTEST_PROP(measured, sp_norm_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_norm_case();
  SHARDCHECK_BY_TYPE(check_norm, *rc::gen::inRange(0, 4), k)
}

RC_GTEST_PROP(measured, sp_block_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_norm_case();
  SHARDCHECK_BY_TYPE(check_block, *rc::gen::inRange(0, 4), k)
}

// ------------------------------------------------------------------ vocabulary-parallel

template <class T>
void check_embedding(const VocabCase& k) {
  const auto d = compare_all(run_embedding<T>(k), predict_embedding(k, eb<T>()));
  RC_ASSERT(d == std::string());
}
template <class T>
void check_cross_entropy(const VocabCase& k) {
  const auto d = compare_all(run_cross_entropy<T>(k), predict_cross_entropy(k, eb<T>()));
  RC_ASSERT(d == std::string());
}

RC_GTEST_PROP(measured, vocab_embedding_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_vocab_case();
  SHARDCHECK_BY_TYPE(check_embedding, *rc::gen::inRange(0, 4), k)
}

RC_GTEST_PROP(measured, vocab_cross_entropy_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_vocab_case();
  SHARDCHECK_BY_TYPE(check_cross_entropy, *rc::gen::inRange(0, 4), k)
}

// ------------------------------------------------------------------ context-parallel attention

template <class T>
void check_cp(const CpCase& k) {
  const auto d = compare_all(run_cp<T>(k), predict_cp(k, eb<T>()));
  RC_ASSERT(d == std::string());
}

RC_GTEST_PROP(measured, cp_attention_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_cp_case();
  RC_TAG(to_string(k.cc.algorithm), to_string(k.cc.layout));
  SHARDCHECK_BY_TYPE(check_cp, *rc::gen::inRange(0, 4), k)
}

// ------------------------------------------------------------------ head-parallel layer

template <class T>
void check_head(const HeadCase& k) {
  const auto d = compare_all(run_head<T>(k), predict_head(k, eb<T>()));
  RC_ASSERT(d == std::string());
}

RC_GTEST_PROP(measured, head_parallel_layer_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_head_case();
  RC_TAG(k.cfg.context_parallel ? "cp" : "no cp");
  SHARDCHECK_BY_TYPE(check_head, *rc::gen::inRange(0, 4), k)
}

}  // namespace
}  // namespace shardcheck::budget::measured
