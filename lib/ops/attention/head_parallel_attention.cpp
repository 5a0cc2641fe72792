// The attention layer with heads over tp and, optionally, the sequence over cp
// (ops/attention/head_parallel_attention.hpp): head assignment, weight sharding, forward and
// backward.
#include "ops/attention/head_parallel_attention.hpp"

#include "ops/linear/linear.hpp"
#include "ops/linear/linear_internal.hpp"
#include "ops/tp_transitions.hpp"
#include "ops/workspace.hpp"
#include "runtime/errors.hpp"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace shardcheck {

namespace {

std::string str(std::size_t n) { return std::to_string(n); }

std::string on_rank(const char* op, const Communicator& tp, const Communicator& cp) {
  return std::string(op) + " on tp rank " + std::to_string(tp.rank()) + " of " +
         std::to_string(tp.size()) + ", cp rank " + std::to_string(cp.rank()) + " of " +
         std::to_string(cp.size()) + ": ";
}

// Rows [first, first + count) of a 2-D (or elements of a 1-D) tensor: the linear op's slicing.
// An absent bias (a tensor with no shape) stays absent where no rows are taken.
template <class T>
Tensor<T> rows(const Tensor<T>& t, std::size_t first, std::size_t count) {
  if (t.empty() && count == 0) return t;
  return linear_detail::take_rows(t, Piece{first, count});
}

template <class T>
Tensor<T> cols(const Tensor<T>& t, std::size_t first, std::size_t count) {
  return linear_detail::take_cols(t, Piece{first, count});
}

// Stacks 2-D tensors by rows (or 1-D by elements).
template <class T>
Tensor<T> stack_rows(std::initializer_list<const Tensor<T>*> parts) {
  std::vector<T> data;
  std::size_t n = 0;
  Shape s;
  for (const auto* p : parts) {
    data.insert(data.end(), p->values().begin(), p->values().end());
    n += p->dim(0);
    s = p->shape();
  }
  s[0] = n;
  return Tensor<T>(s, std::move(data));
}

// Stacks [tokens, widths_i] tensors by columns (widths given: tokens may be 0).
template <class T>
Tensor<T> stack_cols(std::initializer_list<const Tensor<T>*> parts,
                     std::initializer_list<std::size_t> widths, std::size_t tokens) {
  std::size_t width = 0;
  for (auto w : widths) width += w;
  Tensor<T> out(Shape{tokens, width});
  std::size_t off = 0;
  auto w = widths.begin();
  for (const auto* p : parts) {
    for (std::size_t i = 0; i < tokens; ++i) {
      std::copy_n(p->values().begin() + static_cast<std::ptrdiff_t>(i * *w), *w,
                  out.values().begin() + static_cast<std::ptrdiff_t>(i * width + off));
    }
    off += *w++;
  }
  return out;
}

template <class T>
Tensor<T> reshape(Tensor<T> t, Shape s) {
  return Tensor<T>(std::move(s), std::move(t.values()));
}

template <class T>
void require_shape(const std::string& where, const char* name, const Tensor<T>& t,
                   const Shape& want, const std::string& what) {
  if (t.shape() != want) {
    throw UsageError(where + name + " is " + format_shape(t.shape()) + " but must be " +
                     format_shape(want) + " " + what);
  }
}

AttentionConfig local_config(const HeadParallelConfig& cfg, const HeadAssignment& a) {
  AttentionConfig c = cfg.attention;
  c.q_heads = a.q_count;
  c.kv_heads = a.kv_count;
  if (c.scale == 0) c.scale = effective_scale(cfg.attention);
  return c;
}

struct LocalShapes {
  std::size_t batch = 0, len = 0, tokens = 0;
  std::vector<std::size_t> token_counts;  // every tp rank's token rows (sequence_parallel only)
};

// Under sequence parallelism: the token rows of every tp rank (cfg.token_split of batch·len).
std::vector<std::size_t> token_counts(const std::string& where, const HeadParallelConfig& cfg,
                                      std::size_t tokens, int tp) {
  try {
    return split_sizes(cfg.token_split, tokens, tp);
  } catch (const UsageError& e) {
    throw UsageError(where + "token_split " + cfg.token_split.to_string() + " cannot split the " +
                     str(tokens) + " tokens over tp = " + std::to_string(tp) + ": " + e.what());
  }
}

template <class T>
LocalShapes check_layer(const std::string& where, const Communicator& tp, const Communicator& cp,
                        const HeadParallelConfig& cfg, const HeadAssignment& a, const Tensor<T>& x,
                        const AttentionLayerWeights<T>& w) {
  LocalShapes s;
  const std::size_t hidden = cfg.hidden, d = cfg.attention.head_dim;
  const std::size_t len = cfg.context_parallel
                              ? cp_positions(*cfg.context_parallel, cp.size(), cp.rank()).size()
                              : cfg.attention.mask.q_len;
  if (cfg.sequence_parallel) {
    s.batch = cfg.batch;
    s.len = len;
    s.tokens = s.batch * len;
    s.token_counts = token_counts(where, cfg, s.tokens, tp.size());
    const std::size_t mine = s.token_counts[static_cast<std::size_t>(tp.rank())];
    if (x.ndim() != 2 || x.dim(0) != mine || x.dim(1) != hidden) {
      throw UsageError(where + "x is " + format_shape(x.shape()) + " but must be [" + str(mine) +
                       ", " + str(hidden) + "] under sequence_parallel (this tp rank's rows of " +
                       "the batch·L_r = " + str(cfg.batch) + "·" + str(len) + " tokens under " +
                       cfg.token_split.to_string() + "; set cfg.batch to the batch size)");
    }
  } else {
    if (x.ndim() != 3 || x.dim(1) != len || x.dim(2) != hidden) {
      throw UsageError(where + "x is " + format_shape(x.shape()) + " but must be [batch, " +
                       str(len) + ", " + str(hidden) + "] (this rank's " + str(len) +
                       " positions of the sequence, hidden = cfg.hidden)");
    }
    s.batch = x.dim(0);
    s.len = len;
    s.tokens = s.batch * len;
  }
  const std::string qh = "(this rank's " + str(a.q_count) + " query heads × head_dim " + str(d) +
                         "; shard_attention_weights gives it)";
  const std::string kh = "(this rank's " + str(a.kv_count) + " kv heads × head_dim " + str(d) +
                         "; shard_attention_weights gives it)";
  require_shape(where, "wq", w.wq, Shape{a.q_count * d, hidden}, qh);
  require_shape(where, "wk", w.wk, Shape{a.kv_count * d, hidden}, kh);
  require_shape(where, "wv", w.wv, Shape{a.kv_count * d, hidden}, kh);
  require_shape(where, "wo", w.wo, Shape{hidden, a.q_count * d}, qh);
  if (cfg.has_bias) {
    require_shape(where, "bq", w.bq, Shape{a.q_count * d}, qh);
    require_shape(where, "bk", w.bk, Shape{a.kv_count * d}, kh);
    require_shape(where, "bv", w.bv, Shape{a.kv_count * d}, kh);
    require_shape(where, "bo", w.bo, Shape{hidden}, "(the full output bias, never split)");
  } else if (!w.bq.empty() || !w.bk.empty() || !w.bv.empty() || !w.bo.empty()) {
    throw UsageError(where + "cfg.has_bias is false but a bias was given (bq " +
                     format_shape(w.bq.shape()) + ", bk " + format_shape(w.bk.shape()) + ", bv " +
                     format_shape(w.bv.shape()) + ", bo " + format_shape(w.bo.shape()) +
                     "): pass empty biases, or set cfg.has_bias = true");
  }
  return s;
}

// head_assignment on this rank, its errors prefixed with the op and the rank.
HeadAssignment assignment_on_rank(const std::string& where, const HeadParallelConfig& cfg,
                                  const Communicator& tp) {
  try {
    return head_assignment(cfg, tp.size(), tp.rank());
  } catch (const UsageError& e) {
    throw UsageError(where + e.what());
  }
}

RowParallelConfig output_projection(const HeadParallelConfig& cfg) {
  return linear_detail::block_row_config(cfg.sequence_parallel, cfg.token_split,
                                         cfg.reduce_algorithm);
}

// x as [tokens, hidden], for the QKV projection and its weight gradients. Under sequence
// parallelism x all_gathered along tokens: a collective buffer of the workspace, counted while
// this object lives, so the layer scopes it to the projection that reads it (the budget's model,
// lib/budget/library_activations.hpp); else x itself, reshaped.
template <class T>
class FullTokens {
 public:
  FullTokens(Communicator& tp, const HeadParallelConfig& cfg, const LocalShapes& s,
             const Tensor<T>& x)
      : sp_(cfg.sequence_parallel) {
    if (sp_) {
      gathered_ = Workspace::of_this_rank().hold(all_gather_tokens(tp, x, s.token_counts));
    } else {
      local_ = reshape(x, Shape{s.tokens, cfg.hidden});
    }
  }
  const Tensor<T>& operator*() const { return sp_ ? *gathered_ : local_; }

