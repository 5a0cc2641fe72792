// Unit tests of lib/ops/attention/attention.hpp: the dense op and the block kernel against the
// high-precision reference (reference/attention/attention.hpp) within its a-priori bound for float64,
// float32, bfloat16 and float16, hand-checked values, the bottom-right causal alignment, the GQA
// head mapping, empty rows, key padding, explicit masks, the block kernel over partitions of the
// keys (forward merged, dq summed) and of the queries (dk, dv summed), mutants the bound must
// catch, and every UsageError message.
//
// At the end the program prints the largest |err|/bound seen per dtype and result (a correct
// implementation stays ≤ 1; "dense" is the T-rounded result of the dense op, "blocks" the
// partitioned computation rounded to T, "blocks(A)" the same before that rounding) and the
// ratios of the mutants (which must exceed 1).
#include "ops/attention/attention.hpp"

#include "testing/ops_test_util.hpp"
#include "reference/attention/attention.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace shardcheck::test {
namespace {

using reference::hp;
using reference::to_hp;
using ::testing::HasSubstr;

static_assert(static_cast<int>(MaskKind::none) == static_cast<int>(reference::MaskKind::none));
static_assert(static_cast<int>(MaskKind::causal) == static_cast<int>(reference::MaskKind::causal));
static_assert(static_cast<int>(MaskKind::explicit_mask) ==
              static_cast<int>(reference::MaskKind::explicit_mask));

template <class T>
const char* dtype_name() {
  return name(dtype_of<T>).data();
}

// ---------------------------------------------------------------- ratio bookkeeping

// Largest |err|/bound per "dtype / what", printed at the end of the program.
std::map<std::string, double>& ratios() {
  static std::map<std::string, double> r;
  return r;
}

void record(const std::string& key, double ratio) {
  auto& r = ratios()[key];
  r = std::max(r, ratio);
}

class PrintRatios : public ::testing::Environment {
 public:
  void TearDown() override {
    std::printf("\nattention: largest |err|/bound (<= 1 passes; mutants must exceed 1)\n");
    for (const auto& [key, r] : ratios()) std::printf("  %-34s %.3g\n", key.c_str(), r);
  }
};
const auto* const print_ratios = ::testing::AddGlobalTestEnvironment(new PrintRatios);

struct Verdict {
  bool pass = true;
  double max_ratio = 0;
  std::size_t worst = 0;
  std::string detail;
};

// computed (converted to hp) against reference within bound, elementwise. A reference of −inf
// (an empty row's lse) must be matched exactly; NaN never passes.
template <class C>
Verdict judge(const Tensor<C>& computed, const Tensor<hp>& ref, const Tensor<hp>& bound) {
  using std::abs;
  using std::isfinite;
  Verdict v;
  if (computed.shape() != ref.shape() || bound.shape() != ref.shape()) {
    v.pass = false;
    v.detail = "shape " + format_shape(computed.shape()) + " vs " + format_shape(ref.shape());
    return v;
  }
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const hp c = to_hp(computed[i]);
    double ratio = 0;
    bool ok = true;
    if (!isfinite(ref[i])) {
      ok = c == ref[i];
      ratio = ok ? 0 : std::numeric_limits<double>::infinity();
    } else if (!isfinite(c)) {
      ok = false;
      ratio = std::numeric_limits<double>::infinity();
    } else {
      const hp err = abs(c - ref[i]);
      ok = err <= bound[i];
      ratio = err == 0        ? 0.0
              : bound[i] == 0 ? std::numeric_limits<double>::infinity()
                              : static_cast<double>(err / bound[i]);
    }
    if (!ok && v.pass) {
      v.detail = "element " + std::to_string(i) + ": computed " +
                 std::to_string(static_cast<double>(c)) + ", reference " +
                 std::to_string(static_cast<double>(ref[i])) + ", bound " +
                 std::to_string(static_cast<double>(bound[i]));
    }
    v.pass = v.pass && ok;
    if (ratio > v.max_ratio) {
      v.max_ratio = ratio;
      v.worst = i;
    }
  }
  return v;
}

#define EXPECT_WITHIN_BOUND(key, computed, ref, bound)                                           \
  do {                                                                                           \
    const Verdict v_ = judge(computed, ref, bound);                                              \
    record(key, v_.max_ratio);                                                                   \
    EXPECT_TRUE(v_.pass) << (key) << ": " << v_.detail << " (max ratio " << v_.max_ratio << ")"; \
  } while (0)

// ---------------------------------------------------------------- configurations

struct Case {
  std::string name;
  std::size_t batch, lq, lk, h, g, d;
  MaskKind kind;
  bool padding;
};

AttentionConfig make_config(const Case& c, std::uint64_t seed) {
  AttentionConfig cfg;
  cfg.q_heads = c.h;
  cfg.kv_heads = c.g;
  cfg.head_dim = c.d;
  cfg.mask.kind = c.kind;
  cfg.mask.q_len = c.lq;
  cfg.mask.k_len = c.lk;
  if (c.padding) {
    // The first sequence fully padded (its rows are empty), the others partly.
    for (std::size_t b = 0; b < c.batch; ++b) cfg.mask.key_lengths.push_back(b == 0 ? 0 : c.lk - b);
  }
  if (c.kind == MaskKind::explicit_mask) {
    Rng rng(seed);
    cfg.mask.allowed = Tensor<std::uint8_t>(Shape{c.batch, c.lq, c.lk});
    for (auto& a : cfg.mask.allowed.values()) a = rng.below(3) != 0 ? 1 : 0;
    // One fully masked row.
    for (std::size_t s = 0; s < c.lk; ++s) cfg.mask.allowed[s] = 0;
  }
  return cfg;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"mha_none", 2, 6, 6, 2, 2, 8, MaskKind::none, false},
      {"gqa_causal_lq<lk", 2, 5, 9, 4, 2, 8, MaskKind::causal, false},
      {"gqa_causal_lq>lk", 1, 9, 5, 4, 2, 6, MaskKind::causal, false},
      {"mqa_causal_padding", 3, 7, 7, 3, 1, 5, MaskKind::causal, true},
      {"gqa_explicit", 2, 6, 8, 6, 3, 4, MaskKind::explicit_mask, false},
      {"mha_none_padding", 2, 4, 12, 2, 2, 16, MaskKind::none, true},
  };
  return c;
}

