// Context-parallel attention (ops/attention/context_parallel_attention.hpp): the layouts'
// positions, the ring and all-gather algorithms, forward and backward, on one rank each.
#include "ops/attention/context_parallel_attention.hpp"

#include "ops/softmax_merge/softmax_merge.hpp"
#include "ops/workspace.hpp"
#include "runtime/errors.hpp"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace shardcheck {

namespace {

std::string on_rank(const char* op, const Communicator& cp) {
  return std::string(op) + " on cp rank " + std::to_string(cp.rank()) + " of " +
         std::to_string(cp.size()) + ": ";
}

std::size_t row_elems(const Shape& s) {
  std::size_t n = 1;
  for (std::size_t i = 2; i < s.size(); ++i) n *= s[i];
  return n;
}

// The local piece's shape with `len` positions: [batch, len, heads, d].
Shape with_len(const Shape& s, std::size_t len) {
  Shape out = s;
  out[1] = len;
  return out;
}

// Causal: a key chunk wholly after every query's diagonal is invisible (the step is skipped;
// its K/V still travel): the last query does not see the first key. Padding and explicit masks
// are left to the kernel.
bool skip_block(const AttentionConfig& cfg, const std::vector<std::size_t>& q_pos,
                const std::vector<std::size_t>& k_pos) {
  if (q_pos.empty() || k_pos.empty()) return true;
  if (cfg.mask.kind != MaskKind::causal) return false;
  const std::size_t q_max = *std::max_element(q_pos.begin(), q_pos.end());
  const std::size_t k_min = *std::min_element(k_pos.begin(), k_pos.end());
  AttentionMask causal_only = cfg.mask;
  causal_only.key_lengths.clear();
  return !visible(causal_only, 0, q_max, k_min);
}

template <class T>
void require_local(const std::string& where, const char* name, const Tensor<T>& t, std::size_t len,
                   const char* layout) {
  if (t.ndim() != 4 || t.dim(1) != len) {
    throw UsageError(where + name + " is " + format_shape(t.shape()) + " but this rank holds " +
                     std::to_string(len) + " positions of the sequence: pass " + layout +
                     " with dim 1 = " + std::to_string(len) +
                     " (take_positions(full, cp_positions(cfg, cp, rank)))");
  }
}

struct Setup {
  std::vector<std::vector<std::size_t>> positions;  // of the keys, by cp rank
  std::vector<std::size_t> queries;                 // this rank's query positions
  const std::vector<std::size_t>& mine(int r) const {
    return positions[static_cast<std::size_t>(r)];
  }
};

template <class T>
Setup setup(const char* op, Communicator& cp, const AttentionConfig& cfg,
            const ContextParallelConfig& cc, const Tensor<T>& q, const Tensor<T>& k,
            const Tensor<T>& v) {
  const std::string where = on_rank(op, cp);
  const std::size_t lq = cc.q_seq_len == 0 ? cc.seq_len : cc.q_seq_len;
  if (cfg.mask.q_len != lq || cfg.mask.k_len != cc.seq_len) {
    const std::string want =
        cc.q_seq_len == 0
            ? "self-attention over seq_len = " + std::to_string(cc.seq_len) + " positions"
            : "q_seq_len = " + std::to_string(lq) +
                  " queries against seq_len = " + std::to_string(cc.seq_len) + " keys";
    throw UsageError(where + "the context-parallel config is " + want +
                     " but the mask has q_len = " + std::to_string(cfg.mask.q_len) + ", k_len = " +
                     std::to_string(cfg.mask.k_len) + ": set q_len = " + std::to_string(lq) +
                     " and k_len = " + std::to_string(cc.seq_len));
  }
  Setup s;
  try {
    for (int j = 0; j < cp.size(); ++j) s.positions.push_back(cp_positions(cc, cp.size(), j));
    s.queries = cp_query_positions(cc, cp.size(), cp.rank());
  } catch (const UsageError& e) {
    throw UsageError(where + e.what());
  }
  const std::size_t len = s.mine(cp.rank()).size();
  require_local(where, "q", q, s.queries.size(), "q [batch, Lq_r, h, d]");
  require_local(where, "k", k, len, "k [batch, L_r, g, d]");
  require_local(where, "v", v, len, "v [batch, L_r, g, d]");
  return s;
}

// k and v packed into one buffer (the ring's message): k's elements then v's.
template <class E>
std::vector<E> pack(const Tensor<E>& a, const Tensor<E>& b) {
  std::vector<E> out(a.size() + b.size());
  std::copy(a.values().begin(), a.values().end(), out.begin());
  std::copy(b.values().begin(), b.values().end(),
            out.begin() + static_cast<std::ptrdiff_t>(a.size()));
  return out;
}

template <class E>
Tensor<E> unpack(const std::vector<E>& buf, std::size_t first, const Shape& shape) {
  const auto begin = buf.begin() + static_cast<std::ptrdiff_t>(first);
  return Tensor<E>(shape, std::vector<E>(begin, begin + static_cast<std::ptrdiff_t>(numel(shape))));
}

template <class A>
void add_into(std::vector<A>& acc, std::span<const A> x) {
  for (std::size_t i = 0; i < acc.size(); ++i) acc[i] += x[i];
}

// The all-gather layout: per cp rank j, its [batch, L_j, heads, d] block, rank after rank.
// to_sequence reorders it to [batch, Σ L_j, heads, d] (rank j's rows after rank j−1's), and
// to_ranks does the converse.
template <class E>
Tensor<E> to_sequence(const std::vector<E>& gathered, const std::vector<std::size_t>& lens,
                      std::size_t batch, std::size_t row) {
  std::size_t total = 0;
  for (auto l : lens) total += l;
  Tensor<E> out(Shape{batch, total, row});
  std::size_t src = 0, seq_off = 0;
  for (auto len : lens) {
    for (std::size_t b = 0; b < batch; ++b) {
      std::copy_n(gathered.begin() + static_cast<std::ptrdiff_t>(src), len * row,
                  out.values().begin() + static_cast<std::ptrdiff_t>((b * total + seq_off) * row));
      src += len * row;
    }
    seq_off += len;
  }
  return out;
}

template <class E>
std::vector<E> to_ranks(const Tensor<E>& seq, const std::vector<std::size_t>& lens,
                        std::size_t batch, std::size_t row) {
  const std::size_t total = seq.dim(1);
  std::vector<E> out(seq.size());
  std::size_t dst = 0, seq_off = 0;
  for (auto len : lens) {
    for (std::size_t b = 0; b < batch; ++b) {
      std::copy_n(seq.values().begin() + static_cast<std::ptrdiff_t>((b * total + seq_off) * row),
                  len * row, out.begin() + static_cast<std::ptrdiff_t>(dst));
      dst += len * row;
    }
    seq_off += len;
  }
  return out;
}

// x of every rank in sequence order: the all_gather's receive buffer and the reordered copy
// returned are both the workspace's.
template <class T>
Held<Tensor<T>> gather_sequence(Communicator& cp, const Workspace& ws, const Tensor<T>& x,
                                const std::vector<std::size_t>& lens) {
  const std::size_t batch = x.dim(0), row = row_elems(x.shape());
  std::vector<std::size_t> counts;
  counts.reserve(lens.size());
  for (auto l : lens) counts.push_back(batch * l * row);
  std::size_t total = 0;
  for (auto c : counts) total += c;
  auto gathered = ws.buffer<T>(total);
  cp.all_gather(std::span<const T>(x.values()), std::span<T>(*gathered), counts);
  auto seq = to_sequence(*gathered, lens, batch, row);
  std::size_t len = 0;
  for (auto l : lens) len += l;
  return ws.hold(Tensor<T>(Shape{batch, len, x.dim(2), x.dim(3)}, std::move(seq.values())));
}

std::vector<std::size_t> lengths(const Setup& s) {
  std::vector<std::size_t> lens;
  for (const auto& p : s.positions) lens.push_back(p.size());
  return lens;
}

std::vector<std::size_t> concat(const Setup& s) {
  std::vector<std::size_t> all;
  for (const auto& p : s.positions) all.insert(all.end(), p.begin(), p.end());
  return all;
}

}  // namespace

