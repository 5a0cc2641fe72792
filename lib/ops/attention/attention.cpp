// Scaled dot-product attention with grouped-query heads (ops/attention/attention.hpp): the block
// kernel (local queries against local keys, the mask evaluated on global positions) and the dense
// op built on it. Every operation is written out one step at a time in A = acc_t<T>, in the order
// the header's arithmetic contract fixes, so the reference's error analysis
// (reference/attention/attention.hpp) follows the code step by step.
#include "ops/attention/attention.hpp"

#include "runtime/errors.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace shardcheck {
namespace {

std::string str(std::size_t n) { return std::to_string(n); }

// The index of element (b, l, head, e) of a [batch, L, heads, d] tensor.
struct Bshd {
  std::size_t len, heads, dim;
  std::size_t operator()(std::size_t b, std::size_t l, std::size_t head, std::size_t e) const {
    return ((b * len + l) * heads + head) * dim + e;
  }
};

// One block's loop bounds, shared by its forward and backward: q [batch, lq, hl, d] against
// k, v [batch, lk, gl, d], query head i reading kv head i / group, scores scaled by `scale`.
template <class A>
struct BlockGeometry {
  std::size_t batch, lq, hl, d, lk, gl, group;
  A scale;
  Bshd qi, ki;  // element indices of q (and out, dout) and of k (and v)

