// The UsageErrors of the attention ops not pinned by attention_unit_usage_error_tests.cpp and
// attention_parallel_tests.cpp: the position helpers of context parallelism, the backward's
// shape checks, and the head assignment as the head-parallel layer reports it. Each case pins
// the parts of the message a user needs (the function, the rank when one raises it, the shapes
// or sizes, and the fix) and, on ranks, that the run's primary failure is on the rank at fault.
#include "ops/attention/attention.hpp"
#include "ops/attention/context_parallel_attention.hpp"
#include "ops/attention/head_parallel_attention.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace shardcheck {
namespace {

using D = Tensor<double>;
using test::expect_usage_errors;

AttentionConfig attention(std::size_t h, std::size_t g, std::size_t d, std::size_t len) {
  return {h, g, d, 0, {MaskKind::none, len, len, {}, {}}};
}

ContextParallelConfig context(std::size_t len, SplitPolicy split) {
  ContextParallelConfig c;
  c.seq_len = len;
  c.split = std::move(split);
  return c;
}

HeadParallelConfig layer(std::size_t h, std::size_t g) {
  HeadParallelConfig c;
  c.attention = attention(h, g, 2, 3);
  c.hidden = 4;
  return c;
}

// Zero dense weights of `c` (d = 2): the shards of a one-rank tp group.
AttentionLayerWeights<double> zero_weights(const HeadParallelConfig& c) {
  const std::size_t hd = c.attention.q_heads * 2, gd = c.attention.kv_heads * 2;
  AttentionLayerWeights<double> w;
  w.wq = D({hd, c.hidden});
  w.wk = D({gd, c.hidden});
  w.wv = D({gd, c.hidden});
  w.wo = D({c.hidden, hd});
  if (c.has_bias) {
    w.bq = D({hd});
    w.bk = D({gd});
    w.bv = D({gd});
    w.bo = D({c.hidden});
  }
  return w;
}

// ---------------------------------------------------------------- dense calls

TEST(AttentionUsageErrors, dense_helpers_name_the_shapes_and_what_to_pass) {
  const std::vector<std::size_t> pos = {0, 4};
  const auto cfg = attention(4, 2, 3, 5);
  const D q2({2, 5, 2, 3}), k1({2, 5, 1, 3});
  expect_usage_errors(std::vector<test::UsageCase>{
      {"take_positions needs a sequence axis",
       [&] { (void)take_positions(D({6}), pos); },
       {"take_positions: x is [6]; pass [batch, L, ...] (dim 1 the sequence)"}},
      {"take_positions refuses a position past the sequence",
       [&] {
         (void)take_positions(D({1, 3, 2}), pos);
       },
       {"take_positions: position 4 is outside x [1, 3, 2]",
        "pass positions below x.dim(1) = 3 (cp_positions of a config whose seq_len"}},
      {"take_lse_positions needs [batch, h, L]",
       [&] {
         (void)take_lse_positions(D({2, 3}), pos);
       },
       {"take_lse_positions: lse is [2, 3]; pass [batch, h, L]"}},
      {"take_lse_positions refuses a position past the sequence",
       [&] {
         (void)take_lse_positions(D({1, 2, 4}), pos);
       },
       {"take_lse_positions: position 4 is outside lse [1, 2, 4]",
        "pass positions below lse.dim(2) = 4"}},
      {"attention_backward takes every head",
       [&] { (void)attention_backward(cfg, q2, k1, k1, AttentionOutput<double>{}, q2); },
       {"attention_backward: q is [2, 5, 2, 3] but cfg.q_heads = 4",
        "use attention_block_backward for a slice of the heads"}},
      {"head_assignment refuses a rank outside the group",
       [&] { (void)head_assignment(layer(4, 2), 2, 2); },
       {"head_assignment (h = 4 query heads, g = 2 kv heads, tp = 2): rank 2 is not in the tp "
        "group",
        "pass tp ≥ 1 and 0 ≤ tp_rank < tp"}},
  });
}

// ---------------------------------------------------------------- on ranks

// A one-rank cp group per tp rank.
std::unique_ptr<Communicator> self(Communicator& c) { return c.group(std::vector<int>{c.rank()}); }

// attention_layer with config `c` on x [1, 3, 4] and the zero weights of config `w`.
void layer_forward(Communicator& tp, const HeadParallelConfig& c, const HeadParallelConfig& w) {
  (void)attention_layer(tp, *self(tp), c, D({1, 3, 4}), zero_weights(w));
}

TEST(AttentionUsageErrors, parallel_ops_name_the_rank_the_shapes_and_what_to_pass) {
  const auto cfg6 = attention(1, 1, 2, 6);
  const D piece({1, 3, 1, 2});
  const auto nobias = [] {
    auto c = layer(4, 2);
    c.has_bias = false;
    return c;
  }();
  expect_usage_errors(std::vector<test::RankUsageCase>{
      {"context_parallel_attention reports cp_positions' refusal on the rank",
       2,
       [&](Communicator& cp) {
         (void)context_parallel_attention(cp, cfg6, context(6, SplitPolicy::explicit_sizes({2, 2})),
                                          piece, piece, piece);
       },
       0,
       {"context_parallel_attention on cp rank 0 of 2: cp_positions (contiguous layout, cp = 2, 2 "
        "pieces "
        "of seq_len = 6)",
        "explicit sizes [2,2]", "give one non-negative size per rank adding up to 6"}},
      {"context_parallel_attention_backward checks dout against q",
       2,
       [&](Communicator& cp) {
         const D dout({1, cp.rank() == 1 ? 2U : 3U, 1, 2});
         (void)context_parallel_attention_backward(
             cp, cfg6, context(6, SplitPolicy::chunk()), piece, piece, piece,
             AttentionOutput<double>{piece, D({1, 1, 3})}, dout);
       },
       1,
       {"context_parallel_attention_backward on cp rank 1 of 2: dout is [1, 2, 1, 2] and out is "
        "[1, 3, 1, 2]; both must have q's shape [1, 3, 1, 2]",
        "the forward's out for this rank's positions"}},
      {"context_parallel_attention names the mask's lengths against the config's (Lq != Lk)",
       2,
       [&](Communicator& cp) {
         auto cc = context(6, SplitPolicy::chunk());
         cc.q_seq_len = 2;  // decode-like: 2 queries against 6 keys, but the mask says 6 and 6
         (void)context_parallel_attention(cp, cfg6, cc, D({1, 1, 1, 2}), piece, piece);
       },
       0,
       {"context_parallel_attention on cp rank 0 of 2: the context-parallel config is q_seq_len = "
        "2 queries against seq_len = 6 keys but the mask has q_len = 6, k_len = 6",
        "set q_len = 2 and k_len = 6"}},
      {"context_parallel_attention reports q_split's refusal naming q_seq_len",
       2,
       [&](Communicator& cp) {
         auto cfg = attention(1, 1, 2, 6);
         cfg.mask.q_len = 3;
         auto cc = context(6, SplitPolicy::chunk());
         cc.q_seq_len = 3;
         cc.q_split = SplitPolicy::explicit_sizes({1, 1});
         (void)context_parallel_attention(cp, cfg, cc, D({1, 1, 1, 2}), piece, piece);
       },
       0,
       {"context_parallel_attention on cp rank 0 of 2: cp_positions (contiguous layout, cp = 2, 2 "
        "pieces of q_seq_len = 3)",
        "give one non-negative size per rank adding up to 3"}},
      {"context_parallel_attention checks q against the rank's query positions",
       2,
       [&](Communicator& cp) {
         auto cfg = attention(1, 1, 2, 6);
         cfg.mask.q_len = 1;
         auto cc = context(6, SplitPolicy::chunk());
         cc.q_seq_len = 1;  // decode: the one query on rank 0, none on rank 1
         (void)context_parallel_attention(cp, cfg, cc, D({1, 1, 1, 2}), piece, piece);
       },
       1,
       {"context_parallel_attention on cp rank 1 of 2: q is [1, 1, 1, 2] but this rank holds 0 "
        "positions of the sequence: pass q [batch, Lq_r, h, d] with dim 1 = 0"}},
      {"attention_layer reports head_assignment's refusal on the rank",
       2,
       [](Communicator& tp) { layer_forward(tp, layer(6, 4), layer(6, 4)); },
       0,
       {"attention_layer on tp rank 0 of 2, cp rank 0 of 1: head_assignment (h = 6 query heads, "
        "g = 4 kv heads, tp = 2): g must be ≥ 1 and divide h"}},
      {"attention_layer names the biases given without has_bias",
       1,
       [&](Communicator& tp) { layer_forward(tp, nobias, layer(4, 2)); },
       0,
       {"attention_layer on tp rank 0 of 1, cp rank 0 of 1: cfg.has_bias is false but a bias was "
        "given (bq [8], bk [4], bv [4], bo [4])",
        "pass empty biases, or set cfg.has_bias = true"}},
      {"attention_layer_backward checks dy against x",
       1,
       [&](Communicator& tp) {
         const auto c = layer(4, 2);
         const auto w = zero_weights(c);
         const D x({1, 3, 4});
         const auto fwd = attention_layer(tp, *self(tp), c, x, w);
         (void)attention_layer_backward(tp, *self(tp), c, x, w, fwd, D({1, 2, 4}));
       },
       0,
       {"attention_layer_backward on tp rank 0 of 1, cp rank 0 of 1: dy is [1, 2, 4] but must be "
        "[1, 3, 4] (the gradient of y, x's shape)"}},
  });
}

}  // namespace
}  // namespace shardcheck
