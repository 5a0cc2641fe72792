// Unit tests of lib/ops/attention/attention.hpp, the block kernel: a partition of the keys
// (partials merged, dq summed) and of the queries (dk, dv summed) stays within the reference's
// bound for that many parts, one block of every key or a block of query rows reproduces the
// dense op's bits, and a random sweep of shapes, head groupings, masks, magnitudes and
// partitions in which the bound must hold for every element. Part of ops_attention_unit_tests
// (attention_unit_support.hpp).
#include "attention_unit_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::test::attention_unit {
namespace {

// Positions [offset, offset + len) of the last axis of lse [batch, h, L].
template <class A>
Tensor<A> lse_slice(const Tensor<A>& t, std::size_t offset, std::size_t len) {
  const std::size_t rows = t.dim(0) * t.dim(1), l = t.dim(2);
  Tensor<A> out(Shape{t.dim(0), t.dim(1), len});
  for (std::size_t r = 0; r < rows; ++r) {
    std::copy_n(t.data() + r * l + offset, len, out.data() + r * len);
  }
  return out;
}

// Adds src into rows [offset, ...) of axis 1 of dst (in dst's type).
template <class A>
void seq_add(Tensor<A>& dst, const Tensor<A>& src, std::size_t offset) {
  const std::size_t batch = dst.dim(0), l = dst.dim(1), len = src.dim(1);
  const std::size_t row = dst.dim(2) * dst.dim(3);
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t x = 0; x < len * row; ++x) {
      A& d = dst[(b * l + offset) * row + x];
      d = d + src[b * len * row + x];
    }
  }
}

// Block boundaries: cuts of [0, n) into pieces of the given sizes (zeros allowed).
std::vector<std::size_t> offsets_of(const std::vector<std::size_t>& sizes) {
  std::vector<std::size_t> off{0};
  for (auto s : sizes) off.push_back(off.back() + s);
  return off;
}

// The softmax merge of attention partials, written here (ops/softmax_merge is being written
// concurrently and tested on its own): FlashAttention's split-KV combine, in A, parts in
// order, per row: m = max_j lse_j; if m = −inf the row is empty (out 0, lse −inf); else
// w_j = exp(lse_j − m), l = Σ_j w_j, lse = m + log(l), out = Σ_j (w_j/l)·out_j.
// reference/attention/attention.hpp's bound with parts = number of blocks covers exactly this.
template <class A>
void merge_partials(const std::vector<Tensor<A>>& outs, const std::vector<Tensor<A>>& lses,
                    Tensor<A>& out, Tensor<A>& lse) {
  const std::size_t batch = out.dim(0), l = out.dim(1), h = out.dim(2), d = out.dim(3);
  constexpr A inf = std::numeric_limits<A>::infinity();
  std::vector<A> w(outs.size());
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t t = 0; t < l; ++t) {
      for (std::size_t i = 0; i < h; ++i) {
        const std::size_t li = (b * h + i) * l + t, oi = ((b * l + t) * h + i) * d;
        A m = -inf;
        for (const auto& x : lses) m = std::max(m, x[li]);
        if (m == -inf) {
          lse[li] = -inf;
          for (std::size_t e = 0; e < d; ++e) out[oi + e] = 0;
          continue;
        }
        A sum = 0;
        for (std::size_t j = 0; j < outs.size(); ++j) {
          w[j] = std::exp(lses[j][li] - m);
          sum = sum + w[j];
        }
        lse[li] = m + std::log(sum);
        for (std::size_t e = 0; e < d; ++e) {
          A acc = 0;
          for (std::size_t j = 0; j < outs.size(); ++j) {
            if (w[j] == 0) continue;  // an empty partial contributes nothing
            const A c = w[j] / sum;
            acc = acc + c * outs[j][oi + e];
          }
          out[oi + e] = acc;
        }
      }
    }
  }
}

