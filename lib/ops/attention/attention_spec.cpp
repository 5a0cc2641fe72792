#include "ops/attention/attention_spec.hpp"

#include <algorithm>

namespace shardcheck {

using spec::Elem;
using spec::Pass;
using spec::Role;

namespace {

// The core's calls on cp rank r: `row` elements per position of k (or v).
spec::RankCalls core_calls(const ContextParallelConfig& cc, std::size_t batch, std::size_t row,
                           int p, int r) {
  const auto lens = cp_lengths(cc, p);
  spec::RankCalls c;
  if (cc.algorithm == CpAlgorithm::all_gather) {
    std::vector<std::size_t> counts(lens);
    for (auto& n : counts) n *= batch * row;
    c.push_back(spec::all_gather_spec(Pass::forward, "k", "cp", Elem::value, counts, r));
    c.push_back(spec::all_gather_spec(Pass::forward, "v", "cp", Elem::value, counts, r));
    c.push_back(spec::all_gather_spec(Pass::backward, "k", "cp", Elem::value, counts, r));
    c.push_back(spec::all_gather_spec(Pass::backward, "v", "cp", Elem::value, counts, r));
    c.push_back(spec::reduce_scatter_spec(Pass::backward, "dk", "cp", Elem::acc, counts, r,
                                          Algorithm::ring));
    c.push_back(spec::reduce_scatter_spec(Pass::backward, "dv", "cp", Elem::acc, counts, r,
                                          Algorithm::ring));
    return c;
  }
  // The chunk of rank j's K and V: 2·batch·L_j·row elements; at step s this rank holds the
  // chunk of rank (r − s) mod p.
  auto chunk = [&](int s) {
    return 2 * batch * lens[static_cast<std::size_t>(wrap_rank(r - s, p))] * row;
  };
  for (int s = 0; s + 1 < p; ++s) {
    c.push_back(spec::ring_shift_spec(Pass::forward, "k,v", "cp", Elem::value, chunk(s),
                                      chunk(s + 1), p, r));
  }
  for (int s = 0; s < p && p > 1; ++s) {
    if (s + 1 < p) {
      c.push_back(spec::ring_shift_spec(Pass::backward, "k,v", "cp", Elem::value, chunk(s),
                                        chunk(s + 1), p, r));
    }
    c.push_back(spec::ring_shift_spec(Pass::backward, "dk,dv", "cp", Elem::acc, chunk(s),
                                      chunk(s + 1), p, r));
  }
  return c;
}

// The core's collective buffers on cp rank r (`row` as core_calls'), the moments in the order
// the code reaches them.
//   all_gather  forward: K received, K reordered into sequence order, then V the same (the
//               received K freed first); backward: the same gathers, then the full dK and dV in
//               acc_t<T> and their per-rank reorderings that are reduce_scattered
//   ring        at step s the chunk of rank src(s) = (r − s) mod p is held; forward the held
//               chunk and the one received for the next step; backward the same shifts and
//               beside them the dK/dV chunk accumulated and the one received (acc_t<T>)
spec::RankBuffers core_buffers(const ContextParallelConfig& cc, std::size_t batch, std::size_t row,
                               int p, int r) {
  using spec::BufferSpec;
  spec::RankBuffers b;
  if (cc.algorithm == CpAlgorithm::all_gather) {
    const std::size_t n = batch * cc.seq_len * row;
    auto gathered = [&](const char* name) {
      return BufferSpec{name, Elem::value, n, "cp", Collective::all_gather};
    };
    auto grad = [&](const char* name) {
      return BufferSpec{name, Elem::acc, n, "cp", Collective::reduce_scatter};
    };
    const auto k_recv = gathered("all_gathered K (received)");
    const auto k_seq = gathered("all_gathered K (sequence order)");
    const auto v_recv = gathered("all_gathered V (received)");
    const auto v_seq = gathered("all_gathered V (sequence order)");
    b.forward = {{k_recv}, {k_recv, k_seq}, {k_seq, v_recv}, {k_seq, v_recv, v_seq}};
    b.backward = b.forward;
    const auto dk = grad("full dK [b, seq, g, d] (acc)");
    const auto dv = grad("full dV [b, seq, g, d] (acc)");
    const auto dk_ranks = grad("dK by rank (reduce_scatter input, acc)");
    const auto dv_ranks = grad("dV by rank (reduce_scatter input, acc)");
    b.backward.push_back({k_seq, v_seq, dk});
    b.backward.push_back({k_seq, v_seq, dk, dv});
    b.backward.push_back({k_seq, v_seq, dk, dv, dk_ranks});
    b.backward.push_back({k_seq, v_seq, dk, dv, dk_ranks, dv_ranks});
    return b;
  }
  const auto lens = cp_lengths(cc, p);
  auto src = [&](int s) { return wrap_rank(r - s, p); };
  auto chunk = [&](int s) { return 2 * batch * lens[static_cast<std::size_t>(src(s))] * row; };
  auto kv = [&](int s, const char* what) {
    return BufferSpec{"K/V chunk of rank " + std::to_string(src(s)) + " (" + what + ")",
                      Elem::value, chunk(s), "cp", Collective::ring_shift};
  };
  auto grad = [&](int s, const char* what) {
    return BufferSpec{"dK/dV chunk of rank " + std::to_string(src(s)) + " (" + what + ", acc)",
                      Elem::acc, chunk(s), "cp", Collective::ring_shift};
  };
  b.forward = {{kv(0, "held")}};
  for (int s = 0; s + 1 < p; ++s) b.forward.push_back({kv(s, "held"), kv(s + 1, "received")});
  b.backward = {{kv(0, "held")}, {kv(0, "held"), grad(0, "accumulated")}};
  for (int s = 0; s < p && p > 1; ++s) {
    int held = s;
    if (s + 1 < p) {
      b.backward.push_back({kv(s, "held"), grad(s, "accumulated"), kv(s + 1, "received")});
      held = s + 1;
    }
    b.backward.push_back({kv(held, "held"), grad(s, "accumulated"), grad(s + 1, "received")});
  }
  return b;
}

// The layer's collective buffers on the rank with heads `a` at cp rank `cpr`, whose cp piece
// has `len` positions. Under sequence parallelism [batch·len, hidden] buffers of T, one at a
// time (each freed before the next is taken): forward the all_gathered x (while the QKV
// projection reads it), then the core's, then the output projection's full partial y; backward
// the all_gathered dy, the core's, x gathered again (while the QKV backward reads it), the full
// dx; then the kv group's pack of its gradients (g < tp) and the cp group's pack of every
// parameter gradient but dbo (cp > 1; dbo is all_reduced in place on its own).
spec::RankBuffers layer_buffers(const HeadParallelConfig& cfg, const HeadAssignment& a,
                                std::size_t batch, int cp, int cpr, std::size_t len) {
  const std::size_t d = cfg.attention.head_dim, hidden = cfg.hidden;
  const std::size_t hq = a.q_count * d, hkv = a.kv_count * d;
  const std::string rows = " [" + std::to_string(batch * len) + ", " + std::to_string(hidden) + "]";
  auto sp = [&](const std::string& name, Collective op) {
    return cfg.sequence_parallel
               ? spec::Moment{{name + rows, Elem::value, batch * len * hidden, "tp", op}}
               : spec::Moment{};
  };
  spec::RankBuffers b, core;
  if (a.q_count > 0 && cfg.context_parallel) {
    core = core_buffers(*cfg.context_parallel, batch, hkv, cp, cpr);
  }
  spec::add_moment(b.forward, sp("all_gathered x", Collective::all_gather));
  spec::append_moments(b.forward, core.forward);
  spec::add_moment(b.forward,
                   sp("full partial y (reduce_scatter input)", Collective::reduce_scatter));
  spec::add_moment(b.backward, sp("all_gathered dy", Collective::all_gather));
  spec::append_moments(b.backward, core.backward);
  spec::add_moment(b.backward, sp("x all_gathered again", Collective::all_gather));
  spec::add_moment(b.backward, sp("full dx (reduce_scatter input)", Collective::reduce_scatter));
  const std::size_t bias = cfg.has_bias ? 1 : 0;
  if (a.kv_replicas > 1) {
    b.backward.push_back({{"kv group pack [dWk | dbk | dWv | dbv]", Elem::value,
                           2 * hkv * (hidden + bias), "kv_group", Collective::all_reduce}});
  }
  if (cfg.context_parallel && cp > 1) {
    b.backward.push_back(
        {{"cp pack of every parameter gradient but dbo", Elem::value,
          (hq + 2 * hkv) * (hidden + bias) + hidden * hq, "cp", Collective::all_reduce}});
  }
  return b;
}

Placement by_lengths(std::size_t dim, const std::vector<std::size_t>& lens) {
  return Placement::shard(dim, SplitPolicy::explicit_sizes(lens));
}

std::string zigzag_note(const ContextParallelConfig& cc) {
  return cc.layout == CpLayout::zigzag
             ? "zigzag: cp rank j holds chunks j and 2·cp − 1 − j of the sequence's 2·cp"
             : "";
}

}  // namespace

namespace {

std::vector<std::size_t> layout_lengths(CpLayout layout, const SplitPolicy& policy, std::size_t len,
                                        int cp) {
  if (layout == CpLayout::contiguous) return split_sizes(policy, len, cp);
  const auto chunks = split_sizes(policy, len, 2 * cp);
  std::vector<std::size_t> lens(static_cast<std::size_t>(cp));
  for (std::size_t j = 0; j < lens.size(); ++j) lens[j] = chunks[j] + chunks[chunks.size() - 1 - j];
  return lens;
}

}  // namespace

std::vector<std::size_t> cp_lengths(const ContextParallelConfig& cc, int cp) {
  return layout_lengths(cc.layout, cc.split, cc.seq_len, cp);
}

std::vector<std::size_t> cp_query_lengths(const ContextParallelConfig& cc, int cp) {
  if (cc.q_seq_len == 0) return cp_lengths(cc, cp);
  return layout_lengths(cc.layout, cc.q_split, cc.q_seq_len, cp);
}

std::string to_json(const AttentionMask& m) {
  return spec::fields_object(m).field("allowed_shape", m.allowed.shape()).str();
}

spec::OpSpec context_parallel_attention_spec(const AttentionConfig& cfg,
                                             const ContextParallelConfig& cc, std::size_t batch,
                                             int cp) {
  const std::size_t L = cc.seq_len, h = cfg.q_heads, g = cfg.kv_heads, d = cfg.head_dim;
  const std::size_t Lq = cc.q_seq_len == 0 ? L : cc.q_seq_len;
  auto s =
      spec::op_spec("context_parallel_attention", "attention",
                    spec::JsonObject().raw("attention", to_json(cfg)).raw("cp", to_json(cc)).str(),
                    {{"batch", batch},
                     {"seq_len", L},
                     {"q_seq_len", Lq},
                     {"q_heads", h},
                     {"kv_heads", g},
                     {"head_dim", d}},
                    {{"cp", static_cast<std::size_t>(cp)}}, {"q", "k", "v", "out", "lse"});
  const std::vector<Placement> seq{by_lengths(1, cp_lengths(cc, cp))};
  const std::vector<Placement> qseq{by_lengths(1, cp_query_lengths(cc, cp))};
  const std::vector<Placement> lse{by_lengths(2, cp_query_lengths(cc, cp))};
  const std::string note = zigzag_note(cc);
  s.tensors = {spec::tensor("q", Role::input, {batch, Lq, h, d}, qseq, note),
               spec::tensor("k", Role::input, {batch, L, g, d}, seq, note),
               spec::tensor("v", Role::input, {batch, L, g, d}, seq, note),
               spec::tensor("out", Role::output, {batch, Lq, h, d}, qseq, note),
               spec::tensor_of(Elem::acc, "lse", Role::output, {batch, h, Lq}, lse, note),
               spec::tensor("dout", Role::grad_output, {batch, Lq, h, d}, qseq, note),
               spec::tensor("dq", Role::grad_input, {batch, Lq, h, d}, qseq, note),
               spec::tensor("dk", Role::grad_input, {batch, L, g, d}, seq, note),
               spec::tensor("dv", Role::grad_input, {batch, L, g, d}, seq, note)};
  for (int r = 0; r < cp; ++r) {
    s.calls.push_back(core_calls(cc, batch, g * d, cp, r));
    s.buffers.push_back(core_buffers(cc, batch, g * d, cp, r));
  }
  return s;
}

spec::OpSpec attention_layer_spec(const HeadParallelConfig& cfg, std::size_t batch, int cp,
                                  int tp) {
  const std::size_t h = cfg.attention.q_heads, g = cfg.attention.kv_heads;
  const std::size_t d = cfg.attention.head_dim, hidden = cfg.hidden;
  const bool has_cp = cfg.context_parallel.has_value();
  if (!has_cp) cp = 1;
  const std::size_t L = has_cp ? cfg.context_parallel->seq_len : cfg.attention.mask.q_len;
  const auto lens = has_cp ? cp_lengths(*cfg.context_parallel, cp) : std::vector<std::size_t>{L};
  auto s =
      spec::op_spec("attention_layer", "attention", to_json(cfg),
                    {{"batch", batch}, {"seq_len", L}, {"hidden", hidden}},
                    {{"cp", static_cast<std::size_t>(cp)}, {"tp", static_cast<std::size_t>(tp)}},
                    {"x", "q", "k", "v", "out", "lse"});
  // The heads of each tp rank: query heads shard wq, bq, wo; kv heads shard wk, bk, wv, bv
  // unless the kv group shares them (then each rank's rows are listed per rank).
  std::vector<HeadAssignment> heads;
  heads.reserve(static_cast<std::size_t>(tp));
  for (int t = 0; t < tp; ++t) heads.push_back(head_assignment(cfg, tp, t));
  std::vector<std::size_t> q_rows, kv_rows, q_heads, kv_heads;
  for (const auto& a : heads) {
    q_rows.push_back(a.q_count * d);
    kv_rows.push_back(a.kv_count * d);
    q_heads.push_back(a.q_count);
    kv_heads.push_back(a.kv_count);
  }
  const auto rep = Placement::replicate();
  const auto seq = by_lengths(1, lens);
  const bool kv_shared = heads.front().kv_replicas > 1;
  const std::string note = has_cp ? zigzag_note(*cfg.context_parallel) : "";
  const std::string kv_note =
      kv_shared ? "each kv head is held whole by the kv_replicas tp ranks sharing it "
                  "(head_assignment): the per-rank rows are kv_count·d"
                : "";
  auto add = [&](const char* n, Role role, std::vector<std::size_t> shape,
                 std::vector<Placement> pl, std::string layout = "") {
    s.tensors.push_back(spec::tensor(n, role, std::move(shape), std::move(pl), std::move(layout)));
  };
  // A kv tensor shared by the kv group: each world rank's rows kv_count·d (then `cols`).
  auto kv_locals = [&](std::vector<std::size_t> cols) {
    std::vector<std::vector<std::size_t>> out;
    for (int r = 0; r < cp * tp; ++r) {
      std::vector<std::size_t> shape{heads[static_cast<std::size_t>(r % tp)].kv_count * d};
      shape.insert(shape.end(), cols.begin(), cols.end());
      out.push_back(std::move(shape));
    }
    return out;
  };
  const auto q0 = by_lengths(0, q_rows), q1 = by_lengths(1, q_rows);
  const auto kv0 = kv_shared ? rep : by_lengths(0, kv_rows);
  add("x", Role::input, {batch, L, hidden}, {seq, rep}, note);
  add("wq", Role::parameter, {h * d, hidden}, {rep, q0});
  add("wk", Role::parameter, {g * d, hidden}, {rep, kv0}, kv_note);
  add("wv", Role::parameter, {g * d, hidden}, {rep, kv0}, kv_note);
  if (kv_shared)
    s.tensors[s.tensors.size() - 2].local_shapes = s.tensors.back().local_shapes =
        kv_locals({hidden});
  add("wo", Role::parameter, {hidden, h * d}, {rep, q1});
  if (cfg.has_bias) {
    add("bq", Role::parameter, {h * d}, {rep, q0});
    add("bk", Role::parameter, {g * d}, {rep, kv0}, kv_note);
    add("bv", Role::parameter, {g * d}, {rep, kv0}, kv_note);
    if (kv_shared)
      s.tensors[s.tensors.size() - 2].local_shapes = s.tensors.back().local_shapes = kv_locals({});
    add("bo", Role::parameter, {hidden}, {rep, rep});
  }
  add("y", Role::output, {batch, L, hidden}, {seq, rep}, note);
  add("dy", Role::grad_output, {batch, L, hidden}, {seq, rep}, note);
  add("dx", Role::grad_input, {batch, L, hidden}, {seq, rep}, note);
  // Under sequence parallelism each tp rank holds token rows of its cp piece flattened.
  std::vector<std::vector<std::size_t>> sp_rows(static_cast<std::size_t>(cp));
  if (cfg.sequence_parallel) {
    for (int j = 0; j < cp; ++j) {
      sp_rows[static_cast<std::size_t>(j)] =
          split_sizes(cfg.token_split, batch * lens[static_cast<std::size_t>(j)], tp);
    }
    for (const char* n : {"x", "y", "dy", "dx"}) {
      auto& t = *std::find_if(s.tensors.begin(), s.tensors.end(),
                              [&](const spec::TensorSpec& x) { return x.name == n; });
      t.layout =
          "sequence_parallel: tp rank k holds rows token_split(batch·L_j)[k] of its cp "
          "piece flattened [batch·L_j, hidden]" +
          (note.empty() ? std::string() : "; " + note);
      for (int r = 0; r < cp * tp; ++r) {
        t.local_shapes.push_back(
            {sp_rows[static_cast<std::size_t>(r / tp)][static_cast<std::size_t>(r % tp)], hidden});
      }
    }
  }
  // Saved for the backward: the rank's heads of q, k, v, out [batch, L_r, heads_r, d] and lse
  // [batch, h_r, L_r] (acc_t<T>).
  const auto q2 = by_lengths(2, q_heads), q1h = by_lengths(1, q_heads);
  const auto kv2 = kv_shared ? rep : by_lengths(2, kv_heads);
  add("q", Role::saved, {batch, L, h, d}, {seq, q2}, note);
  add("k", Role::saved, {batch, L, g, d}, {seq, kv2}, kv_note);
  add("v", Role::saved, {batch, L, g, d}, {seq, kv2}, kv_note);
  if (kv_shared) {
    for (auto* t : {&s.tensors[s.tensors.size() - 2], &s.tensors.back()}) {
      t->local_shapes.clear();
      for (int r = 0; r < cp * tp; ++r) {
        t->local_shapes.push_back({batch, lens[static_cast<std::size_t>(r / tp)],
                                   heads[static_cast<std::size_t>(r % tp)].kv_count, d});
      }
    }
  }
  add("out", Role::saved, {batch, L, h, d}, {seq, q2}, note);
  s.tensors.push_back(spec::tensor_of(Elem::acc, "lse", Role::saved, {batch, h, L},
                                      {by_lengths(2, lens), q1h}, note));
  for (const char* w : {"wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"}) {
    if (!cfg.has_bias && w[0] == 'b') continue;
    auto grad = s.tensor(w);
    grad.name = std::string("d") + w;
    grad.role = Role::grad_input;
    s.tensors.push_back(std::move(grad));
  }
  const auto algo = cfg.reduce_algorithm;
  for (int r = 0; r < cp * tp; ++r) {
    const int cpr = r / tp, tpr = r % tp;
    const HeadAssignment& a = heads[static_cast<std::size_t>(tpr)];
    const std::size_t n = batch * lens[static_cast<std::size_t>(cpr)] * hidden;
    spec::RankCalls core;
    if (a.q_count > 0 && has_cp) {
      core = core_calls(*cfg.context_parallel, batch, a.kv_count * d, cp, cpr);
    }
    spec::RankCalls c;
    const bool sp = cfg.sequence_parallel;
    std::vector<std::size_t> rows_times_hidden;
    for (const std::size_t k : sp_rows[static_cast<std::size_t>(cpr)]) {
      rows_times_hidden.push_back(k * hidden);
    }
    if (sp) {
      c.push_back(
          spec::all_gather_spec(Pass::forward, "x", "tp", Elem::value, rows_times_hidden, tpr));
    }
    for (const auto& call : core) {
      if (call.pass == Pass::forward) c.push_back(call);
    }
    c.push_back(
        sp ? spec::reduce_scatter_spec(Pass::forward, "y", "tp", Elem::value, rows_times_hidden,
                                       tpr, algo)
           : spec::all_reduce_spec(Pass::forward, "y", "tp", Elem::value, n, tp, tpr, algo));
    if (sp) {
      c.push_back(
          spec::all_gather_spec(Pass::backward, "dy", "tp", Elem::value, rows_times_hidden, tpr));
    }
    for (const auto& call : core) {
      if (call.pass == Pass::backward) c.push_back(call);
    }
    if (sp) {
      c.push_back(
          spec::all_gather_spec(Pass::backward, "x", "tp", Elem::value, rows_times_hidden, tpr));
    }
    c.push_back(
        sp ? spec::reduce_scatter_spec(Pass::backward, "dx", "tp", Elem::value, rows_times_hidden,
                                       tpr, algo)
           : spec::all_reduce_spec(Pass::backward, "dx", "tp", Elem::value, n, tp, tpr, algo));
    const std::size_t hq = a.q_count * d, hkv = a.kv_count * d;
    const std::size_t bias = cfg.has_bias ? 1 : 0;
    if (a.kv_replicas > 1) {
      c.push_back(spec::all_reduce_spec(
          Pass::backward, cfg.has_bias ? "dwk,dbk,dwv,dbv" : "dwk,dwv", "kv_group", Elem::value,
          2 * hkv * (hidden + bias), a.kv_replicas, tpr - a.kv_group_first, algo));
    }
    if (has_cp && cp > 1) {
      // The rank's shards packed; dbo (replicated over tp) alone, so that its layout, and the
      // ring's summation order, is the same on every tp rank whatever its heads.
      const std::size_t params = (hq + 2 * hkv) * (hidden + bias) + hidden * hq;
      c.push_back(spec::all_reduce_spec(
          Pass::backward, cfg.has_bias ? "dwq,dbq,dwk,dbk,dwv,dbv,dwo" : "dwq,dwk,dwv,dwo", "cp",
          Elem::value, params, cp, cpr, algo));
      if (cfg.has_bias) {
        c.push_back(
            spec::all_reduce_spec(Pass::backward, "dbo", "cp", Elem::value, hidden, cp, cpr, algo));
      }
    }
    s.calls.push_back(std::move(c));
    s.buffers.push_back(layer_buffers(cfg, a, batch, cp, cpr, lens[static_cast<std::size_t>(cpr)]));
  }
  return s;
}

spec::OpSpec attention_layer_spec_grads_left_to_caller(const HeadParallelConfig& cfg,
                                                       std::size_t batch, int cp, int tp) {
  auto s = attention_layer_spec(cfg, batch, cp, tp);
  // all_reduce_layer_grads_over_cp's calls and its pack: the only all_reduces over cp.
  const auto over_cp = [](const auto& x) {
    return x.group == "cp" && x.op == Collective::all_reduce;
  };
  for (auto& calls : s.calls) std::erase_if(calls, over_cp);
  for (auto& b : s.buffers) {
    for (auto& m : b.backward) std::erase_if(m, over_cp);
    std::erase_if(b.backward, [](const spec::Moment& m) { return m.empty(); });
  }
  return s;
}

std::vector<spec::OpSpec> attention_example_specs() {
  AttentionConfig att;
  att.q_heads = 4;
  att.kv_heads = 2;
  att.head_dim = 2;
  att.mask.kind = MaskKind::causal;
  att.mask.q_len = att.mask.k_len = 7;
  ContextParallelConfig cc;
  cc.seq_len = 7;
  cc.layout = CpLayout::zigzag;
  HeadParallelConfig layer;
  layer.attention = att;
  layer.hidden = 6;
  layer.context_parallel = cc;
  return {context_parallel_attention_spec(att, cc, 1, 2), attention_layer_spec(layer, 1, 2, 4)};
}

}  // namespace shardcheck