template <class T>
struct Inputs {
  Tensor<T> q, k, v, dout;
};

template <class T>
Inputs<T> make_inputs(const Case& c, std::uint64_t seed) {
  return {random_tensor<T>({c.batch, c.lq, c.h, c.d}, seed),
          random_tensor<T>({c.batch, c.lk, c.g, c.d}, seed + 1),
          random_tensor<T>({c.batch, c.lk, c.g, c.d}, seed + 2),
          random_tensor<T>({c.batch, c.lq, c.h, c.d}, seed + 3)};
}

template <class T>
reference::Arithmetic arith() {
  return reference::arithmetic_of<T>();
}

// Rows [offset, offset + len) of axis 1 of a [batch, L, heads, d] tensor.
template <class T>
Tensor<T> seq_slice(const Tensor<T>& t, std::size_t offset, std::size_t len) {
  const std::size_t batch = t.dim(0), l = t.dim(1), row = t.dim(2) * t.dim(3);
  Tensor<T> out(Shape{batch, len, t.dim(2), t.dim(3)});
  for (std::size_t b = 0; b < batch; ++b) {
    std::copy_n(t.data() + (b * l + offset) * row, len * row, out.data() + b * len * row);
  }
  return out;
}

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

template <class T, class A>
Tensor<T> rounded(const Tensor<A>& a) {
  Tensor<T> out(a.shape());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = static_cast<T>(a[i]);
  return out;
}

// Block boundaries: cuts of [0, n) into pieces of the given sizes (zeros allowed).
std::vector<std::size_t> offsets_of(const std::vector<std::size_t>& sizes) {
  std::vector<std::size_t> off{0};
  for (auto s : sizes) off.push_back(off.back() + s);
  return off;
}

std::vector<std::size_t> range_positions(std::size_t offset, std::size_t len) {
  auto p = iota_positions(len);
  for (auto& x : p) x += offset;
  return p;
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

// ---------------------------------------------------------------- the dense op vs reference

template <class T>
class AttentionTyped : public ::testing::Test {};
TYPED_TEST_SUITE(AttentionTyped, AllTypes);

TYPED_TEST(AttentionTyped, dense_op_is_within_the_reference_bound) {
  using T = TypeParam;
  std::uint64_t seed = 100;
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto cfg = make_config(c, seed);
    const auto in = make_inputs<T>(c, seed += 10);
    const auto fwd = attention_forward(cfg, in.q, in.k, in.v);
    const auto grads = attention_backward(cfg, in.q, in.k, in.v, fwd, in.dout);

    const auto rcfg = reference::attention_config_of(cfg);
    const auto q = to_hp(in.q), k = to_hp(in.k), v = to_hp(in.v), dout = to_hp(in.dout);
    const auto rf = reference::attention_forward(rcfg, q, k, v);
    const auto rg = reference::attention_backward(rcfg, q, k, v, rf, dout);
    const auto bnd = reference::attention_bounds(rcfg, q, k, v, dout, arith<T>());
    const std::string key = std::string(dtype_name<T>()) + " dense ";
    EXPECT_WITHIN_BOUND(key + "out", fwd.out, rf.out, bnd.out);
    EXPECT_WITHIN_BOUND(key + "lse", fwd.lse, rf.lse, bnd.lse);
    EXPECT_WITHIN_BOUND(key + "dq", grads.dq, rg.dq, bnd.dq);
    EXPECT_WITHIN_BOUND(key + "dk", grads.dk, rg.dk, bnd.dk);
    EXPECT_WITHIN_BOUND(key + "dv", grads.dv, rg.dv, bnd.dv);
  }
}