// The forward over key blocks (sizes ksizes at offsets koff) for every query: one partial per
// block, merged into out and lse (in A).
template <class Config, class Inputs, class A>
void forward_over_key_blocks(const Config& cfg, const Inputs& in,
                             const std::vector<std::size_t>& koff,
                             const std::vector<std::size_t>& ksizes, Tensor<A>& out,
                             Tensor<A>& lse) {
  const auto qpos = iota_positions(in.q.dim(1));
  std::vector<Tensor<A>> outs, lses;
  for (std::size_t j = 0; j < ksizes.size(); ++j) {
    auto part = attention_block_forward(cfg, in.q, seq_slice(in.k, koff[j], ksizes[j]),
                                        seq_slice(in.v, koff[j], ksizes[j]), qpos,
                                        range_positions(koff[j], ksizes[j]));
    outs.push_back(std::move(part.out));
    lses.push_back(std::move(part.lse));
  }
  merge_partials(outs, lses, out, lse);
}

// ---------------------------------------------------------------- the block kernel

TYPED_TEST(AttentionTyped, blocks_over_key_and_query_partitions_are_within_the_bound) {
  using T = TypeParam;
  using A = acc_t<T>;
  std::uint64_t seed = 500;
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto cfg = make_config(c, seed);
    const auto in = make_inputs<T>(c, seed += 10);
    // Three key blocks (one empty), uneven; three query blocks.
    const std::vector<std::size_t> ksizes{c.lk / 3, 0, c.lk - c.lk / 3 - 1, 1};
    const std::vector<std::size_t> qsizes{1, c.lq - 3, 2};
    const auto koff = offsets_of(ksizes), qoff = offsets_of(qsizes);
    const auto qpos_all = iota_positions(c.lq), kpos_all = iota_positions(c.lk);
    const std::size_t parts = ksizes.size();

    // Forward: one partial per key block, merged.
    Tensor<A> out_a(in.q.shape()), lse(Shape{c.batch, c.h, c.lq});
    forward_over_key_blocks(cfg, in, koff, ksizes, out_a, lse);
    const Tensor<T> out = rounded<T>(out_a);

    // Backward over the key blocks (given the merged out and lse): dq summed in A, dk/dv per block.
    Tensor<A> dq_a(in.q.shape()), dk_a(in.k.shape()), dv_a(in.k.shape());
    for (std::size_t j = 0; j < ksizes.size(); ++j) {
      const auto kp = range_positions(koff[j], ksizes[j]);
      const auto g = attention_block_backward(cfg, in.q, seq_slice(in.k, koff[j], ksizes[j]),
                                              seq_slice(in.v, koff[j], ksizes[j]), out, lse,
                                              in.dout, qpos_all, kp);
      seq_add(dq_a, g.dq, 0);
      seq_add(dk_a, g.dk, koff[j]);
      seq_add(dv_a, g.dv, koff[j]);
    }
    // Backward over the query blocks: dk/dv summed in A, dq per block.
    Tensor<A> dq2_a(in.q.shape()), dk2_a(in.k.shape()), dv2_a(in.k.shape());
    for (std::size_t r = 0; r < qsizes.size(); ++r) {
      const auto qp = range_positions(qoff[r], qsizes[r]);
      const auto g = attention_block_backward(
          cfg, seq_slice(in.q, qoff[r], qsizes[r]), in.k, in.v, seq_slice(out, qoff[r], qsizes[r]),
          lse_slice(lse, qoff[r], qsizes[r]), seq_slice(in.dout, qoff[r], qsizes[r]), qp, kpos_all);
      seq_add(dq2_a, g.dq, qoff[r]);
      seq_add(dk2_a, g.dk, 0);
      seq_add(dv2_a, g.dv, 0);
    }

    const ReferenceAttention<T> ref(cfg, in);
    const auto& rf = ref.rf;
    const auto& rg = ref.rg;
    const auto bnd = ref.bounds(parts);
    const std::string key = std::string(dtype_name<T>()) + " blocks ";
    const std::string keya = std::string(dtype_name<T>()) + " blocks(A) ";
    EXPECT_WITHIN_BOUND(key + "out", out, rf.out, bnd.out);
    EXPECT_WITHIN_BOUND(keya + "out", out_a, rf.out, bnd.out_acc);
    EXPECT_WITHIN_BOUND(key + "lse", lse, rf.lse, bnd.lse);
    EXPECT_WITHIN_BOUND(key + "dq", rounded<T>(dq_a), rg.dq, bnd.dq);
    EXPECT_WITHIN_BOUND(keya + "dq", dq_a, rg.dq, bnd.dq_acc);
    EXPECT_WITHIN_BOUND(key + "dk", rounded<T>(dk_a), rg.dk, bnd.dk);
    EXPECT_WITHIN_BOUND(key + "dv", rounded<T>(dv_a), rg.dv, bnd.dv);
    EXPECT_WITHIN_BOUND(key + "dq", rounded<T>(dq2_a), rg.dq, bnd.dq);
    EXPECT_WITHIN_BOUND(key + "dk", rounded<T>(dk2_a), rg.dk, bnd.dk);
    EXPECT_WITHIN_BOUND(keya + "dk", dk2_a, rg.dk, bnd.dk_acc);
    EXPECT_WITHIN_BOUND(key + "dv", rounded<T>(dv2_a), rg.dv, bnd.dv);
    EXPECT_WITHIN_BOUND(keya + "dv", dv2_a, rg.dv, bnd.dv_acc);

    // One key block holding every key reproduces the dense op's bits, and a query block
    // reproduces the dense rows' bits (the kernels are row-local in the same order).
    const auto dense = attention_forward(cfg, in.q, in.k, in.v);
    const auto whole = attention_block_forward(cfg, in.q, in.k, in.v, qpos_all, kpos_all);
    EXPECT_TRUE(bit_equal(rounded<T>(whole.out), dense.out));
    EXPECT_TRUE(bit_equal(whole.lse, dense.lse));
    const auto rows = attention_block_forward(cfg, seq_slice(in.q, qoff[1], qsizes[1]), in.k, in.v,
                                              range_positions(qoff[1], qsizes[1]), kpos_all);
    EXPECT_TRUE(bit_equal(rounded<T>(rows.out), seq_slice(dense.out, qoff[1], qsizes[1])));
    EXPECT_TRUE(bit_equal(rows.lse, lse_slice(dense.lse, qoff[1], qsizes[1])));
  }
}

