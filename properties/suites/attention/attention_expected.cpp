#include "suites/attention/attention_expected.hpp"

#include "engine/instantiate.hpp"
#include "reference/attention/attention.hpp"
#include "reference/bounds.hpp"
#include "suites/attention/attention_run.hpp"

#include <algorithm>

namespace shardcheck::check {
namespace {

namespace ref = reference;
using R = ref::hp;

// A value with an elementwise bound on |implementation − exact|.
struct VB {
  Tensor<R> v, e;
};

using AttentionBoundsOf = ref::AttentionBounds<R>;

struct Arith {
  R u_a, eta_a, u_t, eta_t;
  bool round_t;
};

// The case's storage T and accumulator: acc_t<T>, or the one the case declares.
template <class T>
ref::Arithmetic arithmetic_of_case(const AttentionCase& c) {
  auto a = ref::arithmetic_of<T>();
  if (c.accumulate) a.accumulate = ref::format_of(*c.accumulate);
  return a;
}

Arith arith_of(const ref::Arithmetic& a) {
  return {ref::unit_roundoff<R>(a.accumulate), ref::smallest_subnormal<R>(a.accumulate),
          ref::unit_roundoff<R>(a.storage), ref::smallest_subnormal<R>(a.storage),
          !(a.storage == a.accumulate)};
}

R gam(std::size_t n, const R& u) { return n == 0 ? R(0) : R(R(n) * u / (1 - R(n) * u)); }

VB exact(Tensor<R> v) {
  Tensor<R> e(v.shape());
  return {std::move(v), std::move(e)};
}

// One rounding to T of every element (nothing when T is the accumulator).
void round_t(VB& x, const Arith& ar) {
  if (!ar.round_t) return;
  using std::abs;
  for (std::size_t i = 0; i < x.v.size(); ++i) {
    x.e[i] = x.e[i] + ar.u_t * (abs(x.v[i]) + x.e[i]) + ar.eta_t / 2;
  }
}

// C [m, n] = A [m, k]·B [n, k]ᵀ, each element one dot product of k terms in A, rounded to T.
VB abt(const VB& a, const VB& b, const Arith& ar) {
  using std::abs;
  const std::size_t m = a.v.dim(0), k = a.v.dim(1), n = b.v.dim(0);
  VB c{Tensor<R>(Shape{m, n}), Tensor<R>(Shape{m, n})};
  const R g = gam(k, ar.u_a);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      R val(0), prop(0), mag(0);
      for (std::size_t l = 0; l < k; ++l) {
        const R x = a.v[i * k + l], ex = a.e[i * k + l];
        const R y = b.v[j * k + l], ey = b.e[j * k + l];
        val += x * y;
        prop += ex * abs(y) + abs(x) * ey + ex * ey;
        mag += (abs(x) + ex) * (abs(y) + ey);
      }
      c.v[i * n + j] = val;
      c.e[i * n + j] = prop + g * mag + R(k) * ar.eta_a;
    }
  }
  round_t(c, ar);
  return c;
}

VB transpose(const VB& a) {
  const std::size_t m = a.v.dim(0), n = a.v.dim(1);
  VB t{Tensor<R>(Shape{n, m}), Tensor<R>(Shape{n, m})};
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      t.v[j * m + i] = a.v[i * n + j];
      t.e[j * m + i] = a.e[i * n + j];
    }
  }
  return t;
}

VB select_rows(const VB& a, const std::vector<std::size_t>& rows) {
  const std::size_t n = a.v.dim(1);
  VB s{Tensor<R>(Shape{rows.size(), n}), Tensor<R>(Shape{rows.size(), n})};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      s.v[i * n + j] = a.v[rows[i] * n + j];
      s.e[i * n + j] = a.e[rows[i] * n + j];
    }
  }
  return s;
}

VB col_range(const VB& a, std::size_t first, std::size_t count) {
  const std::size_t m = a.v.dim(0), n = a.v.dim(1);
  VB s{Tensor<R>(Shape{m, count}), Tensor<R>(Shape{m, count})};
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < count; ++j) {
      s.v[i * count + j] = a.v[i * n + first + j];
      s.e[i * count + j] = a.e[i * n + first + j];
    }
  }
  return s;
}

