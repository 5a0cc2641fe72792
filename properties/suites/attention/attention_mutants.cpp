// The attention mutant catalog (attention_mutants.hpp). One faulty implementation, FaultyAttention,
// takes the bug to plant; everything else is the library's arithmetic (block kernel, merge,
// projections), so the planted bug is the only difference.
#include "suites/attention/attention_mutants.hpp"

#include "ops/attention/attention_spec.hpp"
#include "ops/softmax_merge/softmax_merge.hpp"
#include "ops/tp_transitions.hpp"
#include "suites/attention/attention_impl.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace shardcheck::check {
namespace {

enum class Fault {
  average_outputs,      // out = mean of the independently normalized step outputs
  local_lse_merge,      // merge weights exp(lse_j − lse_own): the local lse, not the global
  merge_by_block_max,   // the steps' outputs merged by their row maxima in place of their lse
  merge_by_larger_lse,  // each step merged by exp(lse − max(lse_acc, lse_j)), never normalized
  merge_by_larger_lse_autograd,  // the same forward; the backward its exact derivative (autograd's)
  top_left_offdiag,    // off-diagonal steps evaluate the causal mask on chunk-local positions
  zigzag_off_by_one,   // zigzag: rank r takes chunk 2·cp − r instead of 2·cp − 1 − r
  nan_empty_rows,      // a fully masked row gives 0/0 = NaN instead of 0
  local_kv_backward,   // the ring backward uses the local K/V at every step
  step_lse_backward,   // the ring backward uses each step's own out/lse, not the global ones
  dkv_not_returned,    // dK/dV never make the last hop back to their owner
  gather_no_reduce,    // all-gather backward keeps its own dk/dv slice without reduce_scatter
                       // (the only fault of the all-gather path; the others are the ring's)
  kv_head_r_mod_g,     // g < tp: rank r reads kv head r mod g instead of r / (tp/g)
  kv_head_i_mod_g,     // 1 < g < h: query head i reads kv head i mod g instead of i / (h/g)
  kv_grad_not_summed,  // g < tp: the replicated kv projection's gradient is not summed
  bias_every_rank,     // the output projection's bias added on every tp rank
  // Wrong only when Lq != Lk (cross-attention, decode, chunked prefill):
  causal_top_left,      // the causal mask always top-left aligned, whatever the config declares
  ring_skip_self_attn,  // the ring skips a key chunk when it starts after the last query
                        // position (self-attention's test), though bottom-right sees it
  // Wrong only under sequence parallelism (the layer's x, y, dy, dx as token rows over tp):
  sp_output_all_reduced,  // y all_reduced, every tp rank keeps all the rows
  sp_dbo_own_rows,        // dbo summed over the rank's own dy rows, never over tp
};

// The query positions rank r holds: the keys' under self-attention (so the zigzag fault moves
// both, as it did before Lq != Lk existed), the query layout's otherwise.
std::vector<std::size_t> query_positions(const ContextParallelConfig& cc, int p, int r,
                                         const std::vector<std::vector<std::size_t>>& keys) {
  return cc.q_seq_len == 0 ? keys[static_cast<std::size_t>(r)] : cp_query_positions(cc, p, r);
}

// ring_skip_self_attn: the step is skipped when its first key comes after the last query, the
// right test only when Lq = Lk (bottom-right then coincides with top-left).
bool self_attention_skip(const AttentionConfig& cfg, const std::vector<std::size_t>& q,
                         const std::vector<std::size_t>& k) {
  if (cfg.mask.kind != MaskKind::causal || q.empty() || k.empty()) return false;
  return *std::min_element(k.begin(), k.end()) > *std::max_element(q.begin(), q.end());
}

template <class T>
using A = acc_t<T>;

std::vector<std::size_t> iota_n(std::size_t n) {
  std::vector<std::size_t> v(n);
  std::iota(v.begin(), v.end(), std::size_t{0});
  return v;
}

// The zigzag bug: the rank evaluates the mask for its second chunk at the offset of chunk
// 2·cp − r (mod 2·cp) instead of 2·cp − 1 − r, with the right number of positions (clamped to
// the sequence), so shapes agree and only the mask is wrong.
std::vector<std::size_t> positions_of(Fault f, const ContextParallelConfig& cc, int p, int r) {
  if (f != Fault::zigzag_off_by_one || cc.layout != CpLayout::zigzag) {
    return cp_positions(cc, p, r);
  }
  const auto pieces = split(cc.split, cc.seq_len, 2 * p);
  const auto first = pieces[static_cast<std::size_t>(r)];
  const auto second = pieces[static_cast<std::size_t>(2 * p - 1 - r)];
  const auto wrong = pieces[static_cast<std::size_t>((2 * p - r) % (2 * p))];
  std::vector<std::size_t> pos;
  for (std::size_t i = 0; i < first.size; ++i) pos.push_back(first.offset + i);
  for (std::size_t i = 0; i < second.size; ++i) {
    pos.push_back(std::min(wrong.offset + i, cc.seq_len - 1));
  }
  return pos;
}

template <class E>
Tensor<E> slice_elems(const std::vector<E>& buf, std::size_t first, const Shape& s) {
  Tensor<E> t(s);
  const std::size_t n = std::min(t.size(), buf.size() > first ? buf.size() - first : 0);
  std::copy_n(buf.begin() + static_cast<std::ptrdiff_t>(first), n, t.values().begin());
  return t;
}

// merge_by_block_max: each row's largest visible score of one step, [batch, h, Lq] (−inf where
// none is visible), in the block kernel's arithmetic (ops/attention/attention.hpp: the dot
// product in A in index order, times A(scale)), so it is the kernel's own m.
template <class T>
Tensor<A<T>> block_row_max(const AttentionConfig& cfg, const Tensor<T>& q, const Tensor<T>& k,
                           const std::vector<std::size_t>& qp, const std::vector<std::size_t>& kp) {
  const std::size_t batch = q.dim(0), lq = q.dim(1), h = q.dim(2), d = q.dim(3);
  const std::size_t lk = k.dim(1), g = k.dim(2), group = h / g;
  const auto scale = static_cast<A<T>>(effective_scale(cfg));
  Tensor<A<T>> m(Shape{batch, h, lq});
  std::fill(m.values().begin(), m.values().end(), -std::numeric_limits<A<T>>::infinity());
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t i = 0; i < h; ++i) {
      for (std::size_t t = 0; t < lq; ++t) {
        A<T>& row = m[(b * h + i) * lq + t];
        for (std::size_t s = 0; s < lk; ++s) {
          if (!visible(cfg.mask, b, qp[t], kp[s])) continue;
          A<T> dot = 0;
          for (std::size_t e = 0; e < d; ++e) {
            dot = dot + static_cast<A<T>>(q[((b * lq + t) * h + i) * d + e]) *
                            static_cast<A<T>>(k[((b * lk + s) * g + i / group) * d + e]);
          }
          row = std::max(row, dot * scale);
        }
      }
    }
  }
  return m;
}