// The same with inputs that come from a rounded computation: the implementation sees q̂, k̂, v̂,
// dout̂ (the exact values rounded to T) and the bound is given the input errors.
TYPED_TEST(AttentionTyped, input_errors_are_carried_by_the_bound) {
  using T = TypeParam;
  const Case c{"gqa_causal", 2, 6, 8, 4, 2, 8, MaskKind::causal, false};
  const auto cfg = make_config(c, 7);
  // Exact inputs: float64 values with 40 significant bits; the implementation gets them rounded.
  auto exact = [](Shape s, std::uint64_t seed) {
    Rng rng(seed);
    Tensor<hp> t(std::move(s));
    for (auto& x : t.values()) {
      const double f = static_cast<double>(rng.next() >> 24) / 1099511627776.0;
      x = hp((rng.next() & 1U) != 0 ? -1 - f : 1 + f) * hp(std::ldexp(1.0, int(rng.below(5)) - 3));
    }
    return t;
  };
  const auto q = exact({2, 6, 4, 8}, 1), k = exact({2, 8, 2, 8}, 2), v = exact({2, 8, 2, 8}, 3),
             dout = exact({2, 6, 4, 8}, 4);
  auto err_of = [](const Tensor<hp>& x, const Tensor<T>& xr) {
    Tensor<hp> e(x.shape());
    for (std::size_t i = 0; i < x.size(); ++i) {
      using std::abs;
      // The rounding's bound, as a projection's error bound would be given: u_T·|x| + η_T/2.
      const auto f = reference::format_of<T>();
      e[i] = reference::unit_roundoff<hp>(f) * abs(x[i]) + reference::smallest_subnormal<hp>(f) / 2;
      EXPECT_LE(abs(to_hp(xr[i]) - x[i]), e[i]);
    }
    return e;
  };
  const auto qt = reference::round_to<T>(q), kt = reference::round_to<T>(k),
             vt = reference::round_to<T>(v), dt = reference::round_to<T>(dout);
  reference::AttentionBoundOptions<hp> opt;
  opt.q_error = err_of(q, qt);
  opt.k_error = err_of(k, kt);
  opt.v_error = err_of(v, vt);
  opt.dout_error = err_of(dout, dt);
  const auto fwd = attention_forward(cfg, qt, kt, vt);
  const auto grads = attention_backward(cfg, qt, kt, vt, fwd, dt);
  const auto rcfg = reference::attention_config_of(cfg);
  const auto rf = reference::attention_forward(rcfg, q, k, v);
  const auto rg = reference::attention_backward(rcfg, q, k, v, rf, dout);
  const auto bnd = reference::attention_bounds(rcfg, q, k, v, dout, arith<T>(), opt);
  const std::string key = std::string(dtype_name<T>()) + " inexact-inputs ";
  EXPECT_WITHIN_BOUND(key + "out", fwd.out, rf.out, bnd.out);
  EXPECT_WITHIN_BOUND(key + "lse", fwd.lse, rf.lse, bnd.lse);
  EXPECT_WITHIN_BOUND(key + "dq", grads.dq, rg.dq, bnd.dq);
  EXPECT_WITHIN_BOUND(key + "dk", grads.dk, rg.dk, bnd.dk);
  EXPECT_WITHIN_BOUND(key + "dv", grads.dv, rg.dv, bnd.dv);
  // Without the input errors the bound is too small for 16-bit inputs (their rounding
  // dominates): the input terms are needed, not decoration. Informational for float32/64.
  const auto bare = reference::attention_bounds(rcfg, q, k, v, dout, arith<T>());
  double bare_ratio = 0;
  for (const double r :
       {judge(fwd.out, rf.out, bare.out).max_ratio, judge(fwd.lse, rf.lse, bare.lse).max_ratio,
        judge(grads.dq, rg.dq, bare.dq).max_ratio, judge(grads.dk, rg.dk, bare.dk).max_ratio}) {
    bare_ratio = std::max(bare_ratio, r);
  }
  record(std::string(dtype_name<T>()) + " inexact-inputs, bound without them", bare_ratio);
  if constexpr (sizeof(T) == 2) {
    EXPECT_GT(bare_ratio, 1.0);
  }
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
    std::vector<Tensor<A>> outs, lses;
    for (std::size_t j = 0; j < ksizes.size(); ++j) {
      const auto kp = range_positions(koff[j], ksizes[j]);
      auto part = attention_block_forward(cfg, in.q, seq_slice(in.k, koff[j], ksizes[j]),
                                          seq_slice(in.v, koff[j], ksizes[j]), qpos_all, kp);
      outs.push_back(std::move(part.out));
      lses.push_back(std::move(part.lse));
    }
    Tensor<A> out_a(in.q.shape()), lse(Shape{c.batch, c.h, c.lq});
    merge_partials(outs, lses, out_a, lse);
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

    const auto rcfg = reference::attention_config_of(cfg);
    const auto q = to_hp(in.q), k = to_hp(in.k), v = to_hp(in.v), dout = to_hp(in.dout);
    const auto rf = reference::attention_forward(rcfg, q, k, v);
    const auto rg = reference::attention_backward(rcfg, q, k, v, rf, dout);
    reference::AttentionBoundOptions<hp> opt;
    opt.parts = parts;
    const auto bnd = reference::attention_bounds(rcfg, q, k, v, dout, arith<T>(), opt);
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
  for (auto& x : t.values()) {
    const double f = static_cast<double>(rng.next() >> 40) / 16777216.0;
    const int e = e_lo + static_cast<int>(rng.below(static_cast<std::size_t>(e_hi - e_lo + 1)));
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
    std::vector<Tensor<A>> outs, lses;
    for (std::size_t j = 0; j < parts; ++j) {
      auto part = attention_block_forward(cfg, in.q, seq_slice(in.k, koff[j], ksizes[j]),
                                          seq_slice(in.v, koff[j], ksizes[j]), iota_positions(c.lq),
                                          range_positions(koff[j], ksizes[j]));
      outs.push_back(std::move(part.out));
      lses.push_back(std::move(part.lse));
    }
    Tensor<A> out_a(in.q.shape()), lse(Shape{c.batch, c.h, c.lq});
    merge_partials(outs, lses, out_a, lse);
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

    const auto rcfg = reference::attention_config_of(cfg);
    const auto q = to_hp(in.q), k = to_hp(in.k), v = to_hp(in.v), dout = to_hp(in.dout);
    const auto rf = reference::attention_forward(rcfg, q, k, v);
    const auto rg = reference::attention_backward(rcfg, q, k, v, rf, dout);
    reference::AttentionBoundOptions<hp> opt;
    opt.parts = parts;
    const auto bnd = reference::attention_bounds(rcfg, q, k, v, dout, arith<T>(), opt);
    const auto bnd1 = reference::attention_bounds(rcfg, q, k, v, dout, arith<T>());
    EXPECT_WITHIN_BOUND(key + "dense out", dense.out, rf.out, bnd1.out);
    EXPECT_WITHIN_BOUND(key + "dense lse", dense.lse, rf.lse, bnd1.lse);
    EXPECT_WITHIN_BOUND(key + "dense dq", dense_g.dq, rg.dq, bnd1.dq);
    EXPECT_WITHIN_BOUND(key + "dense dk", dense_g.dk, rg.dk, bnd1.dk);
    EXPECT_WITHIN_BOUND(key + "dense dv", dense_g.dv, rg.dv, bnd1.dv);
    EXPECT_WITHIN_BOUND(key + "blocks out", out, rf.out, bnd.out);
    EXPECT_WITHIN_BOUND(key + "blocks(A) out", out_a, rf.out, bnd.out_acc);
    EXPECT_WITHIN_BOUND(key + "blocks lse", lse, rf.lse, bnd.lse);
    EXPECT_WITHIN_BOUND(key + "blocks(A) dq", dq_a, rg.dq, bnd.dq_acc);
    EXPECT_WITHIN_BOUND(key + "blocks(A) dk", dk_a, rg.dk, bnd.dk_acc);
    EXPECT_WITHIN_BOUND(key + "blocks(A) dv", dv_a, rg.dv, bnd.dv_acc);
  }
}