namespace {

// The positions rank `rank` of `cp_size` holds of a sequence of `len` cut by `policy` into the
// layout's pieces; `what` names the sequence and its split for the error.
std::vector<std::size_t> layout_positions(CpLayout layout, const SplitPolicy& policy,
                                          std::size_t len, int cp_size, int rank,
                                          const std::string& what) {
  if (cp_size < 1 || rank < 0 || rank >= cp_size) {
    throw UsageError("cp_positions: rank " + std::to_string(rank) + " is not in a cp group of " +
                     std::to_string(cp_size) + " ranks");
  }
  const int parts = layout == CpLayout::zigzag ? 2 * cp_size : cp_size;
  std::vector<Piece> pieces;
  try {
    pieces = split(policy, len, parts);
  } catch (const UsageError& e) {
    throw UsageError("cp_positions (" + to_string(layout) +
                     " layout, cp = " + std::to_string(cp_size) + ", " + std::to_string(parts) +
                     " pieces of " + what + " = " + std::to_string(len) + "): " + e.what());
  }
  std::vector<std::size_t> pos;
  auto append = [&](const Piece& p) {
    for (std::size_t i = 0; i < p.size; ++i) pos.push_back(p.offset + i);
  };
  const auto r = static_cast<std::size_t>(rank);
  append(pieces[r]);
  if (layout == CpLayout::zigzag) append(pieces[static_cast<std::size_t>(parts) - 1 - r]);
  return pos;
}

}  // namespace