// kv_head_i_mod_g: x with its heads (axis `axis`) reordered, head j of the result being head
// from[j] of x.
template <class E>
Tensor<E> reorder_heads(const Tensor<E>& x, std::size_t axis,
                        const std::vector<std::size_t>& from) {
  std::size_t outer = 1, inner = 1;
  for (std::size_t a = 0; a < axis; ++a) outer *= x.dim(a);
  for (std::size_t a = axis + 1; a < x.ndim(); ++a) inner *= x.dim(a);
  const std::size_t n = from.size();
  Tensor<E> y(x.shape());
  for (std::size_t o = 0; o < outer; ++o) {
    for (std::size_t j = 0; j < n; ++j) {
      std::copy_n(x.values().begin() + static_cast<std::ptrdiff_t>((o * n + from[j]) * inner),
                  inner, y.values().begin() + static_cast<std::ptrdiff_t>((o * n + j) * inner));
    }
  }
  return y;
}

template <class E>
std::vector<E> concat2(const Tensor<E>& a, const Tensor<E>& b) {
  std::vector<E> out(a.values());
  out.insert(out.end(), b.values().begin(), b.values().end());
  return out;
}

Shape with_len(Shape s, std::size_t len) {
  s[1] = len;
  return s;
}

// merge_by_larger_lse_autograd: what one ring step merged, for the backward: the block's own
// out and lse (in A), and the running out and lse before the merge.
template <class T>
struct MergeStep {
  Tensor<A<T>> out, lse, acc_out, acc_lse;
};

// The gradients a block receives: of its out [batch, Lq, h, d] and of its lse [batch, h, Lq].
template <class T>
struct BlockGrad {
  Tensor<A<T>> dout, dlse;
};

// Reverse-mode through merge_by_larger_lse's forward, as autograd differentiates a hand-written
// merge (examples/pytorch/ring_attention.py, merge(..., "merge_by_max")): per step
// o ← w_a·o + w_b·o_j, w = exp(l − M), M = max(l_acc, l_j), l ← log(e^l_acc + e^l_j). With g_o,
// g_l the gradients of the state after the step: g_o_j = w_b·g_o, the state before gets w_a·g_o;
// g_wa = <g_o, o>, g_wb = <g_o, o_j>; the larger lse's weight is 1 (no gradient), the other's
// w = exp(l − M) gives ±w to (its own l, M's); logaddexp gives e^(l − l_new) to each. Only out
// is differentiated (the loss reads out; lse's own gradient is 0).
template <class T>
std::vector<BlockGrad<T>> larger_lse_merge_grads(const std::vector<MergeStep<T>>& steps,
                                                 const Tensor<T>& dout) {
  using V = A<T>;
  constexpr V empty = -std::numeric_limits<V>::infinity();
  std::vector<BlockGrad<T>> out(steps.size());
  if (steps.empty()) return out;
  const std::size_t batch = dout.dim(0), lq = dout.dim(1), h = dout.dim(2), d = dout.dim(3);
  Tensor<V> go(dout.shape());
  for (std::size_t x = 0; x < dout.size(); ++x) go[x] = static_cast<V>(dout[x]);
  Tensor<V> gl(Shape{batch, h, lq});
  for (std::size_t st = steps.size(); st-- > 0;) {
    const auto& S = steps[st];
    BlockGrad<T> g{Tensor<V>(dout.shape()), Tensor<V>(gl.shape())};
    for (std::size_t b = 0; b < batch; ++b) {
      for (std::size_t i = 0; i < h; ++i) {
        for (std::size_t t = 0; t < lq; ++t) {
          const std::size_t li = (b * h + i) * lq + t;
          const V la = S.acc_lse[li], lb = S.lse[li];
          if (lb == empty) continue;  // the block saw nothing: no gradient, the state passes on
          const bool a_empty = la == empty, a_max = !a_empty && la >= lb;
          const V m = a_max ? la : lb;
          const V wa = a_empty ? V(0) : std::exp(la - m), wb = std::exp(lb - m);
          const V lnew = a_empty ? lb : m + std::log(std::exp(la - m) + std::exp(lb - m));
          V gwa = 0, gwb = 0;
          for (std::size_t e = 0; e < d; ++e) {
            const std::size_t oi = ((b * lq + t) * h + i) * d + e;
            gwa += go[oi] * S.acc_out[oi];
            gwb += go[oi] * S.out[oi];
            g.dout[oi] = wb * go[oi];
            go[oi] = wa * go[oi];  // the gradient of the state before the step
          }
          // The smaller lse's weight w = exp(l − M): dw/dl = w, dw/dM = −w (M the larger lse).
          V gla = a_empty ? V(0) : gl[li] * std::exp(la - lnew);
          V glb = gl[li] * std::exp(lb - lnew);
          if (!a_empty) {
            if (a_max) {
              glb += gwb * wb;
              gla -= gwb * wb;
            } else {
              gla += gwa * wa;
              glb -= gwa * wa;
            }
          }
          g.dlse[li] = glb;
          gl[li] = gla;
        }
      }
    }
    out[st] = std::move(g);
  }
  return out;
}