 private:
  bool sp_;
  Held<Tensor<T>> gathered_;  // sequence parallelism
  Tensor<T> local_;           // otherwise
};

}  // namespace

HeadAssignment head_assignment(const HeadParallelConfig& cfg, int tp_size, int tp_rank) {
  const std::size_t h = cfg.attention.q_heads, g = cfg.attention.kv_heads;
  const auto P = static_cast<std::size_t>(tp_size);
  const std::string what = "head_assignment (h = " + str(h) + " query heads, g = " + str(g) +
                           " kv heads, tp = " + str(P) + "): ";
  if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size) {
    throw UsageError(what + "rank " + std::to_string(tp_rank) + " is not in the tp group; pass " +
                     "tp ≥ 1 and 0 ≤ tp_rank < tp");
  }
  if (h == 0 || g == 0 || h % g != 0) {
    throw UsageError(what + "g must be ≥ 1 and divide h (each kv head serves h/g query heads)");
  }
  const std::size_t group = h / g;
  const auto r = static_cast<std::size_t>(tp_rank);
  HeadAssignment a;
  if (g >= P) {
    std::vector<Piece> ps;
    try {
      ps = split(cfg.kv_head_split, g, tp_size);
    } catch (const UsageError& e) {
      throw UsageError(what + "kv_head_split " + cfg.kv_head_split.to_string() +
                       " cannot split the g kv heads over tp: " + e.what());
    }
    a.kv_offset = ps[r].offset;
    a.kv_count = ps[r].size;
    a.q_offset = a.kv_offset * group;
    a.q_count = a.kv_count * group;
    a.kv_replicas = 1;
    a.kv_group_first = tp_rank;
    return a;
  }
  if (P % g != 0) {
    throw UsageError(what +
                     "tp > g replicates each kv head on tp/g ranks, so g must divide tp; "
                     "choose tp ≤ g or a multiple of g");
  }
  const std::size_t rep = P / g;
  if (group % rep != 0) {
    throw UsageError(what + "the h/g = " + str(group) + " query heads of a kv head must split " +
                     "evenly over the tp/g = " + str(rep) +
                     " ranks that share it (whole heads per rank); choose tp dividing h");
  }
  const std::size_t per = group / rep;
  a.kv_offset = r / rep;
  a.kv_count = 1;
  a.q_offset = a.kv_offset * group + (r % rep) * per;
  a.q_count = per;
  a.kv_replicas = static_cast<int>(rep);
  a.kv_group_first = static_cast<int>(a.kv_offset * rep);
  return a;
}

