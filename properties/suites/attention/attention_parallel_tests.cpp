// Unit tests of the partitioned attention ops (lib/ops/attention/context_parallel_attention.hpp,
// lib/ops/attention/head_parallel_attention.hpp): the layouts' positions, the head assignment and
// its refusals, the bit-exact relations to the dense op that hold by construction, the traffic each
// algorithm declares (asserted exactly from the ledger), and the usage errors. Agreement with
// the high-precision reference under the derived bounds, for generated cases and mutants, is
// the attention suite's job (properties/suites/attention/).
#include "layout/device_mesh.hpp"
#include "ops/attention/attention.hpp"
#include "ops/attention/context_parallel_attention.hpp"
#include "ops/attention/head_parallel_attention.hpp"
#include "testing/ops_test_util.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numeric>
#include <string>

namespace shardcheck {
namespace {

using namespace test;  // the suites' test helpers (testing/ops_test_util.hpp)
using ::testing::HasSubstr;

ContextParallelConfig cp_config(std::size_t len, CpLayout layout, SplitPolicy split,
                                CpAlgorithm algo) {
  ContextParallelConfig c;
  c.seq_len = len;
  c.layout = layout;
  c.split = std::move(split);
  c.algorithm = algo;
  return c;
}

AttentionConfig attn_config(std::size_t h, std::size_t g, std::size_t d, std::size_t len,
                            MaskKind kind) {
  AttentionConfig c;
  c.q_heads = h;
  c.kv_heads = g;
  c.head_dim = d;
  c.mask.kind = kind;
  c.mask.q_len = len;
  c.mask.k_len = len;
  return c;
}

// ------------------------------------------------------------------ positions

TEST(cp_positions, contiguous_layout_gives_each_rank_its_piece) {
  const auto c =
      cp_config(7, CpLayout::contiguous, SplitPolicy::explicit_sizes({3, 0, 4}), CpAlgorithm::ring);
  EXPECT_EQ(cp_positions(c, 3, 0), (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_TRUE(cp_positions(c, 3, 1).empty());
  EXPECT_EQ(cp_positions(c, 3, 2), (std::vector<std::size_t>{3, 4, 5, 6}));
}

TEST(cp_positions, zigzag_layout_gives_rank_r_chunks_r_and_2cp_minus_1_minus_r) {
  // 10 positions in 2·cp = 4 chunks of 3, 3, 2, 2 (balanced): rank 0 holds chunks 0 and 3,
  // rank 1 chunks 1 and 2 (Megatron-LM's and Llama 3's load-balanced layout).
  const auto c = cp_config(10, CpLayout::zigzag, SplitPolicy::balanced(), CpAlgorithm::ring);
  EXPECT_EQ(cp_positions(c, 2, 0), (std::vector<std::size_t>{0, 1, 2, 8, 9}));
  EXPECT_EQ(cp_positions(c, 2, 1), (std::vector<std::size_t>{3, 4, 5, 6, 7}));
}

TEST(cp_positions, every_layout_tiles_the_sequence_exactly_once) {
  for (auto layout : {CpLayout::contiguous, CpLayout::zigzag}) {
    for (int cp = 1; cp <= 5; ++cp) {
      for (std::size_t len : {0UL, 1UL, 7UL, 13UL}) {
        for (const auto& split :
             test::policies_for(len, layout == CpLayout::zigzag ? 2 * cp : cp)) {
          const auto c = cp_config(len, layout, split, CpAlgorithm::ring);
          std::vector<int> seen(len, 0);
          for (int r = 0; r < cp; ++r) {
            for (auto pos : cp_positions(c, cp, r)) ++seen.at(pos);
          }
          for (std::size_t i = 0; i < len; ++i) {
            EXPECT_EQ(seen[i], 1) << to_string(layout) << " cp=" << cp << " len=" << len
                                  << " split=" << split.to_string() << " position " << i;
          }
        }
      }
    }
  }
}

TEST(cp_positions, a_split_that_cannot_tile_the_sequence_is_refused_with_its_sizes) {
  const auto c =
      cp_config(6, CpLayout::zigzag, SplitPolicy::explicit_sizes({3, 3}), CpAlgorithm::ring);
  const auto msg = usage_error_of([&] { (void)cp_positions(c, 2, 0); });
  EXPECT_THAT(msg, HasSubstr("zigzag layout, cp = 2, 4 pieces of seq_len = 6"));
  EXPECT_THAT(usage_error_of([&] { (void)cp_positions(c, 2, 2); }),
              HasSubstr("rank 2 is not in a cp group of 2"));
}

// ------------------------------------------------------------------ head assignment

HeadParallelConfig head_config(std::size_t h, std::size_t g) {
  HeadParallelConfig c;
  c.attention = attn_config(h, g, 2, 3, MaskKind::none);
  c.hidden = 4;
  return c;
}

TEST(head_assignment, g_at_least_tp_gives_whole_kv_groups_with_their_query_heads) {
  const auto c = head_config(8, 4);  // group size 2
  for (int r = 0; r < 2; ++r) {
    const auto a = head_assignment(c, 2, r);
    EXPECT_EQ(a.kv_offset, 2U * static_cast<std::size_t>(r));
    EXPECT_EQ(a.kv_count, 2U);
    EXPECT_EQ(a.q_offset, 4U * static_cast<std::size_t>(r));
    EXPECT_EQ(a.q_count, 4U);
    EXPECT_EQ(a.kv_replicas, 1);
  }
  auto uneven = c;
  uneven.kv_head_split = SplitPolicy::explicit_sizes({3, 0, 1});
  EXPECT_EQ(head_assignment(uneven, 3, 1).q_count, 0U);
  EXPECT_EQ(head_assignment(uneven, 3, 2).q_offset, 6U);
}

TEST(head_assignment, tp_above_g_replicates_kv_head_r_div_tp_over_g_never_r_mod_g) {
  // h = 8, g = 2, tp = 4: ranks 0, 1 share kv head 0; ranks 2, 3 kv head 1 (r mod g would give
  // rank 1 kv head 1, whose query heads it does not hold).
  const auto c = head_config(8, 2);
  const std::size_t kv[] = {0, 0, 1, 1};
  const std::size_t q[] = {0, 2, 4, 6};
  for (int r = 0; r < 4; ++r) {
    const auto a = head_assignment(c, 4, r);
    EXPECT_EQ(a.kv_offset, kv[r]) << "rank " << r;
    EXPECT_EQ(a.kv_count, 1U);
    EXPECT_EQ(a.q_offset, q[r]) << "rank " << r;
    EXPECT_EQ(a.q_count, 2U);
    EXPECT_EQ(a.kv_replicas, 2);
    EXPECT_EQ(a.kv_group_first, r / 2 * 2);
  }
  // MQA: one kv head on every rank.
  const auto mqa = head_assignment(head_config(4, 1), 4, 3);
  EXPECT_EQ(mqa.kv_offset, 0U);
  EXPECT_EQ(mqa.q_offset, 3U);
  EXPECT_EQ(mqa.kv_replicas, 4);
}

TEST(head_assignment, a_configuration_with_no_valid_mapping_is_refused_naming_the_constraint) {
  EXPECT_THAT(usage_error_of([] { (void)head_assignment(head_config(6, 4), 2, 0); }),
              HasSubstr("g must be ≥ 1 and divide h"));
  EXPECT_THAT(usage_error_of([] { (void)head_assignment(head_config(6, 2), 3, 0); }),
              HasSubstr("g must divide tp"));
  EXPECT_THAT(
      usage_error_of([] { (void)head_assignment(head_config(6, 2), 4, 0); }),
      HasSubstr("the h/g = 3 query heads of a kv head must split evenly over the tp/g = 2"));
  EXPECT_THAT(usage_error_of([] { (void)head_assignment(head_config(4, 2), 8, 0); }),
              HasSubstr("must split evenly over the tp/g = 4 ranks"));
  auto bad = head_config(4, 4);
  bad.kv_head_split = SplitPolicy::explicit_sizes({1, 1});
  EXPECT_THAT(usage_error_of([&] { (void)head_assignment(bad, 2, 0); }),
              HasSubstr("kv_head_split explicit[1,1] cannot split the g kv heads"));
}

// ------------------------------------------------------------------ context parallel

struct QKV {
  Tensor<double> q, k, v, dout;
};

QKV random_qkv(std::size_t batch, std::size_t len, std::size_t h, std::size_t g, std::size_t d,
               std::uint64_t seed) {
  return {random_tensor<double>({batch, len, h, d}, seed),
          random_tensor<double>({batch, len, g, d}, seed + 1),
          random_tensor<double>({batch, len, g, d}, seed + 2),
          random_tensor<double>({batch, len, h, d}, seed + 3)};
}

template <class T>
bool same_bits(const Tensor<T>& a, const Tensor<T>& b) {
  return bit_equal(a, b);
}

// With one cp rank the ring is one step merged into the empty accumulator (weight exp(0) = 1,
// l = 1, lse + log 1): the dense op's bits.
TEST(context_parallel_attention, one_rank_reproduces_the_dense_op_bitwise) {
  const auto cfg = attn_config(4, 2, 3, 6, MaskKind::causal);
  const auto x = random_qkv(2, 6, 4, 2, 3, 11);
  const auto dense = attention_forward(cfg, x.q, x.k, x.v);
  const auto dgrads = attention_backward(cfg, x.q, x.k, x.v, dense, x.dout);
  for (auto algo : {CpAlgorithm::ring, CpAlgorithm::all_gather}) {
    const auto cc = cp_config(6, CpLayout::contiguous, SplitPolicy::chunk(), algo);
    run(1, [&](Communicator& cp) {
      const auto o = context_parallel_attention(cp, cfg, cc, x.q, x.k, x.v);
      EXPECT_TRUE(same_bits(o.out, dense.out)) << to_string(algo);
      EXPECT_TRUE(same_bits(o.lse, dense.lse)) << to_string(algo);
      const auto g = context_parallel_attention_backward(cp, cfg, cc, x.q, x.k, x.v, o, x.dout);
      EXPECT_TRUE(same_bits(g.dq, dgrads.dq)) << to_string(algo);
      EXPECT_TRUE(same_bits(g.dk, dgrads.dk)) << to_string(algo);
      EXPECT_TRUE(same_bits(g.dv, dgrads.dv)) << to_string(algo);
    });
  }
}

// The all-gather variant with the contiguous layout puts every key in sequence order, so each
// query row is computed exactly as the dense op computes it: out, lse and dq bitwise.
TEST(context_parallel_attention, all_gather_contiguous_rows_are_the_dense_rows_bitwise) {
  const std::size_t len = 9;
  const auto cfg = attn_config(2, 1, 4, len, MaskKind::causal);
  const auto x = random_qkv(2, len, 2, 1, 4, 21);
  const auto dense = attention_forward(cfg, x.q, x.k, x.v);
  const auto dgrads = attention_backward(cfg, x.q, x.k, x.v, dense, x.dout);
  const auto cc = cp_config(len, CpLayout::contiguous, SplitPolicy::explicit_sizes({4, 0, 5}),
                            CpAlgorithm::all_gather);
  run(3, [&](Communicator& cp) {
    const auto pos = cp_positions(cc, 3, cp.rank());
    const auto q = take_positions(x.q, pos), k = take_positions(x.k, pos),
               v = take_positions(x.v, pos), dout = take_positions(x.dout, pos);
    const auto o = context_parallel_attention(cp, cfg, cc, q, k, v);
    EXPECT_TRUE(same_bits(o.out, take_positions(dense.out, pos))) << "rank " << cp.rank();
    EXPECT_TRUE(same_bits(o.lse, take_lse_positions(dense.lse, pos))) << "rank " << cp.rank();
    const auto g = context_parallel_attention_backward(cp, cfg, cc, q, k, v, o, dout);
    EXPECT_TRUE(same_bits(g.dq, take_positions(dgrads.dq, pos))) << "rank " << cp.rank();
  });
}

// Decode and chunked prefill on a cp group (Lq != Lk): the queries cut by the layout over Lq,
// the keys over Lk; with all_gather and the contiguous layout every key is in sequence order, so
// each query row is the dense op's bitwise, and the dk, dv of every rank add up to the dense
// ones (each rank's own keys, reduce_scattered). A rank may hold no query at all.
TEST(context_parallel_attention, decode_and_chunked_prefill_rows_are_the_dense_rows_bitwise) {
  for (const std::size_t lq : {std::size_t{1}, std::size_t{3}}) {
    const std::size_t lk = 7;
    auto cfg = attn_config(2, 1, 2, lk, MaskKind::causal);
    cfg.mask.q_len = lq;  // bottom-right: the last query sees every key
    const auto xq = random_qkv(1, lq, 2, 1, 2, 31);
    const auto xk = random_qkv(1, lk, 2, 1, 2, 32);
    const auto dense = attention_forward(cfg, xq.q, xk.k, xk.v);
    const auto dgrads = attention_backward(cfg, xq.q, xk.k, xk.v, dense, xq.dout);
    auto cc = cp_config(lk, CpLayout::contiguous, SplitPolicy::explicit_sizes({2, 0, 5}),
                        CpAlgorithm::all_gather);
    cc.q_seq_len = lq;
    run(3, [&](Communicator& cp) {
      const auto qpos = cp_query_positions(cc, 3, cp.rank());
      const auto kpos = cp_positions(cc, 3, cp.rank());
      const auto q = take_positions(xq.q, qpos), dout = take_positions(xq.dout, qpos);
      const auto k = take_positions(xk.k, kpos), v = take_positions(xk.v, kpos);
      const auto o = context_parallel_attention(cp, cfg, cc, q, k, v);
      EXPECT_TRUE(same_bits(o.out, take_positions(dense.out, qpos))) << "Lq=" << lq;
      EXPECT_TRUE(same_bits(o.lse, take_lse_positions(dense.lse, qpos))) << "Lq=" << lq;
      const auto g = context_parallel_attention_backward(cp, cfg, cc, q, k, v, o, dout);
      EXPECT_TRUE(same_bits(g.dq, take_positions(dgrads.dq, qpos))) << "Lq=" << lq;
      EXPECT_EQ(g.dk.shape(), k.shape());
    });
  }
}

// The traffic of each algorithm, exactly: per rank, element type and count of every call.
struct Call {
  Collective op;
  DType dtype;
  std::uint64_t count;
  bool operator==(const Call&) const = default;
};

std::vector<Call> calls_of(const Ledger& l) {
  std::vector<Call> out;
  for (const auto& e : l.entries()) out.push_back({e.op, e.dtype, e.count});
  return out;
}

TEST(context_parallel_attention, ring_moves_cp_minus_1_kv_chunks_forward_and_dkdv_cp_times_back) {
  const std::size_t len = 7, batch = 2, g = 1, d = 3;
  const int cp_size = 3;
  const auto cfg = attn_config(2, g, d, len, MaskKind::causal);
  const auto x = random_qkv(batch, len, 2, g, d, 31);
  for (auto layout : {CpLayout::contiguous, CpLayout::zigzag}) {
    const auto cc = cp_config(len, layout, SplitPolicy::chunk(), CpAlgorithm::ring);
    std::vector<std::vector<std::size_t>> pos;
    pos.reserve(static_cast<std::size_t>(cp_size));
    for (int r = 0; r < cp_size; ++r) pos.push_back(cp_positions(cc, cp_size, r));
    std::vector<Ledger> fwd_ledgers(cp_size), bwd_ledgers(cp_size);
    auto result = run(cp_size, [&](Communicator& cp) {
      const auto& p = pos[static_cast<std::size_t>(cp.rank())];
      const auto q = take_positions(x.q, p), k = take_positions(x.k, p), v = take_positions(x.v, p),
                 dout = take_positions(x.dout, p);
      const auto o = context_parallel_attention(cp, cfg, cc, q, k, v);
      (void)context_parallel_attention_backward(cp, cfg, cc, q, k, v, o, dout);
    });
    for (int r = 0; r < cp_size; ++r) {
      // Forward: steps 0..cp−2 send the chunk held (own, then r−1's, ...): 2·batch·L·g·d of T.
      // Backward: the same K/V shifts, then dK/dV (in A = float64 here) cp times.
      std::vector<Call> want;
      auto chunk = [&](int step) {
        return 2 * batch * pos[static_cast<std::size_t>((r - step + cp_size) % cp_size)].size() *
               g * d;
      };
      for (int s = 0; s + 1 < cp_size; ++s)
        want.push_back({Collective::ring_shift, DType::float64, chunk(s)});
      for (int s = 0; s < cp_size; ++s) {
        if (s + 1 < cp_size) want.push_back({Collective::ring_shift, DType::float64, chunk(s)});
        want.push_back({Collective::ring_shift, DType::float64, chunk(s)});
      }
      EXPECT_EQ(calls_of(result.ledgers[static_cast<std::size_t>(r)]), want)
          << to_string(layout) << " rank " << r << ":\n"
          << result.ledgers[static_cast<std::size_t>(r)].to_string();
    }
  }
}

TEST(context_parallel_attention,
     all_gather_makes_two_all_gathers_forward_and_two_reduce_scatters_back) {
  const std::size_t len = 5, batch = 1, g = 2, d = 2;
  const auto cfg = attn_config(2, g, d, len, MaskKind::none);
  const auto x = random_qkv(batch, len, 2, g, d, 41);
  const auto cc =
      cp_config(len, CpLayout::zigzag, SplitPolicy::balanced(), CpAlgorithm::all_gather);
  auto result = run(2, [&](Communicator& cp) {
    const auto p = cp_positions(cc, 2, cp.rank());
    const auto q = take_positions(x.q, p), k = take_positions(x.k, p), v = take_positions(x.v, p);
    const auto o = context_parallel_attention(cp, cfg, cc, q, k, v);
    (void)context_parallel_attention_backward(cp, cfg, cc, q, k, v, o, take_positions(x.dout, p));
  });
  const std::uint64_t kv = batch * len * g * d;
  const std::vector<Call> want = {{Collective::all_gather, DType::float64, kv},
                                  {Collective::all_gather, DType::float64, kv},
                                  {Collective::all_gather, DType::float64, kv},
                                  {Collective::all_gather, DType::float64, kv},
                                  {Collective::reduce_scatter, DType::float64, kv},
                                  {Collective::reduce_scatter, DType::float64, kv}};
  for (const auto& l : result.ledgers) EXPECT_EQ(calls_of(l), want) << l.to_string();
}

TEST(context_parallel_attention, dk_dv_travel_in_float32_for_16_bit_types) {
  const std::size_t len = 4;
  const auto cfg = attn_config(1, 1, 2, len, MaskKind::causal);
  const auto q = random_tensor<bfloat16>({1, len, 1, 2}, 51);
  const auto cc = cp_config(len, CpLayout::contiguous, SplitPolicy::chunk(), CpAlgorithm::ring);
  auto result = run(2, [&](Communicator& cp) {
    const auto p = cp_positions(cc, 2, cp.rank());
    const auto ql = take_positions(q, p);
    const auto o = context_parallel_attention(cp, cfg, cc, ql, ql, ql);
    (void)context_parallel_attention_backward(cp, cfg, cc, ql, ql, ql, o, ql);
  });
  std::size_t f32 = 0, bf16 = 0;
  for (const auto& e : result.ledgers[0].entries()) {
    (e.dtype == DType::float32 ? f32 : bf16) += 1;
  }
  EXPECT_EQ(bf16, 2U);  // K/V: one shift forward, one backward
  EXPECT_EQ(f32, 2U);   // dK/dV: cp = 2 shifts, in float32
}

TEST(context_parallel_attention, local_pieces_that_disagree_with_the_layout_are_refused) {
  const auto cfg = attn_config(1, 1, 2, 6, MaskKind::none);
  const auto cc = cp_config(6, CpLayout::contiguous, SplitPolicy::chunk(), CpAlgorithm::ring);
  const auto f = test::usage_error_of(2, [&](Communicator& cp) {
    const Tensor<double> wrong({1, 2, 1, 2});
    (void)context_parallel_attention(cp, cfg, cc, wrong, wrong, wrong);
  });
  EXPECT_THAT(f.message, HasSubstr("q is [1, 2, 1, 2] but this rank holds 3 positions"));
  auto cross = cfg;
  cross.mask.k_len = 5;
  const auto g = test::usage_error_of(2, [&](Communicator& cp) {
    const Tensor<double> t({1, 3, 1, 2});
    (void)context_parallel_attention(cp, cross, cc, t, t, t);
  });
  EXPECT_THAT(g.message, HasSubstr("self-attention over seq_len = 6"));
  EXPECT_THAT(g.message, HasSubstr("k_len = 5"));
}

// ------------------------------------------------------------------ head-parallel layer

template <class T = double>
AttentionLayerWeights<T> random_weights(const HeadParallelConfig& c, std::uint64_t seed) {
  const std::size_t h = c.attention.q_heads, g = c.attention.kv_heads, d = c.attention.head_dim;
  AttentionLayerWeights<T> w;
  w.wq = random_tensor<T>({h * d, c.hidden}, seed);
  w.wk = random_tensor<T>({g * d, c.hidden}, seed + 1);
  w.wv = random_tensor<T>({g * d, c.hidden}, seed + 2);
  w.wo = random_tensor<T>({c.hidden, h * d}, seed + 3);
  if (c.has_bias) {
    w.bq = random_tensor<T>({h * d}, seed + 4);
    w.bk = random_tensor<T>({g * d}, seed + 5);
    w.bv = random_tensor<T>({g * d}, seed + 6);
    w.bo = random_tensor<T>({c.hidden}, seed + 7);
  }
  return w;
}

TEST(attention_layer, tp_traffic_is_one_all_reduce_forward_and_one_plus_the_kv_group_sum_back) {
  auto c = head_config(4, 2);
  c.attention.mask.q_len = c.attention.mask.k_len = 3;
  const std::size_t batch = 2, len = 3, d = 2;
  const auto w = random_weights(c, 61);
  const auto x = random_tensor<double>({batch, len, c.hidden}, 71);
  for (int tp_size : {2, 4}) {
    auto result = run(tp_size, [&](Communicator& tp) {
      auto self = tp.group(std::vector<int>{tp.rank()});
      const auto a = head_assignment(c, tp.size(), tp.rank());
      const auto ws = shard_attention_weights(w, c, a);
      const auto f = attention_layer(tp, *self, c, x, ws);
      (void)attention_layer_backward(tp, *self, c, x, ws, f, x);
    });
    const std::uint64_t act = batch * len * c.hidden;
    std::vector<Call> want = {{Collective::all_reduce, DType::float64, act},
                              {Collective::all_reduce, DType::float64, act}};
    if (tp_size == 4) {  // g = 2 < tp: kv heads replicated on pairs; dWk, dbk, dWv, dbv summed
      want.push_back({Collective::all_reduce, DType::float64, 2 * d * c.hidden + 2 * d});
    }
    for (const auto& l : result.ledgers) EXPECT_EQ(calls_of(l), want) << l.to_string();
  }
}

// Replicated results are bit-identical where the collectives make them so: y and dx on every
// tp rank (all_reduce), dbo (the full sum of dy on every rank), and with g < tp the kv
// projection's gradients on the ranks that share the kv head.
TEST(attention_layer, replicated_results_are_bit_identical_on_the_ranks_that_share_them) {
  auto c = head_config(4, 1);  // MQA on tp = 4: one kv head replicated everywhere
  c.attention.mask.kind = MaskKind::causal;
  c.attention.mask.q_len = c.attention.mask.k_len = 3;
  const auto w = random_weights(c, 81);
  const auto x = random_tensor<double>({1, 3, c.hidden}, 91);
  struct Out {
    Tensor<double> y, dx, dbo, dwk, dbv;
  };
  const auto outs = on_ranks<Out>(4, [&](Communicator& tp) {
    auto self = tp.group(std::vector<int>{tp.rank()});
    const auto ws = shard_attention_weights(w, c, head_assignment(c, 4, tp.rank()));
    const auto f = attention_layer(tp, *self, c, x, ws);
    auto g = attention_layer_backward(tp, *self, c, x, ws, f, x);
    return Out{f.y, g.dx, g.dbo, g.dwk, g.dbv};
  });
  for (std::size_t r = 1; r < 4; ++r) {
    EXPECT_TRUE(bit_equal(outs[r].y, outs[0].y)) << r;
    EXPECT_TRUE(bit_equal(outs[r].dx, outs[0].dx)) << r;
    EXPECT_TRUE(bit_equal(outs[r].dbo, outs[0].dbo)) << r;
    EXPECT_TRUE(bit_equal(outs[r].dwk, outs[0].dwk)) << r;
    EXPECT_TRUE(bit_equal(outs[r].dbv, outs[0].dbv)) << r;
  }
}

// The same under context parallelism on a (cp, tp) mesh, where every parameter gradient is also
// all_reduced over cp. Regression: dbo was all_reduced inside the pack of every gradient, whose
// size follows the rank's heads, so with uneven heads (here tp rank 1 has none) it fell in other
// chunks of the ring on each tp rank and was summed in another order: 1 ulp apart with cp = 3
// (with cp = 2 the two terms commute). The smallest such mesh: tp = 2, cp = 3, h = g = 2 split
// {2, 0} (tp rank 1 has no heads), one token per cp rank; x and dy are seeded so that the two
// orders round differently in float (the test failed before the fix). Also the kv gradients of
// a kv head replicated on both tp ranks (g < tp), whose packs line up.
TEST(attention_layer, replicated_gradients_are_bit_identical_across_tp_under_cp) {
  struct Mesh {
    std::size_t h = 0, g = 0;
    SplitPolicy split;
  };
  const Mesh meshes[] = {{2, 2, SplitPolicy::explicit_sizes({2, 0})}, {2, 1, SplitPolicy::chunk()}};
  const int tp_size = 2, cp_size = 3;
  const std::size_t len = 3;
  for (const auto& m : meshes) {
    auto c = head_config(m.h, m.g);
    c.kv_head_split = m.split;
    c.attention.mask.q_len = c.attention.mask.k_len = len;
    c.context_parallel =
        cp_config(len, CpLayout::contiguous, SplitPolicy::balanced(), CpAlgorithm::ring);
    const auto w = random_weights<float>(c, 101);
    struct Out {
      Tensor<float> dbo, dwk, dbv;
    };
    // float: three terms of random_tensor's 21-bit values do not always sum exactly.
    const auto outs = on_ranks<Out>(tp_size * cp_size, [&](Communicator& world) {
      MeshGroups mesh(world, DeviceMesh({{"cp", cp_size}, {"tp", tp_size}}));
      Communicator& tp = mesh.along("tp");
      Communicator& cp = mesh.along("cp");
      const auto x = random_tensor<float>({1, 1, c.hidden}, 2111 + cp.rank());
      const auto dy = random_tensor<float>({1, 1, c.hidden}, 2121 + cp.rank());
      const auto ws = shard_attention_weights(w, c, head_assignment(c, tp_size, tp.rank()));
      const auto f = attention_layer(tp, cp, c, x, ws);
      auto g = attention_layer_backward(tp, cp, c, x, ws, f, dy);
      return Out{g.dbo, g.dwk, g.dbv};
    });
    const std::string what = "h = " + std::to_string(m.h) + ", g = " + std::to_string(m.g) +
                             ", kv_head_split " + m.split.to_string() + ", world rank ";
    for (std::size_t r = 1; r < outs.size(); ++r) {
      EXPECT_TRUE(bit_equal(outs[r].dbo, outs[0].dbo)) << what << r;
      if (m.g < static_cast<std::size_t>(tp_size)) {  // both tp ranks share the kv head
        EXPECT_TRUE(bit_equal(outs[r].dwk, outs[0].dwk)) << what << r;
        EXPECT_TRUE(bit_equal(outs[r].dbv, outs[0].dbv)) << what << r;
      }
    }
  }
}

TEST(attention_layer, shards_that_do_not_fit_the_assignment_are_refused_naming_the_shapes) {
  auto c = head_config(4, 2);
  const auto w = random_weights(c, 101);
  const auto x = random_tensor<double>({1, 3, c.hidden}, 111);
  const auto f = test::usage_error_of(2, [&](Communicator& tp) {
    auto self = tp.group(std::vector<int>{tp.rank()});
    (void)attention_layer(tp, *self, c, x, w);  // the dense weights on every rank
  });
  EXPECT_THAT(f.message, HasSubstr("wq is [8, 4] but must be [4, 4]"));
  EXPECT_THAT(f.message, HasSubstr("shard_attention_weights"));
  const auto g = test::usage_error_of(1, [&](Communicator& tp) {
    auto self = tp.group(std::vector<int>{tp.rank()});
    (void)attention_layer(tp, *self, c, random_tensor<double>({1, 5, c.hidden}, 1), w);
  });
  EXPECT_THAT(g.message, HasSubstr("x is [1, 5, 4] but must be [batch, 3, 4]"));
  auto nobias = c;
  nobias.has_bias = false;
  const auto h = test::usage_error_of(1, [&](Communicator& tp) {
    auto self = tp.group(std::vector<int>{tp.rank()});
    (void)attention_layer(tp, *self, nobias, x, w);
  });
  EXPECT_THAT(h.message, HasSubstr("has_bias is false but a bias was given"));
}

}  // namespace
}  // namespace shardcheck