// One block's backward given the gradients of its own out and lse (autograd's through a block
// that returns both): P = exp(s − lse), D = rowsum(dout∘out), dS = P∘(dP − D + dlse),
// dq = σ·dS·k, dk = σ·dSᵀ·q, dv = Pᵀ·dout, in A over the visible (query, key) pairs.
template <class T>
AttentionBlockGrads<T> block_backward_with_lse_grad(
    const AttentionConfig& cfg, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
    const Tensor<A<T>>& out, const Tensor<A<T>>& lse, const Tensor<A<T>>& dout,
    const Tensor<A<T>>& dlse, const std::vector<std::size_t>& qp,
    const std::vector<std::size_t>& kp) {
  using V = A<T>;
  const std::size_t batch = q.dim(0), lq = q.dim(1), h = q.dim(2), d = q.dim(3);
  const std::size_t lk = k.dim(1), g = k.dim(2), group = h / g;
  const auto scale = static_cast<V>(effective_scale(cfg));
  AttentionBlockGrads<T> r{Tensor<V>(q.shape()), Tensor<V>(k.shape()), Tensor<V>(v.shape())};
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t i = 0; i < h; ++i) {
      for (std::size_t t = 0; t < lq; ++t) {
        const std::size_t li = (b * h + i) * lq + t;
        if (std::isinf(lse[li])) continue;  // nothing visible in this block
        const auto qi = [&](std::size_t e) { return ((b * lq + t) * h + i) * d + e; };
        V dsum = 0;
        for (std::size_t e = 0; e < d; ++e) dsum += dout[qi(e)] * out[qi(e)];
        for (std::size_t s = 0; s < lk; ++s) {
          if (!visible(cfg.mask, b, qp[t], kp[s])) continue;
          const auto ki = [&](std::size_t e) { return ((b * lk + s) * g + i / group) * d + e; };
          V dot = 0, dp = 0;
          for (std::size_t e = 0; e < d; ++e) {
            dot += static_cast<V>(q[qi(e)]) * static_cast<V>(k[ki(e)]);
            dp += dout[qi(e)] * static_cast<V>(v[ki(e)]);
          }
          const V p = std::exp(dot * scale - lse[li]);
          const V ds = p * (dp - dsum + dlse[li]);
          for (std::size_t e = 0; e < d; ++e) {
            r.dq[qi(e)] += scale * ds * static_cast<V>(k[ki(e)]);
            r.dk[ki(e)] += scale * ds * static_cast<V>(q[qi(e)]);
            r.dv[ki(e)] += p * dout[qi(e)];
          }
        }
      }
    }
  }
  return r;
}

struct FaultyAttention {
  Fault fault;

  // ---------------------------------------------------------------- the context-parallel core
  template <class T>
  CoreRankOutputs<T> core(Communicator& cp, const AttentionConfig& cfg,
                          const ContextParallelConfig& cc, const CoreRankInputs<T>& in) const {
    if (fault == Fault::causal_top_left) {
      AttentionConfig top_left = cfg;
      top_left.mask.alignment = CausalAlignment::top_left;
      return LibraryAttention{}.core(cp, top_left, cc, in);
    }
    if (fault == Fault::kv_head_i_mod_g) return heads_interleaved(cp, cfg, cc, in);
    if (cc.algorithm == CpAlgorithm::all_gather) {
      if (fault != Fault::gather_no_reduce) {
        return LibraryAttention{}.core(cp, cfg, cc, in);
      }
      return gather_core(cp, cfg, cc, in);
    }
    return ring_core(cp, cfg, cc, in);
  }