std::vector<std::size_t> cp_positions(const ContextParallelConfig& cfg, int cp_size, int rank) {
  return layout_positions(cfg.layout, cfg.split, cfg.seq_len, cp_size, rank, "seq_len");
}

std::vector<std::size_t> cp_query_positions(const ContextParallelConfig& cfg, int cp_size,
                                            int rank) {
  if (cfg.q_seq_len == 0) return cp_positions(cfg, cp_size, rank);
  return layout_positions(cfg.layout, cfg.q_split, cfg.q_seq_len, cp_size, rank, "q_seq_len");
}

namespace {

// Throws unless every position is below `len`, the sequence length of `name` (of shape `shape`,
// the sequence along dimension `axis`); `op` names the caller.
void require_positions_in(const char* op, const std::vector<std::size_t>& positions,
                          std::size_t len, const char* name, const Shape& shape, std::size_t axis) {
  for (const std::size_t p : positions) {
    if (p >= len) {
      throw UsageError(std::string(op) + ": position " + std::to_string(p) + " is outside " + name +
                       " " + format_shape(shape) + "; pass positions below " + name + ".dim(" +
                       std::to_string(axis) + ") = " + std::to_string(len) +
                       " (cp_positions of a config whose seq_len is " + name +
                       "'s sequence length)");
    }
  }
}

}  // namespace

template <class T>
Tensor<T> take_positions(const Tensor<T>& x, const std::vector<std::size_t>& positions) {
  if (x.ndim() < 2) {
    throw UsageError("take_positions: x is " + format_shape(x.shape()) +
                     "; pass [batch, L, ...] (dim 1 the sequence)");
  }
  const std::size_t batch = x.dim(0), len = x.dim(1), row = row_elems(x.shape());
  require_positions_in("take_positions", positions, len, "x", x.shape(), 1);
  Tensor<T> out(with_len(x.shape(), positions.size()));
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t t = 0; t < positions.size(); ++t) {
      std::copy_n(
          x.values().begin() + static_cast<std::ptrdiff_t>((b * len + positions[t]) * row), row,
          out.values().begin() + static_cast<std::ptrdiff_t>((b * positions.size() + t) * row));
    }
  }
  return out;
}

template <class T>
Tensor<T> take_lse_positions(const Tensor<T>& lse, const std::vector<std::size_t>& positions) {
  if (lse.ndim() != 3) {
    throw UsageError("take_lse_positions: lse is " + format_shape(lse.shape()) +
                     "; pass [batch, h, L]");
  }
  const std::size_t rows = lse.dim(0) * lse.dim(1), len = lse.dim(2);
  require_positions_in("take_lse_positions", positions, len, "lse", lse.shape(), 2);
  Tensor<T> out(Shape{lse.dim(0), lse.dim(1), positions.size()});
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t t = 0; t < positions.size(); ++t)
      out[i * positions.size() + t] = lse[i * len + positions[t]];
  }
  return out;
}

