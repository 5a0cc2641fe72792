// Context-parallel attention (ring and all-gather, contiguous and zigzag) and the
// head-parallel attention layer on a (cp, tp) mesh (ops/attention/) measured against the
// budget's model: generated cases, one run of the forward and backward under
// measured_support.hpp's Probe, and the model's prediction for each rank.
#pragma once

#include "measured_support.hpp"
#include "ops/attention/context_parallel_attention.hpp"
#include "ops/attention/head_parallel_attention.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace shardcheck::budget::measured {

struct CpCase {
  int p = 1;
  std::size_t batch = 1;
  AttentionConfig att;
  ContextParallelConfig cc;
};

// The case of p ranks attending over a sequence of seq_len with q_heads query heads and kv_heads
// key/value heads of head_dim, masked by `mask` (its q_len and k_len are seq_len); batch 1, the
// contiguous layout split by chunk, the ring algorithm. gen_cp_case may then give the queries
// their own length (cc.q_seq_len, mask.q_len).
inline CpCase cp_case(int p, std::size_t seq_len, std::size_t q_heads, std::size_t kv_heads,
                      std::size_t head_dim, MaskKind mask) {
  CpCase k;
  k.p = p;
  k.att.q_heads = q_heads;
  k.att.kv_heads = kv_heads;
  k.att.head_dim = head_dim;
  k.att.mask.kind = mask;
  k.att.mask.q_len = k.att.mask.k_len = seq_len;
  k.cc.seq_len = seq_len;
  return k;
}

inline CpCase gen_cp_case() {
  const int p = *rc::gen::inRange(1, 5);
  const auto batch = *rc::gen::inRange<std::size_t>(1, 3);
  const auto g = *rc::gen::inRange<std::size_t>(1, 3);
  const auto h = g * *rc::gen::inRange<std::size_t>(1, 3);
  const auto d = *rc::gen::inRange<std::size_t>(1, 4);
  const auto seq_len = *rc::gen::inRange<std::size_t>(1, 10);
  CpCase k = cp_case(p, seq_len, h, g, d, *rc::gen::element(MaskKind::none, MaskKind::causal));
  k.batch = batch;
  k.cc.layout = *rc::gen::element(CpLayout::contiguous, CpLayout::zigzag);
  k.cc.split = *gen_split(k.cc.seq_len, k.cc.layout == CpLayout::zigzag ? 2 * k.p : k.p);
  k.cc.algorithm = *rc::gen::element(CpAlgorithm::ring, CpAlgorithm::all_gather);
  // One case in two Lq != Lk (cross-attention, decode, chunked prefill: the queries cut by the
  // same layout over their own length, either causal alignment); the K/V terms of the model
  // follow the keys' length, the kept q, out and lse the queries'.
  if (*rc::gen::arbitrary<bool>()) {
    k.cc.q_seq_len = *rc::gen::inRange<std::size_t>(1, 10);
    k.cc.q_split = *gen_split(k.cc.q_seq_len, k.cc.layout == CpLayout::zigzag ? 2 * k.p : k.p);
    k.att.mask.q_len = k.cc.q_seq_len;
    k.att.mask.alignment =
        *rc::gen::element(CausalAlignment::bottom_right, CausalAlignment::top_left);
  }
  return k;
}

template <class T>
std::vector<Measured> run_cp(const CpCase& k) {
  const auto lens = cp_lengths(k.cc, k.p);
  return measure_ranks(k.p, [&](Communicator& c, Probe& probe) {
    const int r = c.rank();
    const std::size_t len = lens[static_cast<std::size_t>(r)];
    const std::size_t q_len = cp_query_positions(k.cc, k.p, r).size();
    const auto& a = k.att;
    const auto q = zeros<T>({k.batch, q_len, a.q_heads, a.head_dim});
    const auto kk = zeros<T>({k.batch, len, a.kv_heads, a.head_dim});
    const auto v = zeros<T>({k.batch, len, a.kv_heads, a.head_dim});
    const auto out =
        probe.forward([&] { return context_parallel_attention(c, a, k.cc, q, kk, v); });
    probe.keep(q);
    probe.keep(kk);
    probe.keep(v);
    probe.keep(out.out);
    probe.keep(out.lse);
    probe.backward(
        [&] { (void)context_parallel_attention_backward(c, a, k.cc, q, kk, v, out, q); });
  });
}