  // kv_head_i_mod_g: query head i reads kv head i mod g (the kv heads tiled, [0, 1, .., g − 1,
  // 0, 1, ..], where the kernel's i / (h/g) repeats each one h/g times). It is the library's core
  // run on the query heads reordered so that its head j, which reads kv head j / (h/g), is query
  // head (j mod (h/g))·g + j / (h/g); its out, lse and dq are put back in the query heads' order.
  template <class T>
  static CoreRankOutputs<T> heads_interleaved(Communicator& cp, const AttentionConfig& cfg,
                                              const ContextParallelConfig& cc,
                                              const CoreRankInputs<T>& in) {
    const std::size_t h = in.q.dim(2), n = h / in.k.dim(2), g = in.k.dim(2);
    std::vector<std::size_t> from(h), back(h);
    for (std::size_t j = 0; j < h; ++j) {
      from[j] = (j % n) * g + j / n;
      back[from[j]] = j;
    }
    const CoreRankInputs<T> tiled{reorder_heads(in.q, 2, from), in.k, in.v,
                                  in.dout.empty() ? in.dout : reorder_heads(in.dout, 2, from)};
    auto o = LibraryAttention{}.core(cp, cfg, cc, tiled);
    return {reorder_heads(o.out, 2, back), reorder_heads(o.lse, 1, back),
            reorder_heads(o.dq, 2, back), std::move(o.dk), std::move(o.dv)};
  }

  template <class T>
  CoreRankOutputs<T> gather_core(Communicator& cp, const AttentionConfig& cfg,
                                 const ContextParallelConfig& cc,
                                 const CoreRankInputs<T>& in) const {
    const int p = cp.size(), r = cp.rank();
    std::vector<std::size_t> all, counts;
    std::vector<std::vector<std::size_t>> pos;
    pos.reserve(static_cast<std::size_t>(p));
    const std::size_t batch = in.q.dim(0), row = in.k.dim(2) * in.k.dim(3);
    for (int j = 0; j < p; ++j) pos.push_back(positions_of(fault, cc, p, j));
    for (const auto& ps : pos) {
      all.insert(all.end(), ps.begin(), ps.end());
      counts.push_back(batch * ps.size() * row);
    }
    // Gather K and V into [batch, Σ L_j, g, d] (rank after rank within each sequence).
    auto gather = [&](const Tensor<T>& x) {
      std::vector<T> g(std::accumulate(counts.begin(), counts.end(), std::size_t{0}));
      cp.all_gather(std::span<const T>(x.values()), std::span<T>(g), counts);
      Tensor<T> seq(with_len(x.shape(), all.size()));
      std::size_t src = 0, off = 0;
      for (const auto& ps : pos) {
        for (std::size_t b = 0; b < batch; ++b) {
          std::copy_n(
              g.begin() + static_cast<std::ptrdiff_t>(src), ps.size() * row,
              seq.values().begin() + static_cast<std::ptrdiff_t>((b * all.size() + off) * row));
          src += ps.size() * row;
        }
        off += ps.size();
      }
      return seq;
    };
    const auto mine = query_positions(cc, p, r, pos);
    const Tensor<T> k_all = gather(in.k), v_all = gather(in.v);
    const auto part = attention_block_forward(cfg, in.q, k_all, v_all, mine, all);
    AttentionOutput<T> fwd{rounded<T>(part.out), part.lse};
    (void)gather(in.k);  // the backward's re-gathers, as the library's traffic
    (void)gather(in.v);
    auto g =
        attention_block_backward(cfg, in.q, k_all, v_all, fwd.out, fwd.lse, in.dout, mine, all);
    // Own slice of the locally computed dk/dv, never reduced over the ranks that saw the keys.
    std::size_t off = 0;
    for (int j = 0; j < r; ++j) off += pos[static_cast<std::size_t>(j)].size();
    const std::size_t own = pos[static_cast<std::size_t>(r)].size();  // this rank's keys
    Tensor<T> dk(in.k.shape()), dv(in.v.shape());
    for (std::size_t b = 0; b < batch; ++b) {
      for (std::size_t i = 0; i < own * row; ++i) {
        dk[b * own * row + i] = static_cast<T>(g.dk[(b * all.size() + off) * row + i]);
        dv[b * own * row + i] = static_cast<T>(g.dv[(b * all.size() + off) * row + i]);
      }
    }
    return {std::move(fwd.out), std::move(fwd.lse), rounded<T>(g.dq), std::move(dk), std::move(dv)};
  }