template <class T>
AttentionOutput<T> context_parallel_attention(Communicator& cp, const AttentionConfig& cfg,
                                              const ContextParallelConfig& cc, const Tensor<T>& q,
                                              const Tensor<T>& k, const Tensor<T>& v) {
  using A = acc_t<T>;
  const Setup s = setup("context_parallel_attention", cp, cfg, cc, q, k, v);
  const int p = cp.size(), r = cp.rank();
  const auto& queries = s.queries;  // this rank's query positions
  const std::size_t batch = q.dim(0), h = q.dim(2), d = q.dim(3);
  const auto ws = Workspace::of_this_rank();

  if (cc.algorithm == CpAlgorithm::all_gather) {
    const auto lens = lengths(s);
    const auto k_all = gather_sequence(cp, ws, k, lens);
    const auto v_all = gather_sequence(cp, ws, v, lens);
    auto part = attention_block_forward(cfg, q, *k_all, *v_all, queries, concat(s));
    return {rounded<T>(part.out), std::move(part.lse)};
  }

  Tensor<A> out(Shape{batch, queries.size(), h, d});
  Tensor<A> lse(Shape{batch, h, queries.size()});
  std::fill(lse.values().begin(), lse.values().end(), -std::numeric_limits<A>::infinity());
  auto kv = ws.hold(pack(k, v));  // the chunk held, then each received one
  for (int step = 0; step < p; ++step) {
    const int src = (r - step + p) % p;
    const auto& pos = s.mine(src);
    if (!skip_block(cfg, queries, pos)) {
      const Tensor<T> kc = unpack(*kv, 0, with_len(k.shape(), pos.size()));
      const Tensor<T> vc = unpack(*kv, kc.size(), with_len(v.shape(), pos.size()));
      const auto part = attention_block_forward(cfg, q, kc, vc, queries, pos);
      merge_attention_into(out, lse, part.out, part.lse);
    }
    if (step + 1 < p) {
      const auto& next_pos = s.mine((r - step - 1 + p) % p);
      auto next = ws.buffer<T>(2 * batch * next_pos.size() * row_elems(k.shape()));
      cp.ring_shift(std::span<const T>(*kv), std::span<T>(*next));
      kv = std::move(next);
    }
  }
  return {rounded<T>(out), std::move(lse)};
}