// ---------------------------------------------------------------- hand-checked values

TEST(Attention, two_keys_by_hand) {
  // d = 1, scale 1: q = 1, k = (0, 1), v = (1, 3): s = (0, 1), P = (1, e)/(1 + e).
  AttentionConfig cfg;
  cfg.scale = 1;
  const auto q = tensor_of<double>({1, 1, 1, 1}, {1});
  const auto k = tensor_of<double>({1, 2, 1, 1}, {0, 1});
  const auto v = tensor_of<double>({1, 2, 1, 1}, {1, 3});
  const auto f = attention_forward(cfg, q, k, v);
  const double e = std::exp(1.0), p0 = 1 / (1 + e), p1 = e / (1 + e);
  const double out = p0 + 3 * p1;
  EXPECT_NEAR(f.out[0], out, 1e-15);
  EXPECT_NEAR(f.lse[0], std::log(1 + e), 1e-15);
  // dout = 1: D = out, dP = v, dS = P·(v − out); dq = Σ dS·k; dk = dS·q; dv = P.
  const auto g = attention_backward(cfg, q, k, v, f, tensor_of<double>({1, 1, 1, 1}, {1}));
  EXPECT_NEAR(g.dq[0], p1 * (3 - out), 1e-15);
  EXPECT_NEAR(g.dk[0], p0 * (1 - out), 1e-15);
  EXPECT_NEAR(g.dk[1], p1 * (3 - out), 1e-15);
  EXPECT_NEAR(g.dv[0], p0, 1e-15);
  EXPECT_NEAR(g.dv[1], p1, 1e-15);
  // Default scale 1/sqrt(d): d = 4, q·k = 4 → s = 2.
  AttentionConfig c4;
  c4.head_dim = 4;
  EXPECT_EQ(c4.effective_scale(), 0.5);
  const auto q4 = tensor_of<double>({1, 1, 1, 4}, {1, 1, 1, 1});
  const auto k4 = tensor_of<double>({1, 2, 1, 4}, {1, 1, 1, 1, 0, 0, 0, 0});
  const auto v4 = tensor_of<double>({1, 2, 1, 4}, {1, 1, 1, 1, 0, 0, 0, 0});
  const auto f4 = attention_forward(c4, q4, k4, v4);
  EXPECT_NEAR(f4.lse[0], std::log(std::exp(2.0) + 1), 1e-15);
  EXPECT_NEAR(f4.out[0], std::exp(2.0) / (std::exp(2.0) + 1), 1e-15);
}

// q = 0 makes every score 0: a row's out is the mean of the v's it sees.
template <class T>
Tensor<T> seq_values(std::size_t batch, std::size_t len, std::size_t heads, std::size_t d,
                     double head_step) {
  Tensor<T> t(Shape{batch, len, heads, d});
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t s = 0; s < len; ++s)
      for (std::size_t j = 0; j < heads; ++j)
        for (std::size_t e = 0; e < d; ++e)
          t[((b * len + s) * heads + j) * d + e] =
              static_cast<T>(double(s + 1) + head_step * double(j));
  return t;
}

TEST(Attention, causal_is_bottom_right_aligned) {
  const std::vector<std::pair<std::size_t, std::size_t>> shapes{{2, 4}, {4, 2}, {3, 3}};
  for (const auto& [lq, lk] : shapes) {
    AttentionConfig cfg;
    cfg.mask = {MaskKind::causal, lq, lk, {}, {}};
    const Tensor<double> q(Shape{1, lq, 1, 1});  // zeros
    const auto k = seq_values<double>(1, lk, 1, 1, 0);
    const auto v = seq_values<double>(1, lk, 1, 1, 0);  // v_s = s + 1
    const auto f = attention_forward(cfg, q, k, v);
    for (std::size_t t = 0; t < lq; ++t) {
      // Query t sees keys 0..t + (Lk − Lq) (bottom-right): mean of 1..t + Lk − Lq + 1.
      const long last = static_cast<long>(t + lk) - static_cast<long>(lq);
      if (last < 0) {
        EXPECT_EQ(f.out[t], 0.0) << "Lq=" << lq << " Lk=" << lk << " t=" << t;
        EXPECT_EQ(f.lse[t], -std::numeric_limits<double>::infinity());
        continue;
      }
      const double n = static_cast<double>(last + 1);
      EXPECT_NEAR(f.out[t], (n + 1) / 2, 1e-14) << "Lq=" << lq << " Lk=" << lk << " t=" << t;
      EXPECT_NEAR(f.lse[t], std::log(n), 1e-14);
    }
  }
  // The last query always sees every key; with Lq < Lk the first query sees Lk − Lq + 1 keys.
  AttentionConfig cfg;
  cfg.mask = {MaskKind::causal, 2, 5, {}, {}};
  EXPECT_TRUE(cfg.mask.visible(0, 0, 3));
  EXPECT_FALSE(cfg.mask.visible(0, 0, 4));
  EXPECT_TRUE(cfg.mask.visible(0, 1, 4));
}

TEST(Attention, query_head_i_reads_kv_head_i_over_group_size) {
  // h = 6, g = 3 (groups of 2): head i must read kv head i/2, not i mod 3. v of kv head j is
  // constant 10·j + s + 1 over key s; q = 0, so out of head i is the mean over s.
  const std::size_t h = 6, g = 3, lk = 3;
  AttentionConfig cfg;
  cfg.q_heads = h;
  cfg.kv_heads = g;
  const Tensor<double> q(Shape{1, 1, h, 1});
  const auto k = seq_values<double>(1, lk, g, 1, 10);
  const auto v = seq_values<double>(1, lk, g, 1, 10);
  const auto f = attention_forward(cfg, q, k, v);
  for (std::size_t i = 0; i < h; ++i) {
    EXPECT_NEAR(f.out[i], 2.0 + 10.0 * static_cast<double>(i / (h / g)), 1e-14)
        << "query head " << i << " must read kv head " << i / (h / g) << " (i mod g would read "
        << i % g << ")";
  }
  // dk, dv of a kv head sum over its query heads: dv_s = Σ_i P·dout = 2·(1/3)·dout.
  const Tensor<double> dout(Shape{1, 1, h, 1}, std::vector<double>(h, 1.5));
  const auto gr = attention_backward(cfg, q, k, v, f, dout);
  for (std::size_t x = 0; x < gr.dv.size(); ++x) EXPECT_NEAR(gr.dv[x], 2 * 1.5 / 3, 1e-15);
}