  template <class T>
  CoreRankOutputs<T> ring_core(Communicator& cp, const AttentionConfig& cfg,
                               const ContextParallelConfig& cc, const CoreRankInputs<T>& in) const {
    const int p = cp.size(), r = cp.rank();
    std::vector<std::vector<std::size_t>> pos;
    pos.reserve(static_cast<std::size_t>(p));
    for (int j = 0; j < p; ++j) pos.push_back(positions_of(fault, cc, p, j));
    const auto mine = query_positions(cc, p, r, pos);
    const auto& own_keys = pos[static_cast<std::size_t>(r)];
    const std::size_t batch = in.q.dim(0), h = in.q.dim(2), d = in.q.dim(3);
    const auto kv_shape = [&](std::size_t len) { return with_len(in.k.shape(), len); };
    auto src_of = [&](int step) { return static_cast<std::size_t>((r - step + p) % p); };

    // Forward.
    Tensor<A<T>> out(Shape{batch, mine.size(), h, d});
    Tensor<A<T>> lse(Shape{batch, h, mine.size()});
    std::fill(lse.values().begin(), lse.values().end(), -std::numeric_limits<A<T>>::infinity());
    Tensor<A<T>> own_lse;
    Tensor<A<T>> max_lse(lse.shape());  // merge_by_block_max: the log-sum-exp of the row maxima
    std::fill(max_lse.values().begin(), max_lse.values().end(),
              -std::numeric_limits<A<T>>::infinity());
    std::size_t steps_seen = 0;
    const bool larger_lse =
        fault == Fault::merge_by_larger_lse || fault == Fault::merge_by_larger_lse_autograd;
    std::vector<MergeStep<T>> steps;  // merge_by_larger_lse_autograd: what each step merged
    std::vector<T> kv = concat2(in.k, in.v);
    for (int step = 0; step < p; ++step) {
      const auto& ps = pos[src_of(step)];
      const Tensor<T> kc = slice_elems(kv, 0, kv_shape(ps.size()));
      const Tensor<T> vc = slice_elems(kv, kc.size(), kv_shape(ps.size()));
      const bool local = fault == Fault::top_left_offdiag && step > 0;
      const auto qp = local ? iota_n(mine.size()) : mine;
      const auto kp = local ? iota_n(ps.size()) : ps;
      auto part = attention_block_forward(cfg, in.q, kc, vc, qp, kp);
      if (fault == Fault::ring_skip_self_attn && self_attention_skip(cfg, mine, ps)) {
        std::fill(part.lse.values().begin(), part.lse.values().end(),
                  -std::numeric_limits<A<T>>::infinity());  // the step contributes nothing
      }
      if (fault == Fault::average_outputs) {
        for (std::size_t i = 0; i < out.size(); ++i) out[i] += part.out[i];
        ++steps_seen;
        Tensor<A<T>> scratch(out.shape());
        merge_attention_into(scratch, lse, part.out, part.lse);  // the lse itself stays right
      } else if (fault == Fault::merge_by_block_max) {
        // The library's merge with each step's row max m_j where its lse_j = m_j + log ℓ_j is
        // due: out = Σ_j exp(m_j)·out_j / Σ_j exp(m_j), every ℓ_j lost; the lse merged right.
        Tensor<A<T>> scratch(out.shape());
        merge_attention_into(scratch, lse, part.out, part.lse);
        merge_attention_into(out, max_lse, part.out, block_row_max(cfg, in.q, kc, qp, kp));
      } else if (larger_lse) {
        // The library's two-way merge with its division by l = exp(lse_acc − M) + exp(lse_j − M)
        // left out: out ← exp(lse_acc − M)·out + exp(lse_j − M)·out_j, M = max(lse_acc, lse_j)
        // (an empty side, lse −inf, contributes nothing); the lse merged right.
        const Tensor<A<T>> acc_lse = lse;
        if (fault == Fault::merge_by_larger_lse_autograd) {
          steps.push_back({part.out, part.lse, out, acc_lse});
        }
        Tensor<A<T>> scratch(out.shape());
        merge_attention_into(scratch, lse, part.out, part.lse);
        for (std::size_t b = 0; b < batch; ++b) {
          for (std::size_t t = 0; t < mine.size(); ++t) {
            for (std::size_t i = 0; i < h; ++i) {
              const std::size_t li = (b * h + i) * mine.size() + t;
              const A<T> la = acc_lse[li], lb = part.lse[li], m = std::max(la, lb);
              constexpr A<T> empty = -std::numeric_limits<A<T>>::infinity();
              const A<T> wa = la == empty ? A<T>(0) : std::exp(la - m);
              const A<T> wb = lb == empty ? A<T>(0) : std::exp(lb - m);
              for (std::size_t e = 0; e < d; ++e) {
                const std::size_t oi = ((b * mine.size() + t) * h + i) * d + e;
                const A<T> kept = wa == 0 ? A<T>(0) : wa * out[oi];
                out[oi] = wb == 0 ? kept : kept + wb * part.out[oi];
              }
            }
          }
        }
      } else if (fault == Fault::local_lse_merge) {
        if (step == 0) own_lse = part.lse;
        // out += exp(lse_j − lse_own)·out_j, lse = lse_own: never renormalized globally.
        for (std::size_t b = 0; b < batch; ++b) {
          for (std::size_t t = 0; t < mine.size(); ++t) {
            for (std::size_t i = 0; i < h; ++i) {
              const std::size_t li = (b * h + i) * mine.size() + t;
              const A<T> w = std::isinf(part.lse[li]) && part.lse[li] < 0
                                 ? A<T>(0)
                                 : std::exp(part.lse[li] - own_lse[li]);
              for (std::size_t e = 0; e < d; ++e) {
                const std::size_t oi = ((b * mine.size() + t) * h + i) * d + e;
                if (w != 0) out[oi] += w * part.out[oi];
              }
            }
          }
        }
        lse = own_lse;
      } else {
        merge_attention_into(out, lse, part.out, part.lse);
      }
      if (step + 1 < p) {
        std::vector<T> next(2 * numel(kv_shape(pos[src_of(step + 1)].size())));
        cp.ring_shift(std::span<const T>(kv), std::span<T>(next));
        kv = std::move(next);
      }
    }
    if (fault == Fault::average_outputs && steps_seen > 0) {
      for (auto& x : out.values()) x /= static_cast<A<T>>(steps_seen);
    }
    if (fault == Fault::nan_empty_rows) {
      for (std::size_t b = 0; b < batch; ++b) {
        for (std::size_t t = 0; t < mine.size(); ++t) {
          for (std::size_t i = 0; i < h; ++i) {
            if (!std::isinf(lse[(b * h + i) * mine.size() + t])) continue;
            for (std::size_t e = 0; e < d; ++e) {
              out[((b * mine.size() + t) * h + i) * d + e] = std::numeric_limits<A<T>>::quiet_NaN();
            }
          }
        }
      }
    }
    AttentionOutput<T> fwd{rounded<T>(out), std::move(lse)};

    // Backward. merge_by_larger_lse_autograd: each step's block gets autograd's gradients of
    // its out and lse through the wrong merges.
    const auto merge_grads = fault == Fault::merge_by_larger_lse_autograd
                                 ? larger_lse_merge_grads(steps, in.dout)
                                 : std::vector<BlockGrad<T>>{};
    Tensor<A<T>> dq(in.q.shape());
    Tensor<A<T>> dk_local(in.k.shape()), dv_local(in.v.shape());
    kv = concat2(in.k, in.v);
    std::vector<A<T>> dkv;
    for (int step = 0; step < p; ++step) {
      const auto& ps = fault == Fault::local_kv_backward ? own_keys : pos[src_of(step)];
      const std::vector<T>& kv_used = kv;
      const std::vector<T> own = concat2(in.k, in.v);
      const Tensor<T> kc =
          slice_elems(fault == Fault::local_kv_backward ? own : kv_used, 0, kv_shape(ps.size()));
      const Tensor<T> vc = slice_elems(fault == Fault::local_kv_backward ? own : kv_used, kc.size(),
                                       kv_shape(ps.size()));
      AttentionBlockGrads<T> g;
      if (fault == Fault::merge_by_larger_lse_autograd) {
        const auto st = static_cast<std::size_t>(step);
        g = block_backward_with_lse_grad(cfg, in.q, kc, vc, steps[st].out, steps[st].lse,
                                         merge_grads[st].dout, merge_grads[st].dlse, mine, ps);
      } else if (fault == Fault::step_lse_backward) {
        const auto part = attention_block_forward(cfg, in.q, kc, vc, mine, ps);
        g = attention_block_backward(cfg, in.q, kc, vc, rounded<T>(part.out), part.lse, in.dout,
                                     mine, ps);
      } else {
        g = attention_block_backward(cfg, in.q, kc, vc, fwd.out, fwd.lse, in.dout, mine, ps);
      }
      if (fault == Fault::ring_skip_self_attn && self_attention_skip(cfg, mine, ps)) {
        g = {Tensor<A<T>>(g.dq.shape()), Tensor<A<T>>(g.dk.shape()), Tensor<A<T>>(g.dv.shape())};
      }
      for (std::size_t i = 0; i < dq.size(); ++i) dq[i] += g.dq[i];
      if (fault == Fault::local_kv_backward) {
        for (std::size_t i = 0; i < dk_local.size(); ++i) dk_local[i] += g.dk[i];
        for (std::size_t i = 0; i < dv_local.size(); ++i) dv_local[i] += g.dv[i];
      }
      std::vector<A<T>> block = concat2(g.dk, g.dv);
      if (fault == Fault::local_kv_backward) std::fill(block.begin(), block.end(), A<T>(0));
      if (step == 0) {
        dkv = std::move(block);
      } else {
        for (std::size_t i = 0; i < std::min(dkv.size(), block.size()); ++i) dkv[i] += block[i];
      }
      if (p == 1) break;
      const std::size_t next_elems = 2 * numel(kv_shape(pos[src_of(step + 1)].size()));
      if (step + 1 < p) {
        std::vector<T> next(next_elems);
        cp.ring_shift(std::span<const T>(kv), std::span<T>(next));
        kv = std::move(next);
      }
      if (fault == Fault::dkv_not_returned && step + 1 == p) break;
      std::vector<A<T>> next_dkv(next_elems);
      cp.ring_shift(std::span<const A<T>>(dkv), std::span<A<T>>(next_dkv));
      dkv = std::move(next_dkv);
    }
    Tensor<A<T>> dk = slice_elems(dkv, 0, in.k.shape());
    Tensor<A<T>> dv = slice_elems(dkv, in.k.size(), in.v.shape());
    if (fault == Fault::local_kv_backward) {
      dk = std::move(dk_local);
      dv = std::move(dv_local);
    }
    return {std::move(fwd.out), std::move(fwd.lse), rounded<T>(dq), rounded<T>(dk), rounded<T>(dv)};
  }