template <class T>
AttentionLayerWeights<T> shard_attention_weights(const AttentionLayerWeights<T>& dense,
                                                 const HeadParallelConfig& cfg,
                                                 const HeadAssignment& a) {
  const std::size_t d = cfg.attention.head_dim;
  AttentionLayerWeights<T> s;
  s.wq = rows(dense.wq, a.q_offset * d, a.q_count * d);
  s.wk = rows(dense.wk, a.kv_offset * d, a.kv_count * d);
  s.wv = rows(dense.wv, a.kv_offset * d, a.kv_count * d);
  s.wo = cols(dense.wo, a.q_offset * d, a.q_count * d);
  if (cfg.has_bias) {
    s.bq = rows(dense.bq, a.q_offset * d, a.q_count * d);
    s.bk = rows(dense.bk, a.kv_offset * d, a.kv_count * d);
    s.bv = rows(dense.bv, a.kv_offset * d, a.kv_count * d);
    s.bo = dense.bo;
  }
  return s;
}

template <class T>
AttentionLayerOutput<T> attention_layer(Communicator& tp, Communicator& cp,
                                        const HeadParallelConfig& cfg, const Tensor<T>& x,
                                        const AttentionLayerWeights<T>& w,
                                        const ContextParallelCore<T>& core) {
  const std::string where = on_rank("attention_layer", tp, cp);
  const HeadAssignment a = assignment_on_rank(where, cfg, tp);
  const LocalShapes s = check_layer(where, tp, cp, cfg, a, x, w);
  const std::size_t d = cfg.attention.head_dim, hq = a.q_count * d, hkv = a.kv_count * d;

  // The fused QKV projection: one linear over [Wq_r; Wk_r; Wv_r] (column-parallel by heads).
  const Tensor<T> wqkv = stack_rows({&w.wq, &w.wk, &w.wv});
  const Tensor<T> bqkv = cfg.has_bias ? stack_rows({&w.bq, &w.bk, &w.bv}) : Tensor<T>();
  Tensor<T> qkv;
  {
    const FullTokens<T> x2(tp, cfg, s, x);  // SP: the all_gathered x, freed once read
    qkv = linear(*x2, wqkv, bqkv);
  }

  AttentionLayerOutput<T> out;
  out.q = reshape(cols(qkv, 0, hq), Shape{s.batch, s.len, a.q_count, d});
  out.k = reshape(cols(qkv, hq, hkv), Shape{s.batch, s.len, a.kv_count, d});
  out.v = reshape(cols(qkv, hq + hkv, hkv), Shape{s.batch, s.len, a.kv_count, d});

  if (a.q_count == 0) {  // a rank with no heads (uneven kv_head_split): o is [tokens, 0]
    out.attn.out = Tensor<T>(Shape{s.batch, s.len, 0, d});
    out.attn.lse = Tensor<acc_t<T>>(Shape{s.batch, 0, s.len});
  } else if (cfg.context_parallel) {
    out.attn =
        core.forward
            ? core.forward(cp, local_config(cfg, a), *cfg.context_parallel, out.q, out.k, out.v)
            : context_parallel_attention(cp, local_config(cfg, a), *cfg.context_parallel, out.q,
                                         out.k, out.v);
  } else {
    out.attn = attention_forward(local_config(cfg, a), out.q, out.k, out.v);
  }
  const Tensor<T> o2 = reshape(out.attn.out, Shape{s.tokens, hq});
  out.y = row_parallel_linear(tp, output_projection(cfg), o2, w.wo, w.bo).y;
  if (!cfg.sequence_parallel) out.y = reshape(std::move(out.y), Shape{s.batch, s.len, cfg.hidden});
  return out;
}