TYPED_TEST(AttentionTyped, empty_rows_give_zero_out_minus_inf_lse_and_zero_gradients) {
  using T = TypeParam;
  // Sequence 0 fully padded; sequence 1 has a fully masked row in its explicit mask; causal with
  // Lq > Lk has empty leading rows.
  const std::size_t lq = 3, lk = 4, d = 4;
  AttentionConfig cfg;
  cfg.head_dim = d;
  cfg.mask.kind = MaskKind::explicit_mask;
  cfg.mask.q_len = lq;
  cfg.mask.k_len = lk;
  cfg.mask.key_lengths = {0, 4};
  cfg.mask.allowed =
      Tensor<std::uint8_t>(Shape{2, lq, lk}, std::vector<std::uint8_t>(2 * lq * lk, 1));
  for (std::size_t s = 0; s < lk; ++s) cfg.mask.allowed[(1 * lq + 1) * lk + s] = 0;  // b 1, t 1
  const auto q = random_tensor<T>({2, lq, 1, d}, 1), k = random_tensor<T>({2, lk, 1, d}, 2),
             v = random_tensor<T>({2, lk, 1, d}, 3), dout = random_tensor<T>({2, lq, 1, d}, 4);
  const auto f = attention_forward(cfg, q, k, v);
  const auto g = attention_backward(cfg, q, k, v, f, dout);
  auto empty_row = [](std::size_t b, std::size_t t) { return b == 0 || t == 1; };
  for (std::size_t b = 0; b < 2; ++b) {
    for (std::size_t t = 0; t < lq; ++t) {
      const float lse = static_cast<float>(f.lse[b * lq + t]);
      for (std::size_t e = 0; e < d; ++e) {
        const double o = static_cast<double>(f.out[(b * lq + t) * d + e]);
        const double dq = static_cast<double>(g.dq[(b * lq + t) * d + e]);
        EXPECT_FALSE(std::isnan(o) || std::isnan(dq));
        if (empty_row(b, t)) {
          EXPECT_EQ(o, 0.0);
          EXPECT_EQ(dq, 0.0);
        }
      }
      if (empty_row(b, t)) {
        EXPECT_EQ(lse, -std::numeric_limits<float>::infinity());
      } else {
        EXPECT_TRUE(std::isfinite(lse));
      }
    }
  }
  // Sequence 0's keys are seen by no one: zero dk, dv.
  for (std::size_t x = 0; x < lk * d; ++x) {
    EXPECT_EQ(static_cast<double>(g.dk[x]), 0.0);
    EXPECT_EQ(static_cast<double>(g.dv[x]), 0.0);
  }
  // The block kernel on a block none of a row's keys fall in, and the merge of empty partials.
  const auto part = attention_block_forward(cfg, q, seq_slice(k, 0, 0), seq_slice(v, 0, 0),
                                            iota_positions(lq), iota_positions(0));
  for (const auto x : part.lse.values()) EXPECT_EQ(x, -std::numeric_limits<acc_t<T>>::infinity());
  for (const auto x : part.out.values()) EXPECT_EQ(x, acc_t<T>(0));
  // Causal with Lq > Lk: rows 0 and 1 of 4 see nothing.
  AttentionConfig c2;
  c2.head_dim = d;
  c2.mask = {MaskKind::causal, 4, 2, {}, {}};
  const auto q2 = random_tensor<T>({1, 4, 1, d}, 5);
  const auto k2 = random_tensor<T>({1, 2, 1, d}, 6);
  const auto f2 = attention_forward(c2, q2, k2, k2);
  const auto g2 = attention_backward(c2, q2, k2, k2, f2, q2);
  EXPECT_EQ(f2.lse[0], -std::numeric_limits<acc_t<T>>::infinity());
  EXPECT_EQ(f2.lse[1], -std::numeric_limits<acc_t<T>>::infinity());
  for (std::size_t e = 0; e < 2 * d; ++e) {
    EXPECT_EQ(static_cast<double>(f2.out[e]), 0.0);
    EXPECT_EQ(static_cast<double>(g2.dq[e]), 0.0);
  }
  for (const auto x : g2.dk.values()) EXPECT_FALSE(Eigen::numext::isnan(x));
}

TYPED_TEST(AttentionTyped, key_padding_equals_attention_over_the_valid_keys) {
  using T = TypeParam;
  const std::size_t lq = 4, lk = 6, d = 8;
  AttentionConfig cfg;
  cfg.q_heads = 2;
  cfg.kv_heads = 1;
  cfg.head_dim = d;
  cfg.mask = {MaskKind::none, lq, lk, {3, 6}, {}};
  const auto q = random_tensor<T>({2, lq, 2, d}, 11), k = random_tensor<T>({2, lk, 1, d}, 12),
             v = random_tensor<T>({2, lk, 1, d}, 13), dout = random_tensor<T>({2, lq, 2, d}, 14);
  const auto f = attention_forward(cfg, q, k, v);
  const auto g = attention_backward(cfg, q, k, v, f, dout);
  // Sequence 0 against its 3 valid keys only, unmasked: the same bits (same operations).
  AttentionConfig c0 = cfg;
  c0.mask = {};
  auto seq0 = [&](const Tensor<T>& t, std::size_t len) {
    Tensor<T> o(Shape{1, len, t.dim(2), t.dim(3)});
    std::copy_n(t.data(), o.size(), o.data());
    return o;
  };
  const auto f0 = attention_forward(c0, seq0(q, lq), seq0(k, 3), seq0(v, 3));
  const auto g0 = attention_backward(c0, seq0(q, lq), seq0(k, 3), seq0(v, 3), f0, seq0(dout, lq));
  EXPECT_TRUE(std::equal(f0.out.values().begin(), f0.out.values().end(), f.out.values().begin(),
                         [](T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }));
  EXPECT_TRUE(std::equal(g0.dk.values().begin(), g0.dk.values().end(), g.dk.values().begin(),
                         [](T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }));
  for (std::size_t x = 3 * d; x < lk * d; ++x) {  // padded keys of sequence 0: no gradient
    EXPECT_EQ(static_cast<double>(g.dk[x]), 0.0);
    EXPECT_EQ(static_cast<double>(g.dv[x]), 0.0);
  }
  // And within the bound of the reference.
  const auto rcfg = reference::attention_config_of(cfg);
  const auto rf = reference::attention_forward(rcfg, to_hp(q), to_hp(k), to_hp(v));
  const auto bnd =
      reference::attention_bounds(rcfg, to_hp(q), to_hp(k), to_hp(v), to_hp(dout), arith<T>());
  EXPECT_WITHIN_BOUND(std::string(dtype_name<T>()) + " dense out", f.out, rf.out, bnd.out);
}