// Rows [first, first + count) of a 2-D (or elements of a 1-D) exact tensor.
Tensor<R> row_range(const Tensor<R>& t, std::size_t first, std::size_t count) {
  const std::size_t w = t.ndim() == 2 ? t.dim(1) : 1;
  Shape s = t.shape();
  s[0] = count;
  const auto b = t.values().begin() + static_cast<std::ptrdiff_t>(first * w);
  return Tensor<R>(s, std::vector<R>(b, b + static_cast<std::ptrdiff_t>(count * w)));
}

Tensor<R> cols_of(const Tensor<R>& t, std::size_t first, std::size_t count) {
  return col_range(exact(t), first, count).v;
}

// y + b (b broadcast over rows), one addition in T.
void add_bias(VB& y, const Tensor<R>& b, const Arith& ar) {
  using std::abs;
  const std::size_t n = b.size();
  const R u = ar.round_t ? ar.u_t : ar.u_a;
  for (std::size_t i = 0; i < y.v.size(); ++i) {
    y.v[i] += b[i % n];
    y.e[i] = y.e[i] + u * (abs(y.v[i]) + y.e[i]);  // additions: exact when subnormal
  }
}

// Σ of partials, each already in T, summed in T in any order.
VB sum_t(const std::vector<VB>& parts, const Arith& ar) {
  using std::abs;
  VB s{Tensor<R>(parts.at(0).v.shape()), Tensor<R>(parts.at(0).v.shape())};
  const R u = ar.round_t ? ar.u_t : ar.u_a;
  const R g = gam(parts.size() - 1, u);
  for (std::size_t i = 0; i < s.v.size(); ++i) {
    R mag(0);
    for (const auto& p : parts) {
      s.v[i] += p.v[i];
      s.e[i] += p.e[i];
      mag += abs(p.v[i]) + p.e[i];
    }
    s.e[i] += g * mag;
  }
  return s;
}

Tensor<R> add(const Tensor<R>& a, const Tensor<R>& b) {
  Tensor<R> c(a.shape());
  for (std::size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];
  return c;
}

// Elements along `dim` reordered to `order` (dims before `dim` are outer loops).
Tensor<R> permute_dim(const Tensor<R>& t, std::size_t dim, const std::vector<std::size_t>& order) {
  std::size_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < dim; ++i) outer *= t.dim(i);
  for (std::size_t i = dim + 1; i < t.ndim(); ++i) inner *= t.dim(i);
  const std::size_t len = t.dim(dim);
  Shape s = t.shape();
  s[dim] = order.size();
  Tensor<R> out(s);
  for (std::size_t o = 0; o < outer; ++o) {
    for (std::size_t p = 0; p < order.size(); ++p) {
      for (std::size_t i = 0; i < inner; ++i) {
        out[(o * order.size() + p) * inner + i] = t[(o * len + order[p]) * inner + i];
      }
    }
  }
  return out;
}

ExpectedTensor expected(const VB& x, const Shape& shape, std::size_t dim,
                        const std::vector<std::size_t>* order) {
  const R slack = R(1) + ldexp(R(1), -40);
  Tensor<R> v(shape, x.v.values()), e(shape, x.e.values());
  for (auto& b : e.values()) b *= slack;
  if (order != nullptr) return {permute_dim(v, dim, *order), permute_dim(e, dim, *order)};
  return {std::move(v), std::move(e)};
}

