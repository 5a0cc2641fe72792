// Every result of a model step, read back from the ranks and compared with the reference: the
// parameters' gradients and new values by the layout of shard_model_params (each rank's piece
// mapped to the dense tensor's elements by sharding a model of element indices the same way),
// the input gradient by the micro-batches' token rows, the loss, the global norm and the clip
// coefficient. Every copy of a replicated element must carry the same bits.
#include "budget/model_traffic.hpp"
#include "engine/instantiate.hpp"
#include "suites/model/model_case.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <iterator>
#include <map>
#include <tuple>

namespace shardcheck::check {
namespace {

using R = reference::hp;

// The dense tensor's name of a rank's tensor (its stage's layer index made global; a tied
// embedding's output copy is the embedding).
std::string global_name(const ModelCase& c, const ModelCoordinates& m, const std::string& n) {
  if (n == "output" && c.cfg.tied_embedding) return "embedding";
  if (n.rfind("layers.", 0) != 0) return n;
  const auto dot = n.find('.', 7);
  const std::size_t l = std::stoul(n.substr(7, dot - 7)) + m.layers.offset;
  return "layers." + std::to_string(l) + n.substr(dot);
}

// The object representations compared as bytes (NaN payloads and the sign of zero count).
template <class V>
bool same_bits(const V& a, const V& b) {
  using Bytes = std::array<unsigned char, sizeof(V)>;
  return std::bit_cast<Bytes>(a) == std::bit_cast<Bytes>(b);
}

// A dense tensor put together from the ranks' pieces: its value, which rank first gave each
// element, and the ranks whose copy of an element differs from the first.
template <class V>
struct Gathered {
  Tensor<V> value;
  std::vector<int> owner;  // -1: no rank gave the element
  std::vector<int> divergent;
};

template <class V>
void put(Gathered<V>& g, std::size_t at, const V& v, int rank) {
  if (g.owner[at] < 0) {
    g.owner[at] = rank;
    g.value[at] = v;
  } else if (!same_bits(g.value[at], v) &&
             std::find(g.divergent.begin(), g.divergent.end(), rank) == g.divergent.end()) {
    g.divergent.push_back(rank);
  }
}

template <class V>
TensorCheck check_gathered(const std::string& name, const Gathered<V>& g, const Tensor<R>& exact,
                           const Tensor<R>& bound, int world) {
  TensorCheck t =
      check_tensor(name, g.value, exact, bound, Placement::replicate(), world, g.divergent);
  if (t.problem.empty()) {
    for (std::size_t i = 0; i < g.owner.size(); ++i) {
      if (g.owner[i] < 0) {
        t.problem = "no rank returned element " + std::to_string(i) + " of " + name + " " +
                    format_shape(exact.shape()) + " (a piece of the wrong shape or missing)";
        break;
      }
    }
  }
  if (!exact.empty() && t.problem.empty()) {
    std::size_t flat = 0;
    for (std::size_t k = 0; k < t.worst_index.size(); ++k) {
      flat = flat * exact.dim(k) + t.worst_index[k];
    }
    t.worst_rank = g.owner[flat];
  }
  return t;
}

// Every parameter tensor's gradient (acc_t<T>) and new value (T), gathered from the ranks.
template <class T>
void check_params(CaseVerdict& v, const ModelCase& c, const ModelRun<T>& run,
                  const ModelExpected& e) {
  using A = acc_t<T>;
  // A model of element indices, sharded as the parameters are.
  ModelParams<double> index;
  index.layers.resize(c.cfg.layers);
  auto exact_grads = e.step.grads;
  for_each_param(index, exact_grads, [](const std::string&, Tensor<double>& a, const Tensor<R>& b) {
    if (b.ndim() == 0) return;
    a = Tensor<double>(b.shape());
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>(i);
  });
  if (c.cfg.tied_embedding) index.output = Tensor<double>();
  std::map<std::string, Gathered<A>> grads;
  std::map<std::string, Gathered<T>> params;
  auto names = e.step.grads;
  for_each_param(names, names, [&](const std::string& n, const Tensor<R>& t, auto&) {
    if (t.ndim() == 0) return;
    grads[n] = {Tensor<A>(t.shape()), std::vector<int>(t.size(), -1), {}};
    params[n] = {Tensor<T>(t.shape()), std::vector<int>(t.size(), -1), {}};
  });
  for (int r = 0; r < c.world; ++r) {
    const auto& out = run.outputs[static_cast<std::size_t>(r)];
    const ModelCoordinates m = model_coordinates(c.cfg, c.par, r);
    ModelParams<double> map = shard_model_params(c.cfg, c.par, index, r);
    auto got_g = out.grads;
    auto got_p = out.params;
    auto check_piece = [&](const std::string& n, const auto& piece, const Tensor<double>& idx,
                           auto& into, const char* what) {
      if (idx.ndim() == 0) return;
      const std::string g = global_name(c, m, n);
      if (piece.shape() != idx.shape()) {
        std::string m = "rank " + std::to_string(r) + " returned ";
        m.append(what).append(" ").append(n).append(" as ").append(format_shape(piece.shape()));
        m.append(" but holds ").append(format_shape(idx.shape())).append(" of ").append(g);
        v.failures.push_back(m + " (shard_model_params' layout)");
        return;
      }
      auto& dst = into.at(g);
      for (std::size_t i = 0; i < piece.size(); ++i) {
        put(dst, static_cast<std::size_t>(idx[i]), piece[i], r);
      }
    };
    if (got_g.layers.size() != map.layers.size() || got_p.layers.size() != map.layers.size()) {
      v.failures.push_back("rank " + std::to_string(r) + " returned " +
                           std::to_string(got_g.layers.size()) + " layers of gradients and " +
                           std::to_string(got_p.layers.size()) + " of parameters but holds " +
                           std::to_string(map.layers.size()));
      continue;
    }
    for_each_param(got_g, map,
                   [&](const std::string& n, const Tensor<A>& a, const Tensor<double>& i) {
                     check_piece(n, a, i, grads, "the gradient of");
                   });
    for_each_param(got_p, map,
                   [&](const std::string& n, const Tensor<T>& a, const Tensor<double>& i) {
                     check_piece(n, a, i, params, "the new value of");
                   });
  }
  auto eg = e.step.grads, eb = e.step.grads_bound, pv = e.step.params, pb = e.step.params_bound;
  for_each_param(eg, eb, [&](const std::string& n, const Tensor<R>& x, const Tensor<R>& b) {
    if (x.ndim() > 0) v.tensors.push_back(check_gathered("d" + n, grads.at(n), x, b, c.world));
  });
  for_each_param(pv, pb, [&](const std::string& n, const Tensor<R>& x, const Tensor<R>& b) {
    if (x.ndim() > 0) v.tensors.push_back(check_gathered("new." + n, params.at(n), x, b, c.world));
  });
}

// The first stage's ∂(Σ loss)/∂x_0, by the micro-batches' token rows.
template <class T>
void check_input_grad(CaseVerdict& v, const ModelCase& c, const ModelRun<T>& run,
                      const ModelExpected& e) {
  const std::size_t H = c.cfg.hidden, n = c.sequences * c.seq_len;
  Gathered<T> g{Tensor<T>(Shape{n, H}), std::vector<int>(n * H, -1), {}};
  for (int r = 0; r < c.world; ++r) {
    const ModelCoordinates m = model_coordinates(c.cfg, c.par, r);
    if (!m.first_stage()) continue;
    const auto& got = run.outputs[static_cast<std::size_t>(r)].input_grads;
    const Piece seqs = dp_sequences(c.par, c.sequences, m.dp);
    const auto mbs = micro_batch_pieces(c.par, seqs.size);
    const auto pos = model_cp_positions(c.par, c.seq_len, m.cp);
    if (got.size() != mbs.size()) {
      v.failures.push_back("rank " + std::to_string(r) + " returned " + std::to_string(got.size()) +
                           " input gradients for its " + std::to_string(mbs.size()) +
                           " micro-batches");
      continue;
    }
    for (std::size_t k = 0; k < mbs.size(); ++k) {
      std::vector<std::size_t> rows;
      for (std::size_t s = 0; s < mbs[k].size; ++s) {
        for (const std::size_t p : pos)
          rows.push_back((seqs.offset + mbs[k].offset + s) * c.seq_len + p);
      }
      Piece mine{0, rows.size()};
      if (c.par.sequence_parallel) {
        mine = split(c.par.token_split, rows.size(), c.par.tp)[static_cast<std::size_t>(m.tp)];
      }
      if (got[k].shape() != Shape({mine.size, H})) {
        v.failures.push_back("rank " + std::to_string(r) + " returned the input gradient of " +
                             "micro-batch " + std::to_string(k) + " as " +
                             format_shape(got[k].shape()) + " but holds [" +
                             std::to_string(mine.size) + ", " + std::to_string(H) + "]");
        continue;
      }
      for (std::size_t i = 0; i < mine.size; ++i) {
        for (std::size_t j = 0; j < H; ++j) put(g, rows[mine.offset + i] * H + j, got[k](i, j), r);
      }
    }
  }
  v.tensors.push_back(
      check_gathered("input_grad", g, e.step.input_grad.v, e.step.input_grad.e, c.world));
}

// One value every rank of `holds` returns (the loss on the last stage, the norm and the coef
// everywhere): the first holder's against the reference, every other's bit for bit.
template <class T, class Get>
void check_scalar(CaseVerdict& v, const ModelCase& c, const ModelRun<T>& run, const char* name,
                  const reference::Approx<R>& exact, bool last_stage_only, Get get) {
  using A = acc_t<T>;
  Gathered<A> g{Tensor<A>(Shape{1}), std::vector<int>(1, -1), {}};
  for (int r = 0; r < c.world; ++r) {
    if (last_stage_only && !model_coordinates(c.cfg, c.par, r).last_stage(c.par)) continue;
    const std::optional<A> x = get(run.outputs[static_cast<std::size_t>(r)]);
    if (!x) {
      v.failures.push_back("rank " + std::to_string(r) + " returned no " + name);
      continue;
    }
    put(g, 0, *x, r);
  }
  v.tensors.push_back(check_gathered(name, g, exact.v, exact.e, c.world));
}

// The world ranks of the group a spec call names, for rank r (ops/model/model_spec.hpp's group
// names and the ops' own: tp, cp, kv_group, pp, dp_cp, model_parallel, embedding).
std::vector<int> group_members(const ModelCase& c, const std::string& group, int r) {
  const DeviceMesh mesh = model_mesh(c.par);
  const std::vector<int> at = mesh.coordinates(r);
  std::vector<int> out;
  auto with = [&](int pp, int dp, int cp, int tp) {
    out.push_back(mesh.rank_of({pp, dp, cp, tp}));
  };
  if (group == "tp") {
    for (int t = 0; t < c.par.tp; ++t) with(at[0], at[1], at[2], t);
  } else if (group == "cp") {
    for (int k = 0; k < c.par.cp; ++k) with(at[0], at[1], k, at[3]);
  } else if (group == "pp") {
    for (int p = 0; p < c.par.pp; ++p) with(p, at[1], at[2], at[3]);
  } else if (group == "dp_cp") {
    for (int d = 0; d < c.par.dp; ++d) {
      for (int k = 0; k < c.par.cp; ++k) with(at[0], d, k, at[3]);
    }
  } else if (group == "model_parallel") {
    for (int p = 0; p < c.par.pp; ++p) {
      for (int t = 0; t < c.par.tp; ++t) with(p, at[1], at[2], t);
    }
  } else if (group == "embedding") {
    with(0, at[1], at[2], at[3]);
    with(c.par.pp - 1, at[1], at[2], at[3]);
  } else if (group == "kv_group") {
    const HeadAssignment a =
        head_assignment(model_attention_config(c.cfg, c.par, 0, 1), c.par.tp, at[3]);
    for (int t = a.kv_group_first; t < a.kv_group_first + a.kv_replicas; ++t) {
      with(at[0], at[1], at[2], t);
    }
  }
  return out;
}

// One collective as the ledger shows it, with its group's world ranks.
struct AxisCall {
  Collective op;
  DType dtype;
  std::uint64_t count;
  std::vector<int> members;
  std::string group;  // its name, for the message (not compared: the ranks are)
  auto tie() const { return std::tie(op, dtype, count, members); }
  friend bool operator<(const AxisCall& a, const AxisCall& b) { return a.tie() < b.tie(); }
  friend bool operator==(const AxisCall& a, const AxisCall& b) { return a.tie() == b.tie(); }
};

// A ledger's group named by the first mesh group of rank r with its ranks ("ranks" if none).
std::string group_name(const ModelCase& c, const std::vector<int>& members, int r) {
  for (const char* g : {"tp", "cp", "pp", "dp_cp", "model_parallel", "embedding", "kv_group"}) {
    if (group_members(c, g, r) == members) return g;
  }
  return "ranks";
}

std::string to_text(const AxisCall& a) {
  std::string ranks;
  for (const int m : a.members) ranks += (ranks.empty() ? "" : ",") + std::to_string(m);
  return std::string(name(a.op)) + " " + std::string(name(a.dtype)) + " x" +
         std::to_string(a.count) + " over " + a.group + " {" + ranks + "}";
}

// Rank r's ledger bytes summed per mesh axis against the traffic model's
// (budget/model_traffic.hpp), the axes keyed by their ranks (two names with the same ranks, tp
// and kv_group when every tp rank shares one kv head, are one group): the same calls by the
// wrong algorithm, or bytes priced wrong, fail here.
template <class T>
void axis_bytes(CaseVerdict& v, const ModelCase& c, const ModelRun<T>& run, int r) {
  using Totals = std::map<std::vector<int>, budget::CollectiveTotals>;
  Totals model, got;
  for (const auto& [name, t] : budget::model_step_traffic(c.cfg, c.par, c.sequences, c.seq_len, r,
                                                          budget::element_bytes(c.dtype))) {
    budget::CollectiveTotals& m = model[group_members(c, name, r)];
    m.calls += t.calls;
    m.sent += t.sent;
    m.recv += t.recv;
  }
  for (const auto& e : run.ledgers[static_cast<std::size_t>(r)].entries()) {
    if (e.op == Collective::barrier) continue;
    budget::CollectiveTotals& t = got[*e.group];
    ++t.calls;
    t.sent += e.bytes_sent;
    t.recv += e.bytes_recv;
  }
  if (got == model) return;
  auto list = [&](const Totals& m) {
    std::string out;
    for (const auto& [members, t] : m) {
      out += " " + group_name(c, members, r) + ": " + std::to_string(t.calls) + " calls, sent " +
             std::to_string(t.sent) + " B, recv " + std::to_string(t.recv) + " B;";
    }
    return out;
  };
  v.failures.push_back("traffic per mesh axis: rank " + std::to_string(r) + " moved" + list(got) +
                       " the traffic model (budget/model_traffic.hpp) says" + list(model));
}

// declared_traffic per mesh axis: every rank's ledger, call by call with the group it ran on,
// against the spec's calls with their groups' ranks (a reduction over the wrong group of the
// right size passes the per-rank count check and fails this one).
template <class T>
void traffic_per_axis(CaseVerdict& v, const ModelCase& c, const ModelRun<T>& run) {
  const spec::OpSpec s = op_spec(c);
  for (int r = 0; r < c.world; ++r) {
    std::vector<AxisCall> want, got;
    for (const auto& call : s.calls[static_cast<std::size_t>(r)]) {
      want.push_back({call.op, spec::dtype_of(call.elem, c.dtype), call.elements(),
                      group_members(c, call.group, r), call.group});
    }
    for (const auto& e : run.ledgers[static_cast<std::size_t>(r)].entries()) {
      if (e.op != Collective::barrier) {
        got.push_back({e.op, e.dtype, e.count, *e.group, group_name(c, *e.group, r)});
      }
    }
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    if (got == want) {
      axis_bytes(v, c, run, r);
      if (!v.failures.empty()) return;
      continue;
    }
    std::vector<AxisCall> extra, missing;
    std::set_difference(got.begin(), got.end(), want.begin(), want.end(),
                        std::back_inserter(extra));
    std::set_difference(want.begin(), want.end(), got.begin(), got.end(),
                        std::back_inserter(missing));
    std::string text = "traffic per mesh axis: rank " + std::to_string(r);
    for (const auto& x : extra) text += " made " + to_text(x) + ";";
    for (const auto& x : missing) text += " did not make the declared " + to_text(x) + ";";
    v.failures.push_back(text + " (a collective on the wrong group, a missing or extra one)");
    return;
  }
}

}  // namespace

template <class T>
void model_traffic_per_axis(CaseVerdict& v, const ModelCase& c, const ModelData<T>&,
                            const ModelRun<T>& run) {
  traffic_per_axis(v, c, run);
}

#define SHARDCHECK_MODEL_TRAFFIC(T)                                                            \
  template void model_traffic_per_axis<T>(CaseVerdict&, const ModelCase&, const ModelData<T>&, \
                                          const ModelRun<T>&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_MODEL_TRAFFIC)
#undef SHARDCHECK_MODEL_TRAFFIC

template <class T>
void check_outputs(CaseVerdict& v, const ModelCase& c, const ModelRun<T>& run,
                   const ModelExpected& e) {
  using A = acc_t<T>;
  check_scalar<T>(v, c, run, "loss", e.step.loss, true,
                  [](const ModelStepResult<T>& o) { return o.loss; });
  check_scalar<T>(v, c, run, "grad_norm", e.step.grad_norm, false,
                  [](const ModelStepResult<T>& o) { return std::optional<A>(o.grad_norm); });
  check_scalar<T>(v, c, run, "clip_coef", e.step.clip_coef, false,
                  [](const ModelStepResult<T>& o) { return std::optional<A>(o.clip_coef); });
  check_input_grad(v, c, run, e);
  check_params(v, c, run, e);
}

SHARDCHECK_INSTANTIATE_CHECK_OUTPUTS(ModelCase, ModelRun, ModelExpected)

}  // namespace shardcheck::check