template <class T>
AttentionLayerGrads<T> attention_layer_backward_partial(
    Communicator& tp, Communicator& cp, const HeadParallelConfig& cfg, const Tensor<T>& x,
    const AttentionLayerWeights<T>& w, const AttentionLayerOutput<T>& fwd, const Tensor<T>& dy,
    const ContextParallelCore<T>& core) {
  const std::string where = on_rank("attention_layer_backward", tp, cp);
  const HeadAssignment a = assignment_on_rank(where, cfg, tp);
  const LocalShapes s = check_layer(where, tp, cp, cfg, a, x, w);
  const std::size_t d = cfg.attention.head_dim, hq = a.q_count * d, hkv = a.kv_count * d;
  require_shape(where, "dy", dy, x.shape(), "(the gradient of y, x's shape)");

  // Output projection (row-parallel): do_r = dy·Wo_r, dWo_r = dyᵀ·o_r, dbo = Σ dy.
  const Tensor<T> o2 = reshape(fwd.attn.out, Shape{s.tokens, hq});
  const Tensor<T> dy2 = cfg.sequence_parallel ? dy : reshape(dy, Shape{s.tokens, cfg.hidden});
  LinearGrads<T> go =
      row_parallel_linear_backward(tp, output_projection(cfg), o2, w.wo, cfg.has_bias, dy2);

  // The attention core on the local heads.
  AttentionGrads<T> ga;
  if (a.q_count == 0) {
    ga = {fwd.q, fwd.k, fwd.v};  // empty: [batch, L, 0, d]
  } else {
    const Tensor<T> dout = reshape(std::move(go.dx), Shape{s.batch, s.len, a.q_count, d});
    const AttentionConfig local = local_config(cfg, a);
    if (!cfg.context_parallel) {
      ga = attention_backward(local, fwd.q, fwd.k, fwd.v, fwd.attn, dout);
    } else if (core.backward) {
      ga = core.backward(cp, local, *cfg.context_parallel, fwd.q, fwd.k, fwd.v, fwd.attn, dout);
    } else {
      ga = context_parallel_attention_backward(cp, local, *cfg.context_parallel, fwd.q, fwd.k,
                                               fwd.v, fwd.attn, dout);
    }
  }

  // The fused QKV projection's backward: dx_r = [dq | dk | dv]·[Wq_r; Wk_r; Wv_r], then one
  // all_reduce over tp (Megatron's f), or under sequence parallelism a reduce_scatter along
  // tokens (g's backward).
  const Tensor<T> wqkv = stack_rows({&w.wq, &w.wk, &w.wv});
  const Tensor<T> dq2 = reshape(ga.dq, Shape{s.tokens, hq});
  const Tensor<T> dk2 = reshape(ga.dk, Shape{s.tokens, hkv});
  const Tensor<T> dv2 = reshape(ga.dv, Shape{s.tokens, hkv});
  LinearGrads<T> gq;
  {
    const FullTokens<T> x2(tp, cfg, s, x);  // SP: x gathered again, freed before dx moves
    gq = linear_backward(*x2, wqkv, cfg.has_bias,
                         stack_cols({&dq2, &dk2, &dv2}, {hq, hkv, hkv}, s.tokens));
  }
  if (cfg.sequence_parallel) {
    // The full partial dx, reduce_scatter's input, held in the workspace while it is reduced.
    const auto full_dx = Workspace::of_this_rank().hold(std::move(gq.dx));
    gq.dx = reduce_scatter_tokens(tp, *full_dx, s.token_counts, cfg.reduce_algorithm);
  } else {
    tp.all_reduce(gq.dx.span(), ReduceOp::sum, cfg.reduce_algorithm);
  }

  AttentionLayerGrads<T> g;
  g.dx = reshape(std::move(gq.dx), x.shape());
  g.dwq = rows(gq.dw, 0, hq);
  g.dwk = rows(gq.dw, hq, hkv);
  g.dwv = rows(gq.dw, hq + hkv, hkv);
  if (cfg.has_bias) {
    g.dbq = rows(gq.db, 0, hq);
    g.dbk = rows(gq.db, hq, hkv);
    g.dbv = rows(gq.db, hq + hkv, hkv);
    g.dbo = std::move(go.db);
  }
  g.dwo = std::move(go.dw);

  return g;
}