template <class T>
AttentionGrads<T> context_parallel_attention_backward(Communicator& cp, const AttentionConfig& cfg,
                                                      const ContextParallelConfig& cc,
                                                      const Tensor<T>& q, const Tensor<T>& k,
                                                      const Tensor<T>& v,
                                                      const AttentionOutput<T>& fwd,
                                                      const Tensor<T>& dout) {
  using A = acc_t<T>;
  const Setup s = setup("context_parallel_attention_backward", cp, cfg, cc, q, k, v);
  const std::string where = on_rank("context_parallel_attention_backward", cp);
  const int p = cp.size(), r = cp.rank();
  const auto& queries = s.queries;  // this rank's query positions
  if (dout.shape() != q.shape() || fwd.out.shape() != q.shape()) {
    throw UsageError(where + "dout is " + format_shape(dout.shape()) + " and out is " +
                     format_shape(fwd.out.shape()) + "; both must have q's shape " +
                     format_shape(q.shape()) + " (the forward's out for this rank's positions)");
  }
  const std::size_t batch = q.dim(0), row_kv = row_elems(k.shape());
  const auto ws = Workspace::of_this_rank();

  if (cc.algorithm == CpAlgorithm::all_gather) {
    const auto lens = lengths(s);
    const auto k_all = gather_sequence(cp, ws, k, lens);
    const auto v_all = gather_sequence(cp, ws, v, lens);
    auto g = attention_block_backward(cfg, q, *k_all, *v_all, fwd.out, fwd.lse, dout, queries,
                                      concat(s));
    std::vector<std::size_t> counts;
    counts.reserve(lens.size());
    for (auto l : lens) counts.push_back(batch * l * row_kv);
    // The full dK/dV partials and their per-rank reordering, reduce_scatter's inputs.
    const auto dk_flat =
        ws.hold(Tensor<A>(Shape{batch, g.dk.dim(1), row_kv}, std::move(g.dk.values())));
    const auto dv_flat =
        ws.hold(Tensor<A>(Shape{batch, g.dv.dim(1), row_kv}, std::move(g.dv.values())));
    const auto dk_ranks = ws.hold(to_ranks(*dk_flat, lens, batch, row_kv));
    const auto dv_ranks = ws.hold(to_ranks(*dv_flat, lens, batch, row_kv));
    Tensor<A> dk(k.shape()), dv(v.shape());
    cp.reduce_scatter(std::span<const A>(*dk_ranks), dk.span(), counts, ReduceOp::sum);
    cp.reduce_scatter(std::span<const A>(*dv_ranks), dv.span(), counts, ReduceOp::sum);
    return {rounded<T>(g.dq), rounded<T>(dk), rounded<T>(dv)};
  }

  Tensor<A> dq(q.shape());
  auto kv = ws.hold(pack(k, v));
  Held<std::vector<A>> dkv;  // dk | dv of the chunk this rank holds at this step, in A
  for (int step = 0; step < p; ++step) {
    const int src = (r - step + p) % p;
    const auto& pos = s.mine(src);
    const Shape chunk = with_len(k.shape(), pos.size());
    std::vector<A> block(2 * numel(chunk), A(0));
    if (!skip_block(cfg, queries, pos)) {
      const Tensor<T> kc = unpack(*kv, 0, chunk);
      const Tensor<T> vc = unpack(*kv, kc.size(), chunk);
      const auto g = attention_block_backward(cfg, q, kc, vc, fwd.out, fwd.lse, dout, queries, pos);
      add_into(dq.values(), g.dq.span());
      block = pack(g.dk, g.dv);
    }
    if (step == 0) {
      dkv = ws.hold(std::move(block));
    } else {
      add_into(*dkv, std::span<const A>(block));
    }
    if (p == 1) break;
    // K/V move on (cp − 1 times); dK/dV follow them (cp times: the last returns to the owner).
    const auto& next_pos = s.mine((r - step - 1 + p) % p);
    const std::size_t next_elems = 2 * batch * next_pos.size() * row_kv;
    if (step + 1 < p) {
      auto next = ws.buffer<T>(next_elems);
      cp.ring_shift(std::span<const T>(*kv), std::span<T>(*next));
      kv = std::move(next);
    }
    auto next_dkv = ws.buffer<A>(next_elems);
    cp.ring_shift(std::span<const A>(*dkv), std::span<A>(*next_dkv));
    dkv = std::move(next_dkv);
  }
  // dkv now holds this rank's own chunk's dk | dv.
  return {rounded<T>(dq), rounded<T>(unpack(*dkv, 0, k.shape())),
          rounded<T>(unpack(*dkv, k.size(), v.shape()))};
}

#define SHARDCHECK_CP_ATTENTION(T)                                                           \
  template Tensor<T> take_positions(const Tensor<T>&, const std::vector<std::size_t>&);      \
  template AttentionOutput<T> context_parallel_attention(                                    \
      Communicator&, const AttentionConfig&, const ContextParallelConfig&, const Tensor<T>&, \
      const Tensor<T>&, const Tensor<T>&);                                                   \
  template AttentionGrads<T> context_parallel_attention_backward(                            \
      Communicator&, const AttentionConfig&, const ContextParallelConfig&, const Tensor<T>&, \
      const Tensor<T>&, const Tensor<T>&, const AttentionOutput<T>&, const Tensor<T>&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_CP_ATTENTION)
#undef SHARDCHECK_CP_ATTENTION
template Tensor<double> take_lse_positions(const Tensor<double>&, const std::vector<std::size_t>&);
template Tensor<float> take_lse_positions(const Tensor<float>&, const std::vector<std::size_t>&);

}  // namespace shardcheck
