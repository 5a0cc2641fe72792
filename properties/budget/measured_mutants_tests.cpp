// Mutants of the budget's model (issue 6): for a fixed uneven case per op, the right model equals
// the measured run, and each deliberately wrong model value (traffic or activations) makes the
// comparison with the measured ledger and tracker fail.
#include "measured_attention.hpp"
#include "measured_linear.hpp"
#include "measured_mlp.hpp"
#include "measured_norm.hpp"
#include "measured_support.hpp"
#include "measured_vocab.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::budget::measured {
namespace {

// A fixed uneven case per op, and wrong models: each must make the comparison fail (and the
// right model must pass on the same case).
void expect_mutants_fail(const std::vector<Measured>& ms, const Predict& predict,
                         const std::vector<std::pair<std::string, Mutant>>& mutants) {
  EXPECT_EQ(compare_all(ms, predict), "");
  for (const auto& [name, m] : mutants) {
    EXPECT_NE(compare_all(ms, predict, m), "") << "mutant survived: " << name;
  }
}

Term& term(std::vector<Term>& v, std::size_t i) { return v.at(i); }

TEST(measured_mutants, column_and_row_parallel) {
  LinearCase k = linear_case(3, 7, 3, 5);
  k.col.sequence_parallel_input = true;
  k.col.gather_output = true;
  k.col.token_split = SplitPolicy::explicit_sizes({4, 0, 3});
  k.col.out_split = SplitPolicy::chunk();  // 2, 2, 1
  k.row.input_is_parallel = false;
  k.row.sequence_parallel_output = true;
  k.row.in_split = SplitPolicy::explicit_sizes({0, 1, 2});
  k.row.token_split = k.col.token_split;
  const ElementBytes e = eb<float>();
  expect_mutants_fail(
      run_column<float>(k), predict_column(k, e),
      {{"SP all_gather bytes from the even ring factor (n-1)/n·S",
        [&](Prediction& p, int) {
          p.traffic.forward.at(0).sent = p.traffic.forward.at(0).recv = static_cast<std::uint64_t>(
              collective_bytes(Collective::all_gather, 3, 7.0 * 3 * 4).per_rank);
        }},
       {"backward peak without the full dx (only the re-gathered x)",
        [](Prediction& p, int) { p.act.backward_peak.pop_back(); }},
       {"forward peak without the gathered x (gather_output blocks only)",
        [](Prediction& p, int) { p.act.forward_peak.erase(p.act.forward_peak.begin()); }},
       {"kept x counted as the full [tokens, in]",
        [&](Prediction& p, int) { term(p.act.kept, 0).bytes = std::uint64_t{7} * 3 * 4; }}});
  expect_mutants_fail(run_row<float>(k), predict_row(k, e),
                      {{"reduce_scatter recv taken as S - c_r (the sent formula)",
                        [&](Prediction& p, int r) {
                          const auto counts = split_sizes(k.row.token_split, 7, 3);
                          p.traffic.forward.at(0).recv =
                              (7 - counts[static_cast<std::size_t>(r)]) * 5 * 4;
                        }},
                       {"forward peak 0: the full partial y forgotten",
                        [](Prediction& p, int) { p.act.forward_peak.clear(); }},
                       {"backward without dx's all_gather_last_axis",
                        [](Prediction& p, int) { p.traffic.backward.pop_back(); }}});
}

TEST(measured_mutants, sp_norm_and_block) {
  NormCase k;
  k.p = 3;
  k.hidden = 4;
  k.ffn = 5;
  k.cfg.tokens = 5;
  k.cfg.token_split = SplitPolicy::explicit_sizes({3, 2, 0});
  k.cfg.norm.kind = NormKind::layer_norm;
  k.ffn_split = SplitPolicy::explicit_sizes({1, 0, 4});
  const ElementBytes e = eb<bfloat16>();
  expect_mutants_fail(
      run_norm<bfloat16>(k), predict_norm(k, e),
      {{"dbeta not in the all_reduce",
        [&](Prediction& p, int r) { p.traffic.backward.at(0) = all_reduce_call(4, 2, 3, r); }},
       {"kept x counted over all tokens",
        [](Prediction& p, int) { term(p.act.kept, 0).bytes = std::uint64_t{5} * 4 * 2; }}});
  expect_mutants_fail(run_block<bfloat16>(k), predict_block(k, e),
                      {{"backward collectives in forward order (column before row)",
                        [](Prediction& p, int) {
                          // [row all_gather, column all_gather, column reduce_scatter, norm
                          // all_reduce] -> [column all_gather, column reduce_scatter, row
                          // all_gather, norm all_reduce]
                          auto& b = p.traffic.backward;
                          std::rotate(b.begin(), b.begin() + 1, b.begin() + 3);
                        }},
                       {"backward peak of one gather (x not re-gathered for dW1)",
                        [](Prediction& p, int) { p.act.backward_peak.pop_back(); }},
                       {"a kept for backward counted as a token shard", [&](Prediction& p, int r) {
                          term(p.act.kept, 2).bytes =
                              split_sizes(k.cfg.token_split, 5, 3)[static_cast<std::size_t>(r)] *
                              split_sizes(k.ffn_split, 5, 3)[static_cast<std::size_t>(r)] * 2;
                        }}});
}

TEST(measured_mutants, parallel_mlp) {
  MlpCase k;
  k.p = 3;
  k.tokens = 5;
  k.hidden = 3;
  k.has_bias = true;
  k.cfg.tokens = 5;
  k.cfg.ffn_features = 4;
  k.cfg.activation = Activation::swiglu;
  k.cfg.sequence_parallel = true;
  k.cfg.token_split = SplitPolicy::explicit_sizes({3, 0, 2});
  k.cfg.ffn_split = SplitPolicy::explicit_sizes({1, 3, 0});
  const ElementBytes e = eb<float16>();
  expect_mutants_fail(
      run_mlp<float16>(k), predict_mlp(k, e),
      {{"h kept without swiglu's gate half ([tokens, F_r])",
        [&](Prediction& p, int r) {
          term(p.act.kept, 1).bytes =
              std::uint64_t{5} * split_sizes(k.cfg.ffn_split, 4, 3)[static_cast<std::size_t>(r)] *
              2;
        }},
       {"backward peak of fc2's gathered dy only (x not re-gathered for dW_up)",
        [&](Prediction& p, int r) {
          p.act.backward_peak =
              row_parallel_activations(fc2_config(k.cfg), 5, 4, 3, 3, r, e).backward_peak;
        }},
       {"fc2's forward all_reduces y (no reduce_scatter under sequence parallelism)",
        [](Prediction& p, int r) { p.traffic.forward.at(1) = all_reduce_call(15, 2, 3, r); }},
       {"backward in forward order (fc1's calls first)", [](Prediction& p, int) {
          auto& b =
              p.traffic.backward;  // [fc2 all_gather dy, fc1 all_gather x, fc1 reduce_scatter dx]
          std::rotate(b.begin(), b.begin() + 1, b.end());
        }}});
}

TEST(measured_mutants, vocab_embedding_and_cross_entropy) {
  VocabCase k;
  k.p = 3;
  k.tokens = 5;
  k.hidden = 3;
  k.ids = {0, 6, 2, 6, 1};
  k.emb.vocab = 7;
  k.emb.vocab_split = SplitPolicy::explicit_sizes({0, 5, 2});
  k.emb.sequence_parallel_output = true;
  k.emb.token_split = SplitPolicy::explicit_sizes({2, 3, 0});
  k.ce.vocab = 7;
  k.ce.vocab_split = k.emb.vocab_split;
  k.ce.label_smoothing = 0;
  const ElementBytes e = eb<bfloat16>();
  expect_mutants_fail(
      run_embedding<bfloat16>(k), predict_embedding(k, e),
      {{"forward all_reduce instead of reduce_scatter",
        [](Prediction& p, int r) { p.traffic.forward.at(0) = all_reduce_call(15, 2, 3, r); }},
       {"the ids not kept", [](Prediction& p, int) { p.act.kept.clear(); }},
       {"forward peak without the full partial rows",
        [](Prediction& p, int) { p.act.forward_peak.clear(); }}});
  expect_mutants_fail(
      run_cross_entropy<bfloat16>(k), predict_cross_entropy(k, e),
      {{"3 all_reduces of one float32 per token (the even, smoothing figure)",
        [&](Prediction& p, int) {
          p.traffic.forward.at(1).sent = p.traffic.forward.at(1).recv =
              static_cast<std::uint64_t>(vocab_cross_entropy_bytes(5, 3).per_rank * 2 / 3);
        }},
       {"max and sum_exp kept in T instead of acc_t<T>",
        [](Prediction& p, int) {
          term(p.act.kept, 2).bytes = std::uint64_t{5} * 2;
          term(p.act.kept, 3).bytes = std::uint64_t{5} * 2;
        }},
       {"sums buffer with the smoothing slot",
        [](Prediction& p, int) { term(p.act.forward_peak, 0).bytes = std::uint64_t{3} * 5 * 4; }}});
}

TEST(measured_mutants, cp_attention_ring_and_all_gather) {
  CpCase k = cp_case(3, 7, 2, 1, 2, MaskKind::causal);
  k.batch = 2;
  k.cc.layout = CpLayout::contiguous;
  k.cc.split = SplitPolicy::explicit_sizes({4, 0, 3});
  k.cc.algorithm = CpAlgorithm::ring;
  const ElementBytes e = eb<float16>();
  expect_mutants_fail(
      run_cp<float16>(k), predict_cp(k, e),
      {{"every ring step moves the even chunk 2·b·(s/cp)·g·d",
        [&](Prediction& p, int) {
          const auto even = static_cast<std::uint64_t>(cp_ring_step_bytes(2, 7, 3, 1, 2, 2));
          for (auto& c : p.traffic.forward) c.sent = c.recv = even;
        }},
       {"dK/dV travel in T, not in acc_t<T>",
        [&](Prediction& p, int) {
          for (std::size_t i = 1; i < p.traffic.backward.size(); i += 2) {
            p.traffic.backward[i].sent /= 2;
            p.traffic.backward[i].recv /= 2;
          }
        }},
       {"ring backward peak without the dK/dV buffers",
        [&](Prediction& p, int r) {
          p.act.backward_peak = cp_attention_activations(k.att, k.cc, 2, 3, r, e).forward_peak;
        }},
       {"lse kept in T", [](Prediction& p, int) { term(p.act.kept, 4).bytes /= 2; }}});
  k.cc.algorithm = CpAlgorithm::all_gather;
  k.cc.layout = CpLayout::zigzag;
  k.cc.split = SplitPolicy::explicit_sizes({1, 2, 0, 1, 3, 0});
  expect_mutants_fail(run_cp<float16>(k), predict_cp(k, e),
                      {{"forward peak without the reordered copy (2·N·e)",
                        [](Prediction& p, int) { p.act.forward_peak.pop_back(); }},
                       {"dK/dV reduce_scatter in T",
                        [&](Prediction& p, int r) {
                          auto counts = cp_lengths(k.cc, 3);
                          for (auto& c : counts) c *= std::size_t{2} * 1 * 2;  // b·g·d
                          p.traffic.backward.at(2) = reduce_scatter_call(counts, 2, r);
                        }},
                       {"backward peak without the per-rank reordering",
                        [](Prediction& p, int) { p.act.backward_peak.resize(4); }}});
}

TEST(measured_mutants, head_parallel_layer) {
  HeadCase k;
  k.tp = 4;
  k.cp = 2;
  k.batch = 1;
  k.cfg.attention.q_heads = 4;
  k.cfg.attention.kv_heads = 2;  // g < tp: kv heads shared by pairs
  k.cfg.attention.head_dim = 2;
  k.cfg.hidden = 3;
  k.cfg.attention.mask.q_len = k.cfg.attention.mask.k_len = 5;
  ContextParallelConfig cc;
  cc.seq_len = 5;
  cc.split = SplitPolicy::explicit_sizes({4, 1});
  k.cfg.context_parallel = cc;
  const ElementBytes e = eb<double>();
  expect_mutants_fail(
      run_head<double>(k), predict_head(k, e),
      {{"no kv-group gradient sum",
        [](Prediction& p, int) { p.traffic.backward.erase(p.traffic.backward.end() - 2); }},
       {"cp gradient sum without the biases",
        [&](Prediction& p, int w) {
          const auto a = head_assignment(k.cfg, 4, w % 4);
          const std::size_t hq = a.q_count * 2, hkv = a.kv_count * 2;
          p.traffic.backward.back() = all_reduce_call(hq * 3 + 2 * hkv * 3 + 3 * hq, 8, 2, w / 4);
        }},
       {"lse not kept", [](Prediction& p, int) { p.act.kept.pop_back(); }},
       {"backward peak: the kv pack only", [&](Prediction& p, int) {
          p.act.backward_peak = {{"kv", std::uint64_t{2 * 2 * 3 + 2 * 2} * 8}};
        }}});
}

// The layer with sequence parallelism: (cp, tp) = (2, 3), batch 2, the sequence of 5 cut [3, 2]
// over cp (6 and 4 tokens), token_split chunk (rows 2, 2, 2 and 2, 2, 0: a tp rank without rows),
// h = g = 3, d = 1, hidden 8, no biases: on cp rank 0 the [6, 8] token buffers (192 B) are both
// peaks, above the ring's chunks and the cp pack.
TEST(measured_mutants, head_parallel_layer_sequence_parallel) {
  HeadCase k = head_case(3, 2, 5, 3, 3, 1, 8, true);
  k.cp = 2;
  k.cfg.has_bias = false;
  ContextParallelConfig cc;
  cc.seq_len = 5;
  cc.split = SplitPolicy::explicit_sizes({3, 2});
  k.cfg.context_parallel = cc;
  const ElementBytes e = eb<float>();
  // The bytes of world rank w's [b·L_r, hidden] token buffer.
  auto rows = [&](int w) { return std::uint64_t{k.batch * layer_len(k, w / k.tp) * 8 * 4}; };
  HeadParallelConfig plain = k.cfg;
  plain.sequence_parallel = false;
  expect_mutants_fail(
      run_head<float>(k), predict_head(k, e),
      {{"the peaks of the layer without SP (no token buffer)",
        [&](Prediction& p, int w) {
          const auto a = head_layer_activations(plain, 2, 3, w % 3, 2, w / 3, e);
          p.act.forward_peak = a.forward_peak;
          p.act.backward_peak = a.backward_peak;
        }},
       {"forward peak: the gathered x still live under the full partial y",
        [&](Prediction& p, int w) {
          p.act.forward_peak = {{"x", rows(w)}, {"y", rows(w)}};
        }},
       {"backward peak: x gathered again and the full dx at once (column-parallel's)",
        [&](Prediction& p, int w) {
          p.act.backward_peak = {{"x", rows(w)}, {"dx", rows(w)}};
        }},
       {"kept x: the cp piece's every row",
        [&](Prediction& p, int w) { term(p.act.kept, 0).bytes = rows(w); }},
       {"y all_reduced over tp, not reduce_scattered", [&](Prediction& p, int w) {
          p.traffic.forward.back() = all_reduce_call(rows(w) / 4, 4, 3, w % 3);
        }}});
}

}  // namespace
}  // namespace shardcheck::budget::measured