  template <class T>
  BlockGeometry(const AttentionConfig& cfg, const Tensor<T>& q, const Tensor<T>& k)
      : batch(q.dim(0)),
        lq(q.dim(1)),
        hl(q.dim(2)),
        d(q.dim(3)),
        lk(k.dim(1)),
        gl(k.dim(2)),
        group(cfg.q_heads / cfg.kv_heads),
        scale(static_cast<A>(effective_scale(cfg))),
        qi{lq, hl, d},
        ki{lk, gl, d} {}
};

// Σ_e x[e]·y[e] over e = 0 … d−1 in that order, each product rounded to A and added in A (the
// summation order the bounds in reference/attention/attention.hpp allow for; docs/attention.md).
template <class A, class T>
A dot(const T* x, const T* y, std::size_t d) {
  A sum = 0;
  for (std::size_t e = 0; e < d; ++e) {
    const A p = static_cast<A>(x[e]) * static_cast<A>(y[e]);
    sum = sum + p;
  }
  return sum;
}

template <class T>
void require_4d(const std::string& where, const char* name, const Tensor<T>& t,
                const char* expected) {
  if (t.ndim() != 4) {
    throw UsageError(where + name + " is " + format_shape(t.shape()) + " but must be 4-D " +
                     expected + " (BSHD layout)");
  }
}

void require_positions(const std::string& where, const char* name,
                       std::span<const std::size_t> positions, std::size_t rows,
                       const char* rows_name, std::size_t len, const char* len_name,
                       bool required) {
  if (positions.size() != rows) {
    throw UsageError(where + str(positions.size()) + " " + name + " for " + str(rows) + " " +
                     rows_name + "; pass one global position per row (iota_positions(" + str(rows) +
                     ") for an unpartitioned sequence)");
  }
  if (len == 0 && !required) return;
  for (std::size_t i = 0; i < positions.size(); ++i) {
    if (positions[i] >= len) {
      throw UsageError(where + name + "[" + str(i) + "] = " + str(positions[i]) +
                       " is outside the mask's range [0, " + str(len) + ") (cfg.mask." + len_name +
                       " = " + str(len) + "); set cfg.mask." + len_name +
                       " to the GLOBAL sequence length and pass global positions");
    }
  }
}

void require_dense_lengths(const std::string& where, const AttentionConfig& cfg, std::size_t lq,
                           std::size_t lk) {
  const auto& m = cfg.mask;
  const bool unset = m.q_len == 0 && m.k_len == 0;
  if (unset && m.kind == MaskKind::none && m.key_lengths.empty()) return;
  if (m.q_len != lq || m.k_len != lk) {
    throw UsageError(where + "cfg.mask has q_len = " + str(m.q_len) + ", k_len = " + str(m.k_len) +
                     " but q has Lq = " + str(lq) + " and k has Lk = " + str(lk) +
                     "; the dense op is unpartitioned: set cfg.mask.q_len = " + str(lq) +
                     " and cfg.mask.k_len = " + str(lk) +
                     " (or use attention_block_forward with global positions)");
  }
}

template <class T>
void check_extra(const std::string& where, const char* name, const Tensor<T>& t,
                 const Shape& expected, const char* what) {
  if (t.shape() != expected) {
    throw UsageError(where + name + " is " + format_shape(t.shape()) + " but must be " +
                     format_shape(expected) + " " + what);
  }
}

template <class T>
void check_shapes(const std::string& where, const AttentionConfig& cfg, const Tensor<T>& q,
                  const Tensor<T>& k, const Tensor<T>& v, std::span<const std::size_t> q_positions,
                  std::span<const std::size_t> k_positions) {
  const std::size_t h = cfg.q_heads, g = cfg.kv_heads, d = cfg.head_dim;
  if (h == 0 || g == 0 || h % g != 0) {
    throw UsageError(where + "cfg.q_heads = " + str(h) + " and cfg.kv_heads = " + str(g) +
                     ": the number of query heads must be a positive multiple of the number of "
                     "key/value heads (MHA g = h, GQA g divides h, MQA g = 1)");
  }
  if (d == 0) {
    throw UsageError(where + "cfg.head_dim = 0; pass the head dimension d (q's last axis)");
  }
  if (!std::isfinite(cfg.scale)) {
    throw UsageError(where + "cfg.scale = " + std::to_string(cfg.scale) +
                     " is not finite; pass a finite scale, or 0 for 1/sqrt(head_dim)");
  }
  require_4d(where, "q", q, "[batch, Lq, h, d]");
  require_4d(where, "k", k, "[batch, Lk, g, d]");
  require_4d(where, "v", v, "[batch, Lk, g, d]");
  if (q.dim(3) != d || k.dim(3) != d || v.dim(3) != d) {
    throw UsageError(where + "q is " + format_shape(q.shape()) + ", k " + format_shape(k.shape()) +
                     ", v " + format_shape(v.shape()) + " but cfg.head_dim = " + str(d) +
                     "; the last axis of q, k and v must be the head dimension " + str(d));
  }
  if (k.shape() != v.shape()) {
    throw UsageError(where + "k is " + format_shape(k.shape()) + " but v is " +
                     format_shape(v.shape()) + "; k and v must both be [batch, Lk, g, d]");
  }
  if (k.dim(0) != q.dim(0)) {
    throw UsageError(where + "q is " + format_shape(q.shape()) + " but k is " +
                     format_shape(k.shape()) + "; q and k must have the same batch size");
  }
  const std::size_t hl = q.dim(2), gl = k.dim(2), group = h / g;
  if (gl == 0 || hl != gl * group) {
    throw UsageError(where + "q has " + str(hl) + " heads and k, v have " + str(gl) +
                     " but cfg has q_heads = " + str(h) + ", kv_heads = " + str(g) +
                     "; q must have (h/g)·(k's heads) = " + str(group) +
                     "·g_local heads: pass all h and g heads, or the same slice of both (query "
                     "heads [r·" +
                     str(group) + "·n, (r+1)·" + str(group) + "·n) with kv heads [r·n, (r+1)·n))");
  }
  if (hl > h || gl > g) {
    throw UsageError(where + "q has " + str(hl) + " heads and k, v have " + str(gl) +
                     " but cfg has only q_heads = " + str(h) + ", kv_heads = " + str(g) +
                     "; cfg must give the global head counts");
  }
  const auto& m = cfg.mask;
  const std::size_t batch = q.dim(0);
  if (!m.key_lengths.empty()) {
    if (m.key_lengths.size() != batch) {
      throw UsageError(where + "cfg.mask.key_lengths has " + str(m.key_lengths.size()) +
                       " entries but the batch has " + str(batch) +
                       " sequences; pass one key length per sequence, or none (no padding)");
    }
    for (std::size_t b = 0; b < batch; ++b) {
      if (m.key_lengths[b] > m.k_len) {
        throw UsageError(where + "cfg.mask.key_lengths[" + str(b) + "] = " + str(m.key_lengths[b]) +
                         " exceeds cfg.mask.k_len = " + str(m.k_len) +
                         "; key lengths count valid keys of the global sequence: 0 ≤ length ≤ "
                         "k_len (set k_len to the global key length)");
      }
    }
  }
  if (m.kind == MaskKind::explicit_mask) {
    const Shape want{batch, m.q_len, m.k_len};
    if (m.allowed.shape() != want) {
      throw UsageError(where + "cfg.mask.allowed is " + format_shape(m.allowed.shape()) +
                       " but an explicit mask must be [batch, q_len, k_len] = " +
                       format_shape(want) + " (1 = visible), over the global positions");
    }
  }
  const bool q_needed = m.kind != MaskKind::none;
  const bool k_needed = q_needed || !m.key_lengths.empty();
  require_positions(where, "q_positions", q_positions, q.dim(1), "query rows (q.dim(1))", m.q_len,
                    "q_len", q_needed);
  require_positions(where, "k_positions", k_positions, k.dim(1), "key rows (k.dim(1))", m.k_len,
                    "k_len", k_needed);
}

// The forward of one block, every row; out and lse in A.
template <class T>
AttentionPartial<T> block_forward(const AttentionConfig& cfg, const Tensor<T>& q,
                                  const Tensor<T>& k, const Tensor<T>& v,
                                  std::span<const std::size_t> qpos,
                                  std::span<const std::size_t> kpos) {
  using A = acc_t<T>;
  const BlockGeometry<A> geo(cfg, q, k);
  const auto [batch, lq, hl, d, lk, gl, group, scale, qi, ki] = geo;
  AttentionPartial<T> r{Tensor<A>(Shape{batch, lq, hl, d}), Tensor<A>(Shape{batch, hl, lq})};
  std::vector<A> s(lk), acc(d);
  std::vector<unsigned char> vis(lk);
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t i = 0; i < hl; ++i) {
      const std::size_t j = i / group;
      for (std::size_t t = 0; t < lq; ++t) {
        // Scores of the visible keys and their maximum.
        A m = -std::numeric_limits<A>::infinity();
        bool any = false;
        for (std::size_t sk = 0; sk < lk; ++sk) {
          vis[sk] = visible(cfg.mask, b, qpos[t], kpos[sk]) ? 1 : 0;
          if (vis[sk] == 0) continue;
          s[sk] = dot<A>(q.data() + qi(b, t, i, 0), k.data() + ki(b, sk, j, 0), d) * scale;
          if (!any || s[sk] > m) m = s[sk];
          any = true;
        }
        A* out = r.out.data() + qi(b, t, i, 0);
        A& lse = r.lse[(b * hl + i) * lq + t];
        if (!any) {  // empty row: out 0 (already), lse −inf; exp(s − m) is never evaluated
          lse = -std::numeric_limits<A>::infinity();
          continue;
        }
        A l = 0;
        std::fill(acc.begin(), acc.end(), A(0));
        for (std::size_t sk = 0; sk < lk; ++sk) {
          if (vis[sk] == 0) continue;
          const A p = std::exp(s[sk] - m);
          l = l + p;
          for (std::size_t e = 0; e < d; ++e) {
            const A pv = p * static_cast<A>(v[ki(b, sk, j, e)]);
            acc[e] = acc[e] + pv;
          }
        }
        for (std::size_t e = 0; e < d; ++e) out[e] = acc[e] / l;
        lse = m + std::log(l);
      }
    }
  }
  return r;
}