TYPED_TEST(AttentionTyped, an_explicit_causal_pattern_reproduces_the_causal_mask) {
  using T = TypeParam;
  const std::size_t lq = 5, lk = 7, d = 4;
  AttentionConfig causal;
  causal.q_heads = 2;
  causal.head_dim = d;
  causal.kv_heads = 2;
  causal.mask = {MaskKind::causal, lq, lk, {}, {}};
  AttentionConfig expl = causal;
  expl.mask.kind = MaskKind::explicit_mask;
  expl.mask.allowed = Tensor<std::uint8_t>(Shape{1, lq, lk});
  for (std::size_t t = 0; t < lq; ++t)
    for (std::size_t s = 0; s < lk; ++s) expl.mask.allowed[t * lk + s] = s <= t + (lk - lq) ? 1 : 0;
  const auto q = random_tensor<T>({1, lq, 2, d}, 21), k = random_tensor<T>({1, lk, 2, d}, 22),
             v = random_tensor<T>({1, lk, 2, d}, 23), dout = random_tensor<T>({1, lq, 2, d}, 24);
  const auto a = attention_forward(causal, q, k, v), b = attention_forward(expl, q, k, v);
  EXPECT_TRUE(bit_equal(a.out, b.out));
  EXPECT_TRUE(bit_equal(a.lse, b.lse));
  const auto ga = attention_backward(causal, q, k, v, a, dout);
  const auto gb = attention_backward(expl, q, k, v, b, dout);
  EXPECT_TRUE(bit_equal(ga.dq, gb.dq) && bit_equal(ga.dk, gb.dk) && bit_equal(ga.dv, gb.dv));
}

// ---------------------------------------------------------------- mutants the bound catches

// The largest |err|/bound of `computed` (any dtype) against the reference.
template <class C>
double ratio_of(const Tensor<C>& computed, const Tensor<hp>& ref, const Tensor<hp>& bound) {
  return judge(computed, ref, bound).max_ratio;
}