// The bounds under the case's softmax contract: natural exp over the whole row, natural exp
// online, exp2 (online), or the elementwise larger of the last two (either). The online bound
// holds for any key-block size, one key per block included, so it also covers the whole-row
// evaluation of the same exp (attention_bound.hpp, "the online softmax": it only adds terms);
// key_block, the kernel's smallest key block, caps the rescales a row sees.
AttentionBoundsOf bounds_under(SoftmaxContract contract, std::size_t key_block,
                               Exp2LseForm exp2_lse, const AttentionConfig& cfg, const Tensor<R>& q,
                               const Tensor<R>& k, const Tensor<R>& v, const Tensor<R>& dout,
                               const ref::Arithmetic& arith, ref::AttentionBoundOptions<R> opt) {
  opt.online = contract != SoftmaxContract::natural;
  opt.key_block = key_block;
  opt.exp2_lse = exp2_lse == Exp2LseForm::base2     ? ref::Exp2Lse::base2
                 : exp2_lse == Exp2LseForm::natural ? ref::Exp2Lse::natural
                                                    : ref::Exp2Lse::either;
  if (contract != SoftmaxContract::either) {
    opt.exp = contract == SoftmaxContract::exp2 ? ref::SoftmaxExp::base2 : ref::SoftmaxExp::natural;
    return ref::attention_bounds<R>(cfg, q, k, v, dout, arith, opt);
  }
  auto b = ref::attention_bounds<R>(cfg, q, k, v, dout, arith, opt);
  opt.exp = ref::SoftmaxExp::base2;
  const auto b2 = ref::attention_bounds<R>(cfg, q, k, v, dout, arith, opt);
  const auto larger = [](Tensor<R>& x, const Tensor<R>& y) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::max(x[i], y[i]);
  };
  for (auto m :
       {&AttentionBoundsOf::out, &AttentionBoundsOf::lse, &AttentionBoundsOf::dq,
        &AttentionBoundsOf::dk, &AttentionBoundsOf::dv, &AttentionBoundsOf::out_acc,
        &AttentionBoundsOf::dq_acc, &AttentionBoundsOf::dk_acc, &AttentionBoundsOf::dv_acc}) {
    larger(b.*m, b2.*m);
  }
  return b;
}

// ------------------------------------------------------------------ core

template <class T>
AttentionExpected core_expected(const AttentionCase& c, const AttentionData<T>& d) {
  const AttentionConfig& cfg = c.attention();
  const Tensor<R> q = ref::to_hp<R>(d.q), k = ref::to_hp<R>(d.k), v = ref::to_hp<R>(d.v),
                  dout = ref::to_hp<R>(d.dout);
  const auto fwd = ref::attention_forward<R>(cfg, q, k, v);
  const auto g = ref::attention_backward<R>(cfg, q, k, v, fwd, dout);
  ref::AttentionBoundOptions<R> opt;
  opt.parts = static_cast<std::size_t>(c.cp);
  const auto b = bounds_under(c.contract, c.key_block, c.exp2_lse, cfg, q, k, v, dout,
                              arithmetic_of_case<T>(c), opt);
  const auto rb = ref::attention_reference_error<R>(cfg, q, k, v, dout);
  const auto order = cp_order(c), qorder = cp_query_order(c);
  auto one = [&](const Tensor<R>& val, const Tensor<R>& bound, const Tensor<R>& rbound,
                 std::size_t dim, const std::vector<std::size_t>& by) {
    return ExpectedTensor{permute_dim(val, dim, by), permute_dim(add(bound, rbound), dim, by)};
  };
  AttentionExpected x;
  x.out = one(fwd.out, b.out, rb.out, 1, qorder);
  x.lse = one(fwd.lse, b.lse, rb.lse, 2, qorder);
  x.dq = one(g.dq, b.dq, rb.dq, 1, qorder);
  x.dk = one(g.dk, b.dk, rb.dk, 1, order);
  x.dv = one(g.dv, b.dv, rb.dv, 1, order);
  return x;
}

// ------------------------------------------------------------------ layer

// The rows of the [batch·L, ·] token matrix that cp rank j holds.
std::vector<std::size_t> token_rows(const AttentionCase& c, int cp_rank) {
  std::vector<std::size_t> rows;
  for (std::size_t b = 0; b < c.batch; ++b) {
    for (auto t : positions_of(c, cp_rank)) rows.push_back(b * c.len() + t);
  }
  return rows;
}