template <class T>
AttentionBlockGrads<T> block_backward(const AttentionConfig& cfg, const Tensor<T>& q,
                                      const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& out,
                                      const Tensor<acc_t<T>>& lse, const Tensor<T>& dout,
                                      std::span<const std::size_t> qpos,
                                      std::span<const std::size_t> kpos) {
  using A = acc_t<T>;
  const BlockGeometry<A> geo(cfg, q, k);
  const auto [batch, lq, hl, d, lk, gl, group, scale, qi, ki] = geo;
  AttentionBlockGrads<T> g{Tensor<A>(q.shape()), Tensor<A>(k.shape()), Tensor<A>(k.shape())};
  std::vector<A> dq_acc(d);
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t i = 0; i < hl; ++i) {
      const std::size_t j = i / group;
      for (std::size_t t = 0; t < lq; ++t) {
        const A row_lse = lse[(b * hl + i) * lq + t];
        // Empty row (or a row this block's caller saw empty): P = 0, no contribution.
        if (row_lse == -std::numeric_limits<A>::infinity()) continue;
        const A dd = dot<A>(dout.data() + qi(b, t, i, 0), out.data() + qi(b, t, i, 0), d);
        std::fill(dq_acc.begin(), dq_acc.end(), A(0));
        bool touched = false;
        for (std::size_t sk = 0; sk < lk; ++sk) {
          if (!visible(cfg.mask, b, qpos[t], kpos[sk])) continue;
          touched = true;
          const A sc = dot<A>(q.data() + qi(b, t, i, 0), k.data() + ki(b, sk, j, 0), d) * scale;
          const A pr = std::exp(sc - row_lse);
          const A dp = dot<A>(dout.data() + qi(b, t, i, 0), v.data() + ki(b, sk, j, 0), d);
          const A diff = dp - dd;
          const A ds = pr * diff;
          for (std::size_t e = 0; e < d; ++e) {
            const A pk = ds * static_cast<A>(k[ki(b, sk, j, e)]);
            dq_acc[e] = dq_acc[e] + pk;
            const A pq = ds * static_cast<A>(q[qi(b, t, i, e)]);
            A& dk = g.dk[ki(b, sk, j, e)];
            dk = dk + pq;
            const A pd = pr * static_cast<A>(dout[qi(b, t, i, e)]);
            A& dv = g.dv[ki(b, sk, j, e)];
            dv = dv + pd;
          }
        }
        if (!touched) continue;
        for (std::size_t e = 0; e < d; ++e) g.dq[qi(b, t, i, e)] = scale * dq_acc[e];
      }
    }
  }
  for (auto& x : g.dk.values()) x = scale * x;
  return g;
}

}  // namespace