  // ---------------------------------------------------------------- the layer
  template <class T>
  LayerRankOutputs<T> layer(Communicator& tp, Communicator& cp, const HeadParallelConfig& cfg,
                            const LayerRankInputs<T>& in) const {
    if (cfg.sequence_parallel && fault == Fault::sp_output_all_reduced) {
      return output_all_reduced(tp, cp, cfg, in);
    }
    if (cfg.sequence_parallel && fault == Fault::sp_dbo_own_rows && cfg.has_bias) {
      return dbo_own_rows(tp, cp, cfg, in);
    }
    HeadAssignment a = head_assignment(cfg, tp.size(), tp.rank());
    if (fault == Fault::kv_head_r_mod_g && a.kv_replicas > 1) {
      a.kv_offset = static_cast<std::size_t>(tp.rank()) % cfg.attention.kv_heads;
    }
    const auto w = shard_attention_weights(in.dense, cfg, a);
    auto fwd = attention_layer(tp, cp, cfg, in.x, w);
    if (fault == Fault::bias_every_rank && cfg.has_bias) {
      // Adding bo before the all_reduce adds it tp times: tp − 1 extra copies.
      const std::size_t hidden = cfg.hidden;
      for (std::size_t i = 0; i < fwd.y.size(); ++i) {
        fwd.y[i] =
            static_cast<T>(static_cast<A<T>>(fwd.y[i]) +
                           static_cast<A<T>>(tp.size() - 1) * static_cast<A<T>>(w.bo[i % hidden]));
      }
    }
    if (fault == Fault::kv_grad_not_summed && a.kv_replicas > 1) {
      // The library's backward without the sum of the replicated kv head's gradients.
      auto g = attention_layer_backward_partial(tp, cp, cfg, in.x, w, fwd, in.dy);
      all_reduce_layer_grads_over_cp(cp, cfg, g);
      return {std::move(fwd.y), std::move(g)};
    }
    auto g = attention_layer_backward(tp, cp, cfg, in.x, w, fwd, in.dy);
    return {std::move(fwd.y), std::move(g)};
  }