inline Predict predict_cp(const CpCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{cp_attention_traffic(k.att, k.cc, k.batch, k.p, r, e),
                      cp_attention_activations(k.att, k.cc, k.batch, k.p, r, e)};
  };
}

// ------------------------------------------------------------------ head-parallel layer

struct HeadCase {
  int tp = 1, cp = 1;
  std::size_t batch = 1;
  HeadParallelConfig cfg;
};

// The layer on tp ranks without CP (the caller may add it): batch sequences of seq_len, causal,
// q_heads query heads and kv_heads key/value heads of head_dim, hidden wide, with biases; x and
// dy as token rows split by chunk when `sp`.
inline HeadCase head_case(int tp, std::size_t batch, std::size_t seq_len, std::size_t q_heads,
                          std::size_t kv_heads, std::size_t head_dim, std::size_t hidden, bool sp) {
  HeadCase k;
  k.tp = tp;
  k.batch = batch;
  auto& a = k.cfg.attention;
  a.q_heads = q_heads;
  a.kv_heads = kv_heads;
  a.head_dim = head_dim;
  a.mask.kind = MaskKind::causal;
  a.mask.q_len = a.mask.k_len = seq_len;
  k.cfg.hidden = hidden;
  k.cfg.sequence_parallel = sp;
  k.cfg.batch = sp ? batch : 0;
  return k;
}

// The positions cp rank j holds (the whole sequence without CP).
inline std::size_t layer_len(const HeadCase& k, int cp_rank) {
  const auto& c = k.cfg;
  return c.context_parallel
             ? cp_lengths(*c.context_parallel, k.cp)[static_cast<std::size_t>(cp_rank)]
             : c.attention.mask.q_len;
}

// x (and dy) of world rank w: [batch, L_r, hidden], or under sequence parallelism its tp rank's
// token rows [rows_r, hidden].
template <class T>
Tensor<T> layer_input(const HeadCase& k, int w) {
  const std::size_t tokens = k.batch * layer_len(k, w / k.tp);
  if (!k.cfg.sequence_parallel) return zeros<T>({k.batch, tokens / k.batch, k.cfg.hidden});
  const auto rows = split_sizes(k.cfg.token_split, tokens, k.tp);
  return zeros<T>({rows[static_cast<std::size_t>(w % k.tp)], k.cfg.hidden});
}