TYPED_TEST(AttentionTyped, the_bound_catches_realistic_bugs) {
  using T = TypeParam;
  using A = acc_t<T>;
  const std::string dt = dtype_name<T>();
  const std::size_t batch = 1, lq = 4, lk = 7, h = 4, g = 2, d = 8;
  AttentionConfig cfg;
  cfg.q_heads = h;
  cfg.kv_heads = g;
  cfg.head_dim = d;
  cfg.mask = {MaskKind::causal, lq, lk, {}, {}};
  const auto q = random_tensor<T>({batch, lq, h, d}, 31),
             k = random_tensor<T>({batch, lk, g, d}, 32),
             v = random_tensor<T>({batch, lk, g, d}, 33),
             dout = random_tensor<T>({batch, lq, h, d}, 34);
  const auto rcfg = reference::attention_config_of(cfg);
  const auto rq = to_hp(q), rk = to_hp(k), rv = to_hp(v), rdo = to_hp(dout);
  const auto rf = reference::attention_forward(rcfg, rq, rk, rv);
  const auto rg = reference::attention_backward(rcfg, rq, rk, rv, rf, rdo);
  const auto bnd = reference::attention_bounds(rcfg, rq, rk, rv, rdo, arith<T>());
  const auto good = attention_forward(cfg, q, k, v);
  const auto good_g = attention_backward(cfg, q, k, v, good, dout);
  EXPECT_LE(ratio_of(good.out, rf.out, bnd.out), 1.0);

  // 1. Top-left causal alignment (s ≤ t) instead of bottom-right, Lq ≠ Lk.
  AttentionConfig tl = cfg;
  tl.mask.kind = MaskKind::explicit_mask;
  tl.mask.allowed = Tensor<std::uint8_t>(Shape{batch, lq, lk});
  for (std::size_t t = 0; t < lq; ++t)
    for (std::size_t s = 0; s < lk; ++s) tl.mask.allowed[t * lk + s] = s <= t ? 1 : 0;
  const double r_tl = ratio_of(attention_forward(tl, q, k, v).out, rf.out, bnd.out);
  record(dt + " mutant top-left causal out", r_tl);
  EXPECT_GT(r_tl, 1.0);

  // 2. Wrong lse: log(l) without the max, and log2 instead of the natural log.
  Tensor<A> no_max = good.lse, log2 = good.lse;
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t i = 0; i < h; ++i) {
      for (std::size_t t = 0; t < lq; ++t) {
        A m = -std::numeric_limits<A>::infinity();
        for (std::size_t s = 0; s < lk; ++s) {
          if (!cfg.mask.visible(b, t, s)) continue;
          A dot = 0;
          for (std::size_t e = 0; e < d; ++e)
            dot = dot +
                  A(q[((b * lq + t) * h + i) * d + e]) * A(k[((b * lk + s) * g + i / 2) * d + e]);
          m = std::max(m, dot * A(cfg.effective_scale()));
        }
        const std::size_t li = (b * h + i) * lq + t;
        no_max[li] = good.lse[li] - m;
        log2[li] = m + (good.lse[li] - m) / A(std::log(2.0));
      }
    }
  }
  const double r_nm = ratio_of(no_max, rf.lse, bnd.lse), r_l2 = ratio_of(log2, rf.lse, bnd.lse);
  record(dt + " mutant lse without max", r_nm);
  record(dt + " mutant lse in log2", r_l2);
  EXPECT_GT(r_nm, 1.0);
  EXPECT_GT(r_l2, 1.0);
  // ... and a backward fed the wrong lse gives wrong gradients.
  const AttentionOutput<T> bad_fwd{good.out, no_max};
  const double r_bl = ratio_of(attention_backward(cfg, q, k, v, bad_fwd, dout).dq, rg.dq, bnd.dq);
  record(dt + " mutant backward with lse without max dq", r_bl);
  EXPECT_GT(r_bl, 1.0);

  // 3. GQA head i reading kv head i mod g: run the kernel with the query heads permuted so that
  //    the correct mapping of the permuted tensor is the wrong mapping of the original.
  //    Original head i sits at position pos(i) with pos(i)/(h/g) = i mod g.
  std::vector<std::size_t> pos(h);
  {
    std::vector<std::size_t> fill(g, 0);
    for (std::size_t i = 0; i < h; ++i) pos[i] = (i % g) * (h / g) + fill[i % g]++;
  }
  auto permute_heads = [&](const Tensor<T>& x, bool inverse) {
    Tensor<T> y(x.shape());
    for (std::size_t bt = 0; bt < batch * lq; ++bt)
      for (std::size_t i = 0; i < h; ++i)
        for (std::size_t e = 0; e < d; ++e) {
          const std::size_t from = inverse ? pos[i] : i, to = inverse ? i : pos[i];
          y[(bt * h + to) * d + e] = x[(bt * h + from) * d + e];
        }
    return y;
  };
  const auto mod_out =
      permute_heads(attention_forward(cfg, permute_heads(q, false), k, v).out, true);
  const double r_mod = ratio_of(mod_out, rf.out, bnd.out);
  record(dt + " mutant gqa i mod g out", r_mod);
  EXPECT_GT(r_mod, 1.0);

  // 4. dk/dv without the sum over the group's query heads (only its first head).
  AttentionConfig first = cfg;
  first.q_heads = g;
  first.kv_heads = g;
  auto heads_of = [&](const Tensor<T>& x) {  // query heads 0, h/g, 2h/g, ...
    Tensor<T> y(Shape{batch, lq, g, d});
    for (std::size_t bt = 0; bt < batch * lq; ++bt)
      for (std::size_t j = 0; j < g; ++j)
        for (std::size_t e = 0; e < d; ++e)
          y[(bt * g + j) * d + e] = x[(bt * h + j * (h / g)) * d + e];
    return y;
  };
  Tensor<A> lse_first(Shape{batch, g, lq});
  for (std::size_t j = 0; j < g; ++j)
    for (std::size_t t = 0; t < lq; ++t) lse_first[j * lq + t] = good.lse[(j * (h / g)) * lq + t];
  const auto nogroup =
      attention_block_backward(first, heads_of(q), k, v, heads_of(good.out), lse_first,
                               heads_of(dout), iota_positions(lq), iota_positions(lk));
  const double r_grp = ratio_of(rounded<T>(nogroup.dk), rg.dk, bnd.dk);
  record(dt + " mutant dk without group sum", r_grp);
  EXPECT_GT(r_grp, 1.0);
  EXPECT_LE(ratio_of(good_g.dk, rg.dk, bnd.dk), 1.0);
}

// ---------------------------------------------------------------- usage errors

