// The budget calculator (lib/budget/): Korthikanti et al. 2022's published check values,
// the ring factors against the runtime's ledger, and parameter accounting on meshes.
#include "budget/activation_memory.hpp"
#include "budget/parameter_memory.hpp"
#include "budget/traffic.hpp"
#include "layout/device_mesh.hpp"
#include "runtime/errors.hpp"
#include "runtime/launcher.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

namespace shardcheck::budget {
namespace {

const TransformerShape gpt3{2048, 1, 12288, 96};
const TransformerShape mt_nlg{2048, 1, 20480, 128};

// Table 2's check values: 5as/h = 80 (GPT-3 175B) and 64 (MT-NLG 530B).
TEST(activation_memory, attention_terms_match_the_paper) {
  EXPECT_DOUBLE_EQ(attention_term(gpt3), 80.0);
  EXPECT_DOUBLE_EQ(attention_term(mt_nlg), 64.0);
}

// Selective recomputation saves 70% (GPT-3) and 65% (MT-NLG), with and without TP + SP.
TEST(activation_memory, selective_recomputation_saves_70_and_65_percent) {
  for (const int t : {1, 8}) {
    for (const bool sp : {false, true}) {
      if (!sp && t > 1) continue;  // the paper's figure is for TP + SP (or no parallelism)
      const ActivationOptions base{t, sp, Recompute::none};
      const ActivationOptions sel{t, sp, Recompute::selective};
      const double g =
          1 - korthikanti_activation_bytes(gpt3, sel) / korthikanti_activation_bytes(gpt3, base);
      const double m = 1 - korthikanti_activation_bytes(mt_nlg, sel) /
                               korthikanti_activation_bytes(mt_nlg, base);
      EXPECT_EQ(std::lround(100 * g), 70) << "t=" << t << " sp=" << sp;
      EXPECT_EQ(std::lround(100 * m), 65) << "t=" << t << " sp=" << sp;
    }
  }
}

TEST(activation_memory, the_rows_of_table_2) {
  const TransformerShape m{2, 3, 5, 7};  // s b h a
  const double sbh = 2 * 3 * 5;
  const double attn = 5.0 * 7 * 2 / 5;  // 5as/h = 14
  EXPECT_DOUBLE_EQ(korthikanti_activation_bytes(m, {1, false, Recompute::none}), sbh * (34 + attn));
  EXPECT_DOUBLE_EQ(korthikanti_activation_bytes(m, {4, false, Recompute::none}),
                   sbh * (10 + 24.0 / 4 + attn / 4));
  EXPECT_DOUBLE_EQ(korthikanti_activation_bytes(m, {4, true, Recompute::none}),
                   sbh * (34.0 / 4 + attn / 4));
  EXPECT_DOUBLE_EQ(korthikanti_activation_bytes(m, {4, false, Recompute::selective}),
                   sbh * (10 + 24.0 / 4));
  EXPECT_DOUBLE_EQ(korthikanti_activation_bytes(m, {4, true, Recompute::selective}), sbh * 34 / 4);
  EXPECT_DOUBLE_EQ(korthikanti_activation_bytes(m, {4, true, Recompute::full}), 2 * sbh);
  EXPECT_EQ(table2_row({4, true, Recompute::selective}), "TP + SP + selective recomputation");
  EXPECT_THROW(korthikanti_activation_bytes({0, 1, 1, 1}, {}), UsageError);
}

// The calculator's ring bytes equal what the runtime's ledger records, exactly, when the
// buffer splits evenly over the ranks.
RC_GTEST_PROP(traffic, ring_factors_equal_the_ledger, ()) {
  const int n = *rc::gen::inRange(1, 9);
  const std::size_t per = *rc::gen::inRange<std::size_t>(0, 9);
  const std::size_t count = per * static_cast<std::size_t>(n);
  std::vector<Ledger> ledgers(static_cast<std::size_t>(n));
  run(n, [&](Communicator& c) {
    std::vector<float> buf(count, 1.0f), piece(per);
    c.all_reduce(std::span<float>(buf), ReduceOp::sum);
    c.all_gather(std::span<const float>(piece), std::span<float>(buf));
    c.reduce_scatter(std::span<const float>(buf), std::span<float>(piece), ReduceOp::sum);
    ledgers[static_cast<std::size_t>(c.rank())] = c.ledger();
  });
  const auto S = static_cast<double>(count * sizeof(float));
  for (const auto& l : ledgers) {
    RC_ASSERT(static_cast<double>(l.entries().at(0).bytes_sent) ==
              collective_bytes(Collective::all_reduce, n, S).per_rank);
    RC_ASSERT(static_cast<double>(l.entries().at(1).bytes_sent) ==
              collective_bytes(Collective::all_gather, n, S).per_rank);
    RC_ASSERT(static_cast<double>(l.entries().at(2).bytes_recv) ==
              collective_bytes(Collective::reduce_scatter, n, S).per_rank);
  }
}

TEST(traffic, per_layer_counts_and_the_cp_ring) {
  const auto tp = tensor_parallel_layer_traffic(2048, 1, 12288, 8, false, 2);
  EXPECT_EQ(tp.all_reduces, 4);
  const auto sp = tensor_parallel_layer_traffic(2048, 1, 12288, 8, true, 2);
  EXPECT_EQ(sp.all_gathers, 4);
  EXPECT_EQ(sp.reduce_scatters, 4);
  // Same bandwidth: all_reduce = reduce_scatter + all_gather.
  EXPECT_DOUBLE_EQ(tp.bytes.per_rank, sp.bytes.per_rank);
  EXPECT_DOUBLE_EQ(tp.bytes.aggregate, 8 * tp.bytes.per_rank);
  EXPECT_DOUBLE_EQ(cp_ring_step_bytes(1, 8192, 4, 8, 128, 2), 2.0 * 2048 * 8 * 128 * 2);
  EXPECT_DOUBLE_EQ(cp_ring_forward_bytes(1, 8192, 4, 8, 128, 2),
                   3 * cp_ring_step_bytes(1, 8192, 4, 8, 128, 2));
  EXPECT_DOUBLE_EQ(vocab_cross_entropy_bytes(1000, 4).per_rank, 3 * 2 * 0.75 * 4000);
  EXPECT_THROW(collective_bytes(Collective::send, 2, 8), UsageError);
}

// Per-rank parameter bytes summed over the world equal the model's bytes times each
// parameter's replica count, on generated meshes and models.
RC_GTEST_PROP(parameters, per_rank_bytes_sum_to_bytes_times_replicas, ()) {
  const int pp = *rc::gen::inRange(1, 4);
  const int dp = *rc::gen::inRange(1, 3);
  const int cp = *rc::gen::inRange(1, 3);
  const int tp = *rc::gen::inRange(1, 5);
  std::vector<MeshDim> dims = {{"pp", pp}, {"dp", dp}, {"cp", cp}, {"tp", tp}};
  const auto order = *rc::gen::element(0, 1);
  if (order == 1) std::swap(dims[1], dims[3]);  // any order of the names
  const DeviceMesh mesh(dims);
  const auto layers = *rc::gen::inRange<std::uint64_t>(1, 7);
  const auto h = *rc::gen::inRange<std::uint64_t>(1, 17);
  const auto vocab = *rc::gen::inRange<std::uint64_t>(1, 50);
  const auto params = gpt_parameters(layers, h, vocab, pp);
  const auto a = account_parameters(params, mesh, 2);
  std::uint64_t want = 0;
  for (std::size_t k = 0; k < params.size(); ++k) {
    want += params[k].elements * 2 * static_cast<std::uint64_t>(a.replicas[k]);
    RC_ASSERT(a.replicas[k] == dp * cp * (params[k].tp_sharded ? 1 : tp));
  }
  const auto got =
      std::accumulate(a.bytes_per_rank.begin(), a.bytes_per_rank.end(), std::uint64_t{0});
  RC_ASSERT(got == want);
}

// Every UsageError of the calculator names the value at fault and what to pass.
TEST(budget, usage_errors_name_the_value_and_what_to_pass) {
  test::expect_usage_errors(std::vector<test::UsageCase>{
      {"a stage outside the mesh",
       [] {
         (void)account_parameters({{"w", 4, true, 2}}, DeviceMesh({{"pp", 2}, {"tp", 2}}), 2);
       },
       {"parameter w is on pipeline stage 2 but mesh (pp=2, tp=2) has 2 stage(s)",
        "pass a stage in [0, 2) or add a pp dimension of that size"}},
      {"a model shape that is not positive",
       [] {
         (void)korthikanti_activation_bytes({0, 1, 1, 1}, {});
       },
       {"activation memory: s, b, h, a must be positive and tp at least 1 (got s=0.000000, "
        "b=1.000000"}},
      {"tp below 1",
       [] {
         (void)korthikanti_activation_bytes(gpt3, {0, false, Recompute::none});
       },
       {"tp at least 1", "tp=0)"}},
      {"a group of no ranks",
       [] { (void)collective_bytes(Collective::all_reduce, 0, 8); },
       {"collective_bytes: n = 0 ranks; pass the group size n >= 1"}},
      {"a call without a ring factor",
       [] { (void)collective_bytes(Collective::send, 2, 8); },
       {"collective_bytes: send has no ring factor; count its messages instead"}},
      {"an integer element type",
       [] { (void)element_bytes(DType::int32); },
       {"element_bytes: int32 is not a floating-point type",
        "pass float64, float32, bfloat16 or float16"}},
  });
}

}  // namespace
}  // namespace shardcheck::budget