inline HeadCase gen_head_case() {
  HeadCase k;
  const auto g = *rc::gen::inRange<std::size_t>(1, 5);
  const auto group = *rc::gen::inRange<std::size_t>(1, 3);
  k.cfg.attention.kv_heads = g;
  k.cfg.attention.q_heads = g * group;
  k.cfg.attention.head_dim = *rc::gen::inRange<std::size_t>(1, 3);
  k.cfg.hidden = *rc::gen::inRange<std::size_t>(1, 5);
  k.cfg.has_bias = *rc::gen::arbitrary<bool>();
  k.tp = *rc::gen::inRange(1, 5);
  // g < tp replicates kv heads: tp must be a multiple of g whose share divides the group.
  if (g < static_cast<std::size_t>(k.tp) &&
      (k.tp % static_cast<int>(g) != 0 || group % (static_cast<std::size_t>(k.tp) / g) != 0)) {
    k.tp = static_cast<int>(g);
  }
  k.cfg.kv_head_split = *gen_split(g, k.tp);
  k.cfg.reduce_algorithm = gen_algorithm();
  k.batch = *rc::gen::inRange<std::size_t>(1, 3);
  const auto seq = *rc::gen::inRange<std::size_t>(1, 7);
  k.cfg.attention.mask.kind = *rc::gen::element(MaskKind::none, MaskKind::causal);
  k.cfg.attention.mask.q_len = k.cfg.attention.mask.k_len = seq;
  k.cp = *rc::gen::inRange(1, 4);
  if (k.tp * k.cp > 8) k.cp = 2;  // at most 8 ranks (threads) per run
  if (k.cp > 1 || *rc::gen::arbitrary<bool>()) {
    ContextParallelConfig cc;
    cc.seq_len = seq;
    cc.layout = *rc::gen::element(CpLayout::contiguous, CpLayout::zigzag);
    cc.split = *gen_split(seq, cc.layout == CpLayout::zigzag ? 2 * k.cp : k.cp);
    cc.algorithm = *rc::gen::element(CpAlgorithm::ring, CpAlgorithm::all_gather);
    k.cfg.context_parallel = cc;
  }
  // Sequence parallelism one case in two: x and dy as each tp rank's token rows of its cp piece;
  // one token split for every cp piece, explicit (zeros included) where they hold the same
  // tokens, else chunk or balanced.
  if (*rc::gen::arbitrary<bool>()) {
    k.cfg.sequence_parallel = true;
    k.cfg.batch = k.batch;
    std::vector<std::size_t> tokens(static_cast<std::size_t>(k.cp));
    for (int j = 0; j < k.cp; ++j) tokens[static_cast<std::size_t>(j)] = k.batch * layer_len(k, j);
    k.cfg.token_split =
        std::all_of(tokens.begin(), tokens.end(), [&](std::size_t n) { return n == tokens[0]; })
            ? *gen_split(tokens[0], k.tp)
            : *rc::gen::element(SplitPolicy::chunk(), SplitPolicy::balanced());
  }
  return k;
}

// World rank w = cp_rank·tp + tp_rank on a (cp, tp) mesh. dy is x (zeros of its shape).
template <class T>
std::vector<Measured> run_head(const HeadCase& k) {
  const int world = k.tp * k.cp;
  const auto& c = k.cfg;
  const std::size_t h = c.attention.q_heads, g = c.attention.kv_heads, d = c.attention.head_dim;
  AttentionLayerWeights<T> dense;
  dense.wq = zeros<T>({h * d, c.hidden});
  dense.wk = zeros<T>({g * d, c.hidden});
  dense.wv = zeros<T>({g * d, c.hidden});
  dense.wo = zeros<T>({c.hidden, h * d});
  if (c.has_bias) {
    dense.bq = zeros<T>({h * d});
    dense.bk = zeros<T>({g * d});
    dense.bv = zeros<T>({g * d});
    dense.bo = zeros<T>({c.hidden});
  }
  return measure_ranks(world, [&](Communicator& w, Probe& probe) {
    const int cp_rank = w.rank() / k.tp, tp_rank = w.rank() % k.tp;
    std::vector<int> tp_ranks, cp_ranks;
    for (int i = 0; i < k.tp; ++i) tp_ranks.push_back(cp_rank * k.tp + i);
    for (int j = 0; j < k.cp; ++j) cp_ranks.push_back(j * k.tp + tp_rank);
    auto tp = w.group(tp_ranks);
    auto cp = w.group(cp_ranks);
    const auto ws = shard_attention_weights(dense, c, head_assignment(c, k.tp, tp_rank));
    const auto x = layer_input<T>(k, w.rank());
    const auto f = probe.forward([&] { return attention_layer(*tp, *cp, c, x, ws); });
    probe.keep(x);
    probe.keep(f.q);
    probe.keep(f.k);
    probe.keep(f.v);
    probe.keep(f.attn.out);
    probe.keep(f.attn.lse);
    probe.backward([&] { (void)attention_layer_backward(*tp, *cp, c, x, ws, f, x); });
  });
}

inline Predict predict_head(const HeadCase& k, ElementBytes e) {
  return [k, e](int w) {
    const int cp_rank = w / k.tp, tp_rank = w % k.tp;
    return Prediction{head_layer_traffic(k.cfg, k.batch, k.tp, tp_rank, k.cp, cp_rank, e),
                      head_layer_activations(k.cfg, k.batch, k.tp, tp_rank, k.cp, cp_rank, e)};
  };
}

}  // namespace shardcheck::budget::measured