TEST(AttentionUsageErrors, name_the_shapes_and_what_to_pass) {
  AttentionConfig cfg;
  cfg.q_heads = 4;
  cfg.kv_heads = 2;
  cfg.head_dim = 3;
  cfg.mask = {MaskKind::causal, 5, 6, {}, {}};
  const auto q = random_tensor<float>({2, 5, 4, 3}, 1);
  const auto k = random_tensor<float>({2, 6, 2, 3}, 2);
  const auto v = random_tensor<float>({2, 6, 2, 3}, 3);
  auto fwd = [&](const AttentionConfig& c, const Tensor<float>& qq, const Tensor<float>& kk,
                 const Tensor<float>& vv) {
    return usage_error_of([&] { (void)attention_forward(c, qq, kk, vv); });
  };
  auto with = [&](auto change) {
    AttentionConfig c = cfg;
    change(c);
    return c;
  };
  EXPECT_THAT(fwd(with([](auto& c) { c.kv_heads = 3; }), q, k, v),
              HasSubstr("cfg.q_heads = 4 and cfg.kv_heads = 3: the number of query heads must be "
                        "a positive multiple"));
  EXPECT_THAT(fwd(with([](auto& c) { c.head_dim = 0; }), q, k, v),
              HasSubstr("cfg.head_dim = 0; pass the head dimension"));
  EXPECT_THAT(fwd(with([](auto& c) { c.head_dim = 4; }), q, k, v),
              HasSubstr("but cfg.head_dim = 4; the last axis of q, k and v must be the head "
                        "dimension 4"));
  EXPECT_THAT(
      fwd(with([](auto& c) { c.scale = std::numeric_limits<double>::quiet_NaN(); }), q, k, v),
      HasSubstr("is not finite; pass a finite scale, or 0 for 1/sqrt(head_dim)"));
  EXPECT_THAT(fwd(cfg, random_tensor<float>({5, 4, 3}, 1), k, v),
              HasSubstr("q is [5, 4, 3] but must be 4-D [batch, Lq, h, d] (BSHD layout)"));
  EXPECT_THAT(fwd(cfg, q, k, random_tensor<float>({2, 7, 2, 3}, 1)),
              HasSubstr("k is [2, 6, 2, 3] but v is [2, 7, 2, 3]; k and v must both be"));
  EXPECT_THAT(
      fwd(cfg, q, random_tensor<float>({1, 6, 2, 3}, 1), random_tensor<float>({1, 6, 2, 3}, 1)),
      HasSubstr("q and k must have the same batch size"));
  EXPECT_THAT(
      fwd(cfg, q, random_tensor<float>({2, 6, 1, 3}, 1), random_tensor<float>({2, 6, 1, 3}, 1)),
      HasSubstr("q has 4 heads and k, v have 1 but cfg has q_heads = 4, kv_heads = 2; q "
                "must have (h/g)·(k's heads) = 2·g_local heads"));
  EXPECT_THAT(fwd(with([](auto& c) { c.mask.key_lengths = {6}; }), q, k, v),
              HasSubstr("cfg.mask.key_lengths has 1 entries but the batch has 2 sequences"));
  EXPECT_THAT(fwd(with([](auto& c) {
                    c.mask.key_lengths = {6, 7};
                  }),
                  q, k, v),
              HasSubstr("cfg.mask.key_lengths[1] = 7 exceeds cfg.mask.k_len = 6"));
  EXPECT_THAT(fwd(with([](auto& c) {
                    c.mask.kind = MaskKind::explicit_mask;
                    c.mask.allowed = Tensor<std::uint8_t>(Shape{2, 6, 5});
                  }),
                  q, k, v),
              HasSubstr("cfg.mask.allowed is [2, 6, 5] but an explicit mask must be [batch, "
                        "q_len, k_len] = [2, 5, 6]"));
  EXPECT_THAT(fwd(with([](auto& c) { c.mask.q_len = 0; }), q, k, v),
              HasSubstr("q_positions[0] = 0 is outside the mask's range [0, 0) (cfg.mask.q_len = "
                        "0); set cfg.mask.q_len to the GLOBAL sequence length"));
  EXPECT_THAT(fwd(with([](auto& c) { c.mask.k_len = 9; }), q, k, v),
              HasSubstr("the dense op is unpartitioned: set cfg.mask.q_len = 5 and "
                        "cfg.mask.k_len = 6"));
  EXPECT_THAT(fwd(with([](auto& c) {
                    c.mask = {MaskKind::none, 0, 0, {6, 6}, {}};
                  }),
                  q, k, v),
              HasSubstr("exceeds cfg.mask.k_len = 0"));
  // The dense op needs every head; the block kernel accepts a matching slice.
  const auto q2 = random_tensor<float>({2, 5, 2, 3}, 4);
  const auto k1 = random_tensor<float>({2, 6, 1, 3}, 5);
  EXPECT_THAT(fwd(cfg, q2, k1, k1), HasSubstr("the dense op takes every head"));
  EXPECT_NO_THROW(
      (void)attention_block_forward(cfg, q2, k1, k1, iota_positions(5), iota_positions(6)));
  const auto q8 = random_tensor<float>({2, 5, 8, 3}, 6);
  const auto k4 = random_tensor<float>({2, 6, 4, 3}, 7);
  EXPECT_THAT(usage_error_of([&] {
                (void)attention_block_forward(cfg, q8, k4, k4, iota_positions(5),
                                              iota_positions(6));
              }),
              HasSubstr("but cfg has only q_heads = 4, kv_heads = 2; cfg must give the global "
                        "head counts"));
  // Positions of the block kernel.
  EXPECT_THAT(usage_error_of([&] {
                (void)attention_block_forward(cfg, q, k, v, iota_positions(4), iota_positions(6));
              }),
              HasSubstr("4 q_positions for 5 query rows (q.dim(1)); pass one global position per "
                        "row"));
  EXPECT_THAT(usage_error_of([&] {
                (void)attention_block_forward(cfg, q, k, v, iota_positions(5),
                                              range_positions(1, 6));
              }),
              HasSubstr("k_positions[5] = 6 is outside the mask's range [0, 6) (cfg.mask.k_len = "
                        "6)"));
  // Backward's extra tensors.
  const auto f = attention_forward(cfg, q, k, v);
  EXPECT_THAT(usage_error_of([&] { (void)attention_backward(cfg, q, k, v, f, k); }),
              HasSubstr("dout is [2, 6, 2, 3] but must be [2, 5, 4, 3] (q's shape)"));
  AttentionOutput<float> bad = f;
  bad.lse = Tensor<float>(Shape{2, 5, 4});
  EXPECT_THAT(usage_error_of([&] { (void)attention_backward(cfg, q, k, v, bad, q); }),
              HasSubstr("fwd.lse is [2, 5, 4] but must be [2, 4, 5] [batch, h, Lq]"));
  bad = f;
  bad.out = q2;
  EXPECT_THAT(usage_error_of([&] { (void)attention_backward(cfg, q, k, v, bad, q); }),
              HasSubstr("fwd.out is [2, 5, 2, 3] but must be [2, 5, 4, 3]"));
  EXPECT_THAT(usage_error_of([&] {
                (void)attention_block_backward(cfg, q, k, v, q2, f.lse, q, iota_positions(5),
                                               iota_positions(6));
              }),
              HasSubstr("attention_block_backward: out is [2, 5, 2, 3] but must be [2, 5, 4, 3]"));
  EXPECT_THAT(usage_error_of([&] {
                (void)attention_block_backward(cfg, q, k, v, q, Tensor<float>(Shape{2, 4, 4}), q,
                                               iota_positions(5), iota_positions(6));
              }),
              HasSubstr("lse is [2, 4, 4] but must be [2, 4, 5] [batch, h_local, Lq_local]"));
  EXPECT_THAT(usage_error_of([&] {
                check_attention_shapes(with([](auto& c) { c.kv_heads = 0; }), q, k, v,
                                       std::span<const std::size_t>(iota_positions(5)),
                                       std::span<const std::size_t>(iota_positions(6)));
              }),
              HasSubstr("attention: cfg.q_heads = 4 and cfg.kv_heads = 0"));
  // kind none without padding needs no lengths.
  EXPECT_NO_THROW((void)attention_forward(with([](auto& c) { c.mask = {}; }), q, k, v));
  EXPECT_EQ(to_string(MaskKind::causal), "causal");
}

}  // namespace
}  // namespace shardcheck::test