// Σ over cp ranks (and `extra` more identical-structure groups) of T(Σ_{t in c} aᵀ·b): the
// parameter gradient of one tp rank, as the library computes it.
VB param_grad(const AttentionCase& c, const VB& grad_out, const VB& input, const Arith& ar,
              std::vector<VB>* partials) {
  std::vector<VB> parts;
  for (int j = 0; j < c.cp; ++j) {
    const auto rows = token_rows(c, j);
    parts.push_back(
        abt(transpose(select_rows(grad_out, rows)), transpose(select_rows(input, rows)), ar));
  }
  if (partials != nullptr) {
    partials->insert(partials->end(), parts.begin(), parts.end());
    return {};
  }
  return sum_t(parts, ar);
}

VB ones(std::size_t tokens) {
  Tensor<R> o(Shape{tokens, 1});
  for (auto& x : o.values()) x = 1;
  return exact(std::move(o));
}

template <class T>
AttentionExpected layer_expected(const AttentionCase& c, const AttentionData<T>& d) {
  const auto& L = c.layer;
  const Arith ar = arith_of(arithmetic_of_case<T>(c));
  const std::size_t B = c.batch, len = c.len(), tokens = B * len, hid = L.hidden,
                    dh = L.attention.head_dim;
  const VB x = exact(Tensor<R>(Shape{tokens, hid}, ref::to_hp<R>(d.x).values()));
  const VB dy = exact(Tensor<R>(Shape{tokens, hid}, ref::to_hp<R>(d.dy).values()));
  const Tensor<R> wq = ref::to_hp<R>(d.w.wq), wk = ref::to_hp<R>(d.w.wk),
                  wv = ref::to_hp<R>(d.w.wv), wo = ref::to_hp<R>(d.w.wo);
  Tensor<R> bq, bk, bv, bo;
  if (L.has_bias) {
    bq = ref::to_hp<R>(d.w.bq);
    bk = ref::to_hp<R>(d.w.bk);
    bv = ref::to_hp<R>(d.w.bv);
    bo = ref::to_hp<R>(d.w.bo);
  }
  const std::size_t parts = L.context_parallel ? static_cast<std::size_t>(c.cp) : 1;

  std::vector<VB> y_parts, dx_parts;
  std::vector<VB> dwq, dbq, dwo;                    // per tp rank
  std::vector<std::vector<VB>> dwk, dbk, dwv, dbv;  // per kv shard: partials to sum
  std::vector<int> kv_owner;                        // the kv shard of each tp rank
  VB dbo;
  for (int r = 0; r < c.tp; ++r) {
    const HeadAssignment a = head_assignment(L, c.tp, r);
    const std::size_t hq = a.q_count * dh, hkv = a.kv_count * dh;
    // Forward projections (exact inputs), with the bias added in T.
    auto proj = [&](const Tensor<R>& w, const Tensor<R>& b, std::size_t first, std::size_t n) {
      VB p = abt(x, exact(row_range(w, first, n)), ar);
      if (L.has_bias) add_bias(p, row_range(b, first, n), ar);
      return p;
    };
    const VB q = proj(wq, bq, a.q_offset * dh, hq);
    const VB k = proj(wk, bk, a.kv_offset * dh, hkv);
    const VB v = proj(wv, bv, a.kv_offset * dh, hkv);
    const VB wo_r = exact(cols_of(wo, a.q_offset * dh, hq));  // [hidden, hq]
    const VB do_r = abt(dy, transpose(wo_r), ar);             // [tokens, hq]
    if (r == 0 && L.has_bias) dbo = param_grad(c, dy, ones(tokens), ar, nullptr);
    if (a.q_count == 0) {
      y_parts.push_back(exact(Tensor<R>(Shape{tokens, hid})));
      dx_parts.push_back(exact(Tensor<R>(Shape{tokens, hid})));
      dwq.push_back(exact(Tensor<R>(Shape{0, hid})));
      dwo.push_back(exact(Tensor<R>(Shape{hid, 0})));
      if (L.has_bias) dbq.push_back(exact(Tensor<R>(Shape{0, 1})));
      continue;
    }
    // The attention core on this rank's heads, with the projections' errors as input errors.
    AttentionConfig cfg = L.attention;
    cfg.q_heads = a.q_count;
    cfg.kv_heads = a.kv_count;
    cfg.scale = ref::score_scale(L.attention);
    const Shape qs{B, len, a.q_count, dh}, ks{B, len, a.kv_count, dh};
    auto as4 = [](const Tensor<R>& t, const Shape& s) { return Tensor<R>(s, t.values()); };
    const Tensor<R> q4 = as4(q.v, qs), k4 = as4(k.v, ks), v4 = as4(v.v, ks), do4 = as4(do_r.v, qs);
    const auto fwd = ref::attention_forward<R>(cfg, q4, k4, v4);
    const auto g = ref::attention_backward<R>(cfg, q4, k4, v4, fwd, do4);
    ref::AttentionBoundOptions<R> opt;
    opt.parts = parts;
    opt.q_error = as4(q.e, qs);
    opt.k_error = as4(k.e, ks);
    opt.v_error = as4(v.e, ks);
    opt.dout_error = as4(do_r.e, qs);
    const auto bnd = bounds_under(c.contract, c.key_block, c.exp2_lse, cfg, q4, k4, v4, do4,
                                  arithmetic_of_case<T>(c), opt);
    const auto rb = ref::attention_reference_error<R>(cfg, q4, k4, v4, do4);
    auto vb2 = [&](const Tensor<R>& val, const Tensor<R>& b1, const Tensor<R>& b2, std::size_t w) {
      return VB{Tensor<R>(Shape{tokens, w}, val.values()),
                Tensor<R>(Shape{tokens, w}, add(b1, b2).values())};
    };
    const VB o = vb2(fwd.out, bnd.out, rb.out, hq);
    const VB dq = vb2(g.dq, bnd.dq, rb.dq, hq), dk = vb2(g.dk, bnd.dk, rb.dk, hkv),
             dv = vb2(g.dv, bnd.dv, rb.dv, hkv);

    y_parts.push_back(abt(o, wo_r, ar));
    // dx_r = [dq | dk | dv]·[Wq_r; Wk_r; Wv_r]: one dot of hq + 2·hkv terms.
    VB dqkv{Tensor<R>(Shape{tokens, hq + 2 * hkv}), Tensor<R>(Shape{tokens, hq + 2 * hkv})};
    for (std::size_t t = 0; t < tokens; ++t) {
      std::size_t col = 0;
      for (const VB* p : {&dq, &dk, &dv}) {
        const std::size_t w = p->v.dim(1);
        for (std::size_t j = 0; j < w; ++j, ++col) {
          dqkv.v[t * (hq + 2 * hkv) + col] = p->v[t * w + j];
          dqkv.e[t * (hq + 2 * hkv) + col] = p->e[t * w + j];
        }
      }
    }
    Tensor<R> wqkv(Shape{hq + 2 * hkv, hid});
    {
      std::size_t row = 0;
      for (const auto& part :
           {row_range(wq, a.q_offset * dh, hq), row_range(wk, a.kv_offset * dh, hkv),
            row_range(wv, a.kv_offset * dh, hkv)}) {
        std::copy(part.values().begin(), part.values().end(),
                  wqkv.values().begin() + static_cast<std::ptrdiff_t>(row * hid));
        row += part.dim(0);
      }
    }
    dx_parts.push_back(abt(dqkv, transpose(exact(wqkv)), ar));

    dwq.push_back(param_grad(c, dq, x, ar, nullptr));
    dwo.push_back(param_grad(c, dy, o, ar, nullptr));
    if (L.has_bias) dbq.push_back(param_grad(c, dq, ones(tokens), ar, nullptr));
    // The kv projection: partials of every rank that shares the kv head, summed together.
    const int shard = a.kv_replicas > 1 ? static_cast<int>(a.kv_offset) : r;
    if (kv_owner.empty() || shard != kv_owner.back()) {
      kv_owner.push_back(shard);
      dwk.emplace_back();
      dwv.emplace_back();
      dbk.emplace_back();
      dbv.emplace_back();
    }
    param_grad(c, dk, x, ar, &dwk.back());
    param_grad(c, dv, x, ar, &dwv.back());
    if (L.has_bias) {
      param_grad(c, dk, ones(tokens), ar, &dbk.back());
      param_grad(c, dv, ones(tokens), ar, &dbv.back());
    }
  }

  // Stack per-shard results along `dim` (0: rows, 1: columns) into dense expected tensors.
  auto stack = [&](const std::vector<VB>& shards, std::size_t dim, bool flat) {
    std::size_t n0 = 0, n1 = 0;
    for (const auto& s : shards) {
      if (dim == 0) {
        n0 += s.v.dim(0);
        n1 = s.v.dim(1);
      } else {
        n0 = s.v.dim(0);
        n1 += s.v.dim(1);
      }
    }
    VB all{Tensor<R>(Shape{n0, n1}), Tensor<R>(Shape{n0, n1})};
    std::size_t off = 0;
    for (const auto& s : shards) {
      for (std::size_t i = 0; i < s.v.dim(0); ++i) {
        for (std::size_t j = 0; j < s.v.dim(1); ++j) {
          const std::size_t at = dim == 0 ? (off + i) * n1 + j : i * n1 + off + j;
          all.v[at] = s.v[i * s.v.dim(1) + j];
          all.e[at] = s.e[i * s.v.dim(1) + j];
        }
      }
      off += s.v.dim(dim);
    }
    const Shape shape = flat ? Shape{n0 * n1} : Shape{n0, n1};
    return expected(all, shape, 0, nullptr);
  };
  auto summed = [&](const std::vector<std::vector<VB>>& groups) {
    std::vector<VB> out;
    out.reserve(groups.size());
    for (const auto& g : groups) out.push_back(sum_t(g, ar));
    return out;
  };

  AttentionExpected e;
  const auto order = cp_order(c);
  VB y = sum_t(y_parts, ar);
  if (L.has_bias) add_bias(y, bo, ar);
  e.y = expected(y, Shape{B, len, hid}, 1, &order);
  e.dx = expected(sum_t(dx_parts, ar), Shape{B, len, hid}, 1, &order);
  e.dwq = stack(dwq, 0, false);
  e.dwo = stack(dwo, 1, false);
  e.dwk = stack(summed(dwk), 0, false);
  e.dwv = stack(summed(dwv), 0, false);
  if (L.has_bias) {
    e.dbq = stack(dbq, 0, true);
    e.dbk = stack(summed(dbk), 0, true);
    e.dbv = stack(summed(dbv), 0, true);
    e.dbo = expected(dbo, Shape{hid}, 0, nullptr);
  }
  return e;
}

}  // namespace

namespace {

// The positions of cp rank 0, then 1, ..., by `positions` (the keys' or the queries').
std::vector<std::size_t> concat_positions(
    const AttentionCase& c, std::vector<std::size_t> (*positions)(const AttentionCase&, int)) {
  std::vector<std::size_t> order;
  for (int j = 0; j < c.cp; ++j) {
    const auto p = positions(c, j);
    order.insert(order.end(), p.begin(), p.end());
  }
  return order;
}

}  // namespace

std::vector<std::size_t> cp_order(const AttentionCase& c) {
  return concat_positions(c, &positions_of);
}

std::vector<std::size_t> cp_query_order(const AttentionCase& c) {
  return concat_positions(c, &query_positions_of);
}

template <class T>
AttentionExpected expected(const AttentionCase& c, const AttentionData<T>& d) {
  return c.op == AttentionOp::context_parallel ? core_expected(c, d) : layer_expected(c, d);
}

SHARDCHECK_INSTANTIATE_EXPECTED(AttentionCase, AttentionData, AttentionExpected)

}  // namespace shardcheck::check