double effective_scale(const AttentionConfig& cfg) {
  return cfg.scale != 0 ? cfg.scale : 1.0 / std::sqrt(static_cast<double>(cfg.head_dim));
}

std::vector<std::size_t> iota_positions(std::size_t n) {
  std::vector<std::size_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = i;
  return p;
}

template <class T>
void check_attention_shapes(const AttentionConfig& cfg, const Tensor<T>& q, const Tensor<T>& k,
                            const Tensor<T>& v, std::span<const std::size_t> q_positions,
                            std::span<const std::size_t> k_positions) {
  check_shapes<T>("attention: ", cfg, q, k, v, q_positions, k_positions);
}

template <class T>
AttentionPartial<T> attention_block_forward(const AttentionConfig& cfg, const Tensor<T>& q,
                                            const Tensor<T>& k, const Tensor<T>& v,
                                            std::span<const std::size_t> q_positions,
                                            std::span<const std::size_t> k_positions) {
  check_shapes<T>("attention_block_forward: ", cfg, q, k, v, q_positions, k_positions);
  return block_forward(cfg, q, k, v, q_positions, k_positions);
}

template <class T>
AttentionBlockGrads<T> attention_block_backward(const AttentionConfig& cfg, const Tensor<T>& q,
                                                const Tensor<T>& k, const Tensor<T>& v,
                                                const Tensor<T>& out, const Tensor<acc_t<T>>& lse,
                                                const Tensor<T>& dout,
                                                std::span<const std::size_t> q_positions,
                                                std::span<const std::size_t> k_positions) {
  const std::string where = "attention_block_backward: ";
  check_shapes<T>(where, cfg, q, k, v, q_positions, k_positions);
  check_extra(where, "out", out, q.shape(), "(q's shape: the merged forward output of these rows)");
  check_extra(where, "dout", dout, q.shape(), "(q's shape)");
  check_extra(where, "lse", lse, Shape{q.dim(0), q.dim(2), q.dim(1)},
              "[batch, h_local, Lq_local] (the merged forward lse of these rows)");
  return block_backward(cfg, q, k, v, out, lse, dout, q_positions, k_positions);
}

