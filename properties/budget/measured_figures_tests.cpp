// The budget's reference figures (docs/budget.md quotes them): fixed uneven configurations of the
// column-parallel layer, of context-parallel attention (ring and all-gather) and of the attention
// layer with and without sequence parallelism measured per rank, the tracker's kept bytes and peaks
// and the ledger's bytes sent, each equal to the model's, and printed.
#include "measured_attention.hpp"
#include "measured_linear.hpp"
#include "measured_support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace shardcheck::budget::measured {
namespace {

// Measured figures of fixed uneven configurations (docs/budget.md quotes them): per rank, the
// tracker's kept bytes and peaks and the ledger's bytes sent, each equal to the model's.
void print_figures(const char* what, const std::vector<Measured>& ms, const Predict& predict) {
  EXPECT_EQ(compare_all(ms, predict), "") << what;
  std::printf("%s\n", what);
  for (std::size_t r = 0; r < ms.size(); ++r) {
    std::uint64_t sent = 0;
    for (const auto& [op, t] : ms[r].totals) sent += t.sent;
    const auto p = predict(static_cast<int>(r));
    std::printf("  rank %zu: kept %llu B, forward peak %llu B, backward peak %llu B, sent %llu B",
                r, static_cast<unsigned long long>(ms[r].kept),
                static_cast<unsigned long long>(ms[r].fwd_peak),
                static_cast<unsigned long long>(ms[r].bwd_peak),
                static_cast<unsigned long long>(sent));
    std::printf("; backward peak terms:");
    for (const auto& t : p.act.backward_peak) {
      std::printf(" [%s %llu]", t.name.c_str(), static_cast<unsigned long long>(t.bytes));
    }
    std::printf("\n");
  }
}

TEST(measured, reference_figures) {
  LinearCase lin = linear_case(4, 10, 8, 12);  // 10 tokens over 4 ranks by chunk: 3, 3, 3, 1
  lin.col.sequence_parallel_input = true;
  lin.col.gather_output = true;
  print_figures("column-parallel float32, SP input + gather_output, tokens 10, in 8, out 12",
                run_column<float>(lin), predict_column(lin, eb<float>()));
  CpCase cp = cp_case(4, 10, 4, 2, 8, MaskKind::causal);
  print_figures("CP ring bfloat16, seq 10 contiguous by chunk (3, 3, 3, 1), h 4, g 2, d 8",
                run_cp<bfloat16>(cp), predict_cp(cp, eb<bfloat16>()));
  cp.cc.algorithm = CpAlgorithm::all_gather;
  print_figures("CP all-gather bfloat16, the same shapes", run_cp<bfloat16>(cp),
                predict_cp(cp, eb<bfloat16>()));
  // tp 4, no CP: one head per rank, 10 tokens (3, 3, 3, 1 by chunk).
  HeadCase sp = head_case(4, 1, 10, 4, 4, 8, 32, true);
  print_figures(
      "attention layer bfloat16 with SP, tp 4, seq 10 (3, 3, 3, 1), h = g = 4, d 8, "
      "hidden 32",
      run_head<bfloat16>(sp), predict_head(sp, eb<bfloat16>()));
  sp.cfg.sequence_parallel = false;
  print_figures("attention layer bfloat16 without SP, the same shapes", run_head<bfloat16>(sp),
                predict_head(sp, eb<bfloat16>()));
}

}  // namespace
}  // namespace shardcheck::budget::measured