// A sweep of random cases: shapes, head groupings, masks, magnitudes (scores from ~0 to a few
// hundred, so exp underflows), near-constant v (dP − D cancels), and random key/query
// partitions into 1..4 blocks. The bound must hold for every element of every case.
template <class T>
Tensor<T> sweep_tensor(Shape shape, Rng& rng, int e_lo, int e_hi) {
  Tensor<T> t(std::move(shape));
  const int exponents = e_hi - e_lo + 1;  // e_lo <= e_hi, a few apart
  for (auto& x : t.values()) {
    const double f = static_cast<double>(rng.next() >> 40) / 16777216.0;
    const int e = e_lo + static_cast<int>(rng.below(static_cast<std::size_t>(exponents)));
    x = static_cast<T>(
        static_cast<float>(((rng.next() & 1U) != 0 ? -1 : 1) * std::ldexp(1 + f, e)));
  }
  return t;
}

std::vector<std::size_t> random_sizes(Rng& rng, std::size_t n, std::size_t parts) {
  std::vector<std::size_t> sizes(parts, 0);
  for (std::size_t x = 0; x < n; ++x) ++sizes[rng.below(parts)];
  return sizes;
}

TYPED_TEST(AttentionTyped, the_bound_holds_over_a_random_sweep) {
  using T = TypeParam;
  using A = acc_t<T>;
  Rng rng(20240917 + sizeof(T));
  const std::string key = std::string(dtype_name<T>()) + " sweep ";
  for (int it = 0; it < 40; ++it) {
    Case c{"sweep",
           1 + rng.below(2),
           1 + rng.below(9),
           1 + rng.below(9),
           0,
           1 + rng.below(3),
           1 + rng.below(16),
           static_cast<MaskKind>(rng.below(3)),
           rng.below(3) == 0};
    c.h = c.g * (1 + rng.below(3));
    auto cfg = make_config(c, rng.next());
    if (c.padding) {
      for (auto& kl : cfg.mask.key_lengths) kl = rng.below(c.lk + 1);
    }
    const int mode = static_cast<int>(rng.below(3));
    // mode 0: moderate; 1: large scores; 2: near-constant v (cancellation in dP − D).
    const int qk_hi = mode == 1 ? 3 : 1;
    Inputs<T> in{sweep_tensor<T>({c.batch, c.lq, c.h, c.d}, rng, -4, qk_hi),
                 sweep_tensor<T>({c.batch, c.lk, c.g, c.d}, rng, -4, qk_hi),
                 sweep_tensor<T>({c.batch, c.lk, c.g, c.d}, rng, -3, 2),
                 sweep_tensor<T>({c.batch, c.lq, c.h, c.d}, rng, -3, 2)};
    if (mode == 2) {
      for (std::size_t x = 0; x < in.v.size(); ++x) {
        const std::size_t e = x % c.d;
        in.v[x] = static_cast<T>(
            static_cast<float>(1.0 + 0.25 * double(e) + std::ldexp(double(rng.below(4)), -9)));
      }
    }
    SCOPED_TRACE("sweep case " + std::to_string(it) + " mode " + std::to_string(mode) + " " +
                 to_string(c.kind) + " batch " + std::to_string(c.batch) + " Lq " +
                 std::to_string(c.lq) + " Lk " + std::to_string(c.lk) + " h " +
                 std::to_string(c.h) + " g " + std::to_string(c.g) + " d " + std::to_string(c.d));
    const std::size_t parts = 1 + rng.below(4);
    const auto ksizes = random_sizes(rng, c.lk, parts), qsizes = random_sizes(rng, c.lq, parts);
    const auto koff = offsets_of(ksizes), qoff = offsets_of(qsizes);
    Tensor<A> out_a(in.q.shape()), lse(Shape{c.batch, c.h, c.lq});
    forward_over_key_blocks(cfg, in, koff, ksizes, out_a, lse);
    const Tensor<T> out = rounded<T>(out_a);
    Tensor<A> dq_a(in.q.shape()), dk_a(in.k.shape()), dv_a(in.k.shape());
    for (std::size_t j = 0; j < parts; ++j) {  // keys split: dq summed
      const auto g = attention_block_backward(
          cfg, in.q, seq_slice(in.k, koff[j], ksizes[j]), seq_slice(in.v, koff[j], ksizes[j]), out,
          lse, in.dout, iota_positions(c.lq), range_positions(koff[j], ksizes[j]));
      seq_add(dq_a, g.dq, 0);
    }
    for (std::size_t r = 0; r < parts; ++r) {  // queries split: dk, dv summed
      const auto g = attention_block_backward(
          cfg, seq_slice(in.q, qoff[r], qsizes[r]), in.k, in.v, seq_slice(out, qoff[r], qsizes[r]),
          lse_slice(lse, qoff[r], qsizes[r]), seq_slice(in.dout, qoff[r], qsizes[r]),
          range_positions(qoff[r], qsizes[r]), iota_positions(c.lk));
      seq_add(dk_a, g.dk, 0);
      seq_add(dv_a, g.dv, 0);
    }
    const auto dense = attention_forward(cfg, in.q, in.k, in.v);
    const auto dense_g = attention_backward(cfg, in.q, in.k, in.v, dense, in.dout);

    const ReferenceAttention<T> ref(cfg, in);
    const auto& rf = ref.rf;
    const auto& rg = ref.rg;
    const auto bnd = ref.bounds(parts);
    const auto bnd1 = ref.bounds();
    expect_within_bounds(key + "dense ", dense, dense_g, rf, rg, bnd1);
    EXPECT_WITHIN_BOUND(key + "blocks out", out, rf.out, bnd.out);
    EXPECT_WITHIN_BOUND(key + "blocks(A) out", out_a, rf.out, bnd.out_acc);
    EXPECT_WITHIN_BOUND(key + "blocks lse", lse, rf.lse, bnd.lse);
    EXPECT_WITHIN_BOUND(key + "blocks(A) dq", dq_a, rg.dq, bnd.dq_acc);
    EXPECT_WITHIN_BOUND(key + "blocks(A) dk", dk_a, rg.dk, bnd.dk_acc);
    EXPECT_WITHIN_BOUND(key + "blocks(A) dv", dv_a, rg.dv, bnd.dv_acc);
  }
}

}  // namespace
}  // namespace shardcheck::test::attention_unit