namespace {

// Pack, all_reduce (sum), unpack: one all_reduce over `group` for a list of gradients.
template <class T>
void all_reduce_packed(Communicator& group, Algorithm algorithm,
                       std::initializer_list<Tensor<T>*> grads) {
  std::size_t total = 0;
  for (auto* t : grads) total += t->size();
  auto buf = Workspace::of_this_rank().buffer<T>(total);  // the packed all_reduce buffer
  std::size_t off = 0;
  for (auto* t : grads) {
    std::copy_n(t->values().begin(), t->size(), buf->begin() + static_cast<std::ptrdiff_t>(off));
    off += t->size();
  }
  group.all_reduce(std::span<T>(*buf), ReduceOp::sum, algorithm);
  off = 0;
  for (auto* t : grads) {
    std::copy_n(buf->begin() + static_cast<std::ptrdiff_t>(off), t->size(), t->values().begin());
    off += t->size();
  }
}

}  // namespace

template <class T>
void all_reduce_replicated_kv_grads(Communicator& tp, const HeadParallelConfig& cfg,
                                    AttentionLayerGrads<T>& g) {
  const HeadAssignment a = assignment_on_rank(
      "all_reduce_replicated_kv_grads on tp rank " + std::to_string(tp.rank()) + ": ", cfg, tp);
  if (a.kv_replicas <= 1) return;
  std::vector<int> sharing(static_cast<std::size_t>(a.kv_replicas));
  for (int i = 0; i < a.kv_replicas; ++i)
    sharing[static_cast<std::size_t>(i)] = a.kv_group_first + i;
  auto kv_group = tp.group(sharing);
  all_reduce_packed<T>(*kv_group, cfg.reduce_algorithm, {&g.dwk, &g.dbk, &g.dwv, &g.dbv});
}