  // sp_output_all_reduced: the layer gathers its token rows of x, but its output projection is
  // the plain row-parallel one (sequence_parallel_output left off): y all_reduced, every tp rank
  // returning all batch·L_r rows. The backward is the library's.
  template <class T>
  static LayerRankOutputs<T> output_all_reduced(Communicator& tp, Communicator& cp,
                                                const HeadParallelConfig& cfg,
                                                const LayerRankInputs<T>& in) {
    const std::size_t len = cfg.context_parallel
                                ? cp_positions(*cfg.context_parallel, cp.size(), cp.rank()).size()
                                : cfg.attention.mask.q_len;
    const auto counts = split_sizes(cfg.token_split, cfg.batch * len, tp.size());
    const Tensor<T> x_all = all_gather_tokens(tp, in.x, std::span<const std::size_t>(counts));
    HeadParallelConfig plain = cfg;
    plain.sequence_parallel = false;
    const auto w =
        shard_attention_weights(in.dense, cfg, head_assignment(cfg, tp.size(), tp.rank()));
    auto fwd = attention_layer(tp, cp, plain,
                               Tensor<T>(Shape{cfg.batch, len, cfg.hidden}, x_all.values()), w);
    Tensor<T> y(Shape{cfg.batch * len, cfg.hidden}, std::move(fwd.y.values()));
    auto g = attention_layer_backward(tp, cp, cfg, in.x, w, fwd, in.dy);
    return {std::move(y), std::move(g)};
  }

  // sp_dbo_own_rows: with y's rows on its tp rank, the output bias gradient is summed over the
  // rank's own dy rows, and the sum over tp that Megatron's finalize_model_grads makes for such
  // sequence-parallel parameters is left out: dbo is a partial sum, different on every tp rank.
  template <class T>
  static LayerRankOutputs<T> dbo_own_rows(Communicator& tp, Communicator& cp,
                                          const HeadParallelConfig& cfg,
                                          const LayerRankInputs<T>& in) {
    const auto w =
        shard_attention_weights(in.dense, cfg, head_assignment(cfg, tp.size(), tp.rank()));
    auto fwd = attention_layer(tp, cp, cfg, in.x, w);
    auto g = attention_layer_backward_partial(tp, cp, cfg, in.x, w, fwd, in.dy);
    all_reduce_replicated_kv_grads(tp, cfg, g);
    const std::size_t hidden = cfg.hidden;
    std::vector<A<T>> sum(hidden);
    for (std::size_t i = 0; i < in.dy.size(); ++i) sum[i % hidden] += static_cast<A<T>>(in.dy[i]);
    for (std::size_t k = 0; k < hidden; ++k) g.dbo[k] = static_cast<T>(sum[k]);
    all_reduce_layer_grads_over_cp(cp, cfg, g);
    return {std::move(fwd.y), std::move(g)};
  }
};

template <Fault F>
std::shared_ptr<const AttentionImplementation> make() {
  return std::make_shared<const AttentionAdapter<FaultyAttention>>(FaultyAttention{F});
}

// The catalog: each fault's name (as "mutant:<name>") and its story.
constexpr Mutant<AttentionImplementation> catalog[] = {
    {"cp-average-outputs",
     "averages the ring steps' independently normalized outputs instead of merging them by "
     "lse (the textbook context-parallel bug)",
     &make<Fault::average_outputs>, false},
    {"cp-local-lse-merge",
     "weights each step's output by exp(lse_j − lse_own), the local lse, and never "
     "renormalizes by the global one",
     &make<Fault::local_lse_merge>, false},
    {"cp-merge-by-block-max",
     "merges the ring steps' normalized outputs with weights exp(m_j − M) from each step's row "
     "max m_j (M their log-sum-exp), the online-softmax rescale of a running sum not yet divided "
     "by its row sum, instead of exp(lse_j − lse) with lse_j = m_j + log ℓ_j: each step's row "
     "sum ℓ_j is lost, so a step with many visible keys weighs as much as one with a single "
     "key of the same max (the lse itself is merged right)",
     &make<Fault::merge_by_block_max>, false},
    {"cp-merge-by-larger-lse",
     "merges each ring step into the running output with weights exp(lse_acc − M) and "
     "exp(lse_j − M), M = max(lse_acc, lse_j) the larger lse, and never divides by their sum: "
     "the rescale FlashAttention's online softmax applies to running sums not yet normalized, "
     "applied to outputs already divided by their row sums, so every merge of two non-empty "
     "steps scales the output up by a factor in (1, 2] (a hand-written ring attention's bug, "
     "the PyTorch example's merge_by_max; the lse itself is merged right)",
     &make<Fault::merge_by_larger_lse>, false},
    {"cp-merge-by-larger-lse-autograd",
     "the same merge as cp-merge-by-larger-lse (weights exp(lse − M), M the larger lse, never "
     "divided by their sum), differentiated as autograd differentiates a hand-written merge: "
     "each block's out and lse get the gradients of the wrong merge, where the other "
     "signature's backward is the ring backward on the merged out (the PyTorch example's "
     "merge_by_max, autograd's backward)",
     &make<Fault::merge_by_larger_lse_autograd>, false},
    {"cp-top-left-mask",
     "evaluates the causal mask on chunk-local positions on off-diagonal ring steps "
     "(top-left aligned)",
     &make<Fault::top_left_offdiag>, false},
    {"cp-zigzag-off-by-one",
     "zigzag layout: rank r believes it holds chunk 2·cp − r instead of 2·cp − 1 − r",
     &make<Fault::zigzag_off_by_one>, false},
    {"empty-row-nan", "a fully masked query row gives 0/0 = NaN instead of out 0, lse −inf",
     &make<Fault::nan_empty_rows>, false},
    {"ring-backward-local-kv",
     "the ring backward computes every step against the local K/V instead of the rotated "
     "chunk",
     &make<Fault::local_kv_backward>, false},
    {"ring-backward-step-lse",
     "the ring backward uses each step's own out and lse instead of the global merged ones",
     &make<Fault::step_lse_backward>, false},
    {"dkdv-not-returned",
     "dK/dV never make their last hop: each rank keeps its neighbour's accumulated gradient",
     &make<Fault::dkv_not_returned>, false},
    {"all-gather-no-reduce-scatter",
     "the all-gather backward keeps its own slice of dK/dV instead of reduce_scattering the "
     "contributions of every rank's queries",
     &make<Fault::gather_no_reduce>, false},
    {"kv-head-r-mod-g", "g < tp: rank r reads kv head r mod g instead of r / (tp/g)",
     &make<Fault::kv_head_r_mod_g>, false},
    {"kv-head-i-mod-g",
     "1 < g < h: query head i reads kv head i mod g instead of i / (h/g), the kv heads tiled "
     "([k0, k1, k0, k1]) where they are repeated in place ([k0, k0, k1, k1], PyTorch's "
     "repeat_interleave and Llama's repeat_kv), as ONNX's Attention op expands them with Tile "
     "(onnx/onnx pull request #7274 proposes repeat_interleave)",
     &make<Fault::kv_head_i_mod_g>, false},
    {"kv-grad-not-summed",
     "g < tp: the replicated kv projection's weight and bias gradients are not summed over "
     "the ranks that share the kv head",
     &make<Fault::kv_grad_not_summed>, false},
    {"out-bias-every-rank",
     "the output projection's bias is added on every tp rank before the all_reduce (tp times)",
     &make<Fault::bias_every_rank>, false},
    {"causal-top-left-for-bottom-right",
     "the causal mask is always top-left aligned (PyTorch's scaled_dot_product_attention "
     "is_causal, FlashAttention < 2.1) where the config declares bottom-right: a decode query "
     "sees only the first key of its cache, a prefill chunk only the first keys (wrong only when "
     "Lq != Lk)",
     &make<Fault::causal_top_left>, false},
    {"ring-skip-assumes-self-attention",
     "the ring skips a key chunk that starts after the rank's last query position, the "
     "self-attention test; with Lq < Lk and a bottom-right mask those keys are visible, so "
     "decode and chunked prefill lose part of their cache (wrong only when Lq != Lk)",
     &make<Fault::ring_skip_self_attn>, false},
    {"sp-output-all-reduced",
     "sequence parallelism: the output projection all_reduces y as without it "
     "(sequence_parallel_output left off), so every tp rank returns all batch·L_r rows of y "
     "instead of its own token rows (wrong only under sequence parallelism)",
     &make<Fault::sp_output_all_reduced>, false},
    {"sp-dbo-own-rows",
     "sequence parallelism: dbo is summed over the rank's own dy rows and never over tp (the sum "
     "Megatron's finalize_model_grads makes for sequence-parallel parameters is left out), so "
     "each tp rank holds a different partial dbo (wrong only under sequence parallelism, with "
     "biases)",
     &make<Fault::sp_dbo_own_rows>, false},
};

}  // namespace

std::span<const Mutant<AttentionImplementation>> attention_mutants() { return catalog; }

}  // namespace shardcheck::check
