// What the attention kernel's unit tests (the program ops_attention_unit_tests) share: the
// judge of a computed tensor against the high-precision reference (reference/attention/
// attention.hpp) within its a-priori bound, the record of the largest |err|/bound per dtype and
// result (printed at the end of the program: a correct implementation stays <= 1; "dense" is
// the T-rounded result of the dense op, "blocks" the partitioned computation rounded to T,
// "blocks(A)" the same before that rounding; mutants must exceed 1), the test configurations,
// their inputs, and the typed fixture over float64, float32, bfloat16 and float16.
#pragma once

#include "ops/attention/attention.hpp"

#include "reference/attention/attention.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::test::attention_unit {

using reference::hp;
using reference::to_hp;

template <class T>
const char* dtype_name() {
  return name(dtype_of<T>).data();
}

// Keeps the largest ratio seen under `key` for the summary printed at the end of the program.
void record(const std::string& key, double ratio);

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

// The library's out, lse, dq, dk and dv (fwd, grads) each within its bound of the reference's
// (rf, rg, bounds bnd), recorded under key + the tensor's name.
template <class Fwd, class Grads, class RefFwd, class RefGrads, class Bounds>
void expect_within_bounds(const std::string& key, const Fwd& fwd, const Grads& grads,
                          const RefFwd& rf, const RefGrads& rg, const Bounds& bnd) {
  EXPECT_WITHIN_BOUND(key + "out", fwd.out, rf.out, bnd.out);
  EXPECT_WITHIN_BOUND(key + "lse", fwd.lse, rf.lse, bnd.lse);
  EXPECT_WITHIN_BOUND(key + "dq", grads.dq, rg.dq, bnd.dq);
  EXPECT_WITHIN_BOUND(key + "dk", grads.dk, rg.dk, bnd.dk);
  EXPECT_WITHIN_BOUND(key + "dv", grads.dv, rg.dv, bnd.dv);
}

struct Case {
  std::string name;
  std::size_t batch, lq, lk, h, g, d;
  MaskKind kind;
  bool padding;
};

// The config of case c; seed draws its explicit mask.
AttentionConfig make_config(const Case& c, std::uint64_t seed);

// Shapes, head groupings (MHA, GQA, MQA), masks and key padding the bound is checked over.
const std::vector<Case>& cases();

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

// The reference of a case: its inputs taken exactly in hp, the forward and the backward, and the
// bounds for T of the op computed in `parts` key or query blocks (1: the dense op).
template <class T>
struct ReferenceAttention {
  AttentionConfig cfg;
  Tensor<hp> q, k, v, dout;
  reference::AttentionOutput<hp> rf;
  reference::AttentionGrads<hp> rg;

  template <class Config, class Inputs>
  ReferenceAttention(Config c, const Inputs& in)
      : cfg(std::move(c)),
        q(to_hp(in.q)),
        k(to_hp(in.k)),
        v(to_hp(in.v)),
        dout(to_hp(in.dout)),
        rf(reference::attention_forward(cfg, q, k, v)),
        rg(reference::attention_backward(cfg, q, k, v, rf, dout)) {}

  reference::AttentionBounds<hp> bounds(std::size_t parts = 1) const {
    reference::AttentionBoundOptions<hp> opt;
    opt.parts = parts;
    return reference::attention_bounds(cfg, q, k, v, dout, arith<T>(), opt);
  }
};

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

// The global positions offset, offset + 1, ..., offset + len - 1.
std::vector<std::size_t> range_positions(std::size_t offset, std::size_t len);

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

template <class T>
class AttentionTyped : public ::testing::Test {};
TYPED_TEST_SUITE(AttentionTyped, AllTypes);

}  // namespace shardcheck::test::attention_unit