template <class T>
void all_reduce_layer_grads_over_cp(Communicator& cp, const HeadParallelConfig& cfg,
                                    AttentionLayerGrads<T>& g) {
  if (!cfg.context_parallel || cp.size() == 1) return;
  // The rank's own shards (and the kv group's replicated dWk, dbk, dWv, dbv: every rank of a kv
  // group has the same head counts, so the same pack) in one packed all_reduce. dbo is
  // replicated on every tp rank, whose packs differ in size when the heads are split unevenly:
  // inside the pack its elements would fall in different chunks of the ring on different tp
  // ranks, be summed in a different order and differ in the last bit. It gets an all_reduce of
  // its own, in place (it is a result), whose layout is the same on every tp rank.
  all_reduce_packed<T>(cp, cfg.reduce_algorithm,
                       {&g.dwq, &g.dbq, &g.dwk, &g.dbk, &g.dwv, &g.dbv, &g.dwo});
  if (cfg.has_bias) cp.all_reduce(g.dbo.span(), ReduceOp::sum, cfg.reduce_algorithm);
}

template <class T>
AttentionLayerGrads<T> attention_layer_backward(Communicator& tp, Communicator& cp,
                                                const HeadParallelConfig& cfg, const Tensor<T>& x,
                                                const AttentionLayerWeights<T>& w,
                                                const AttentionLayerOutput<T>& fwd,
                                                const Tensor<T>& dy,
                                                const ContextParallelCore<T>& core) {
  AttentionLayerGrads<T> g = attention_layer_backward_partial(tp, cp, cfg, x, w, fwd, dy, core);
  all_reduce_replicated_kv_grads(tp, cfg, g);
  all_reduce_layer_grads_over_cp(cp, cfg, g);
  return g;
}

#define SHARDCHECK_HEAD_PARALLEL(T)                                                       \
  template AttentionLayerWeights<T> shard_attention_weights(                              \
      const AttentionLayerWeights<T>&, const HeadParallelConfig&, const HeadAssignment&); \
  template AttentionLayerOutput<T> attention_layer(                                       \
      Communicator&, Communicator&, const HeadParallelConfig&, const Tensor<T>&,          \
      const AttentionLayerWeights<T>&, const ContextParallelCore<T>&);                    \
  template AttentionLayerGrads<T> attention_layer_backward(                               \
      Communicator&, Communicator&, const HeadParallelConfig&, const Tensor<T>&,          \
      const AttentionLayerWeights<T>&, const AttentionLayerOutput<T>&, const Tensor<T>&,  \
      const ContextParallelCore<T>&);                                                     \
  template AttentionLayerGrads<T> attention_layer_backward_partial(                       \
      Communicator&, Communicator&, const HeadParallelConfig&, const Tensor<T>&,          \
      const AttentionLayerWeights<T>&, const AttentionLayerOutput<T>&, const Tensor<T>&,  \
      const ContextParallelCore<T>&);                                                     \
  template void all_reduce_replicated_kv_grads(Communicator&, const HeadParallelConfig&,  \
                                               AttentionLayerGrads<T>&);                  \
  template void all_reduce_layer_grads_over_cp(Communicator&, const HeadParallelConfig&,  \
                                               AttentionLayerGrads<T>&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_HEAD_PARALLEL)
#undef SHARDCHECK_HEAD_PARALLEL

}  // namespace shardcheck