namespace {

// The dense op's query and key positions (0, 1, ...) once q, k, v and cfg are checked: shapes,
// mask lengths, and every head in q (`block_op` is the op to use for a slice of the heads).
template <class T>
std::pair<std::vector<std::size_t>, std::vector<std::size_t>> dense_positions(
    const std::string& where, const char* block_op, const AttentionConfig& cfg, const Tensor<T>& q,
    const Tensor<T>& k, const Tensor<T>& v) {
  auto qp = iota_positions(q.ndim() == 4 ? q.dim(1) : 0);
  auto kp = iota_positions(k.ndim() == 4 ? k.dim(1) : 0);
  check_shapes<T>(where, cfg, q, k, v, qp, kp);
  require_dense_lengths(where, cfg, q.dim(1), k.dim(1));
  if (q.dim(2) != cfg.q_heads) {
    throw UsageError(
        where + "q is " + format_shape(q.shape()) + " but cfg.q_heads = " + str(cfg.q_heads) +
        "; the dense op takes every head (use " + block_op + " for a slice of the heads)");
  }
  return {std::move(qp), std::move(kp)};
}

}  // namespace

template <class T>
AttentionOutput<T> attention_forward(const AttentionConfig& cfg, const Tensor<T>& q,
                                     const Tensor<T>& k, const Tensor<T>& v) {
  const std::string where = "attention_forward: ";
  const auto [qp, kp] = dense_positions(where, "attention_block_forward", cfg, q, k, v);
  auto part = block_forward(cfg, q, k, v, qp, kp);
  return {rounded<T>(part.out), std::move(part.lse)};
}

template <class T>
AttentionGrads<T> attention_backward(const AttentionConfig& cfg, const Tensor<T>& q,
                                     const Tensor<T>& k, const Tensor<T>& v,
                                     const AttentionOutput<T>& fwd, const Tensor<T>& dout) {
  const std::string where = "attention_backward: ";
  const auto [qp, kp] = dense_positions(where, "attention_block_backward", cfg, q, k, v);
  check_extra(where, "fwd.out", fwd.out, q.shape(), "(q's shape: attention_forward's out)");
  check_extra(where, "dout", dout, q.shape(), "(q's shape)");
  check_extra(where, "fwd.lse", fwd.lse, Shape{q.dim(0), q.dim(2), q.dim(1)},
              "[batch, h, Lq] (attention_forward's lse)");
  const auto g = block_backward(cfg, q, k, v, fwd.out, fwd.lse, dout, qp, kp);
  return {rounded<T>(g.dq), rounded<T>(g.dk), rounded<T>(g.dv)};
}

// T is a type here: acc_t<T> cannot take the parentheses the check asks for.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SHARDCHECK_INSTANTIATE(T)                                                                \
  template void check_attention_shapes<T>(                                                       \
      const AttentionConfig&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,              \
      std::span<const std::size_t>, std::span<const std::size_t>);                               \
  template AttentionPartial<T> attention_block_forward<T>(                                       \
      const AttentionConfig&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,              \
      std::span<const std::size_t>, std::span<const std::size_t>);                               \
  template AttentionBlockGrads<T> attention_block_backward<T>(                                   \
      const AttentionConfig&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,              \
      const Tensor<T>&, const Tensor<acc_t<T>>&, const Tensor<T>&, std::span<const std::size_t>, \
      std::span<const std::size_t>);                                                             \
  template AttentionOutput<T> attention_forward<T>(const AttentionConfig&, const Tensor<T>&,     \
                                                   const Tensor<T>&, const Tensor<T>&);          \
  template AttentionGrads<T> attention_backward<T>(const AttentionConfig&, const Tensor<T>&,     \
                                                   const Tensor<T>&, const Tensor<T>&,           \
                                                   const AttentionOutput<T>&, const Tensor<T>&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
// NOLINTEND(bugprone-macro-parentheses)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck
