#include "suites/attention/attention_run.hpp"

#include "layout/device_mesh.hpp"
#include "runtime/launcher.hpp"

#include <numeric>

namespace shardcheck::check {

std::vector<std::size_t> positions_of(const AttentionCase& c, int cp_rank) {
  if (c.layer.context_parallel) return cp_positions(c.context(), c.cp, cp_rank);
  std::vector<std::size_t> all(c.len());
  std::iota(all.begin(), all.end(), std::size_t{0});
  return all;
}

template <class T>
AttentionRun<T> run_attention(const AttentionImplementation& impl, const AttentionCase& c,
                              const AttentionData<T>& d) {
  AttentionRun<T> out;
  const int p = c.world();
  const auto n = static_cast<std::size_t>(p);
  const bool core = c.op == AttentionOp::context_parallel;
  std::vector<CoreRankInputs<T>> core_in(core ? n : 0);
  std::vector<LayerRankInputs<T>> layer_in(core ? 0 : n);
  for (int r = 0; r < p; ++r) {
    const auto pos = positions_of(c, cp_coord(c, r));
    const auto i = static_cast<std::size_t>(r);
    if (core) {
      core_in[i] = {take_positions(d.q, pos), take_positions(d.k, pos), take_positions(d.v, pos),
                    take_positions(d.dout, pos)};
    } else {
      layer_in[i] = {take_positions(d.x, pos), take_positions(d.dy, pos), d.w};
    }
  }
  if (core) {
    out.core.resize(n);
  } else {
    out.layer.resize(n);
  }
  try {
    auto result = run(p, [&](Communicator& world) {
      const auto r = static_cast<std::size_t>(world.rank());
      if (core) {
        out.core[r] = impl.core(world, c.attention(), c.context(), core_in[r]);
        return;
      }
      MeshGroups mesh(world, DeviceMesh({{"cp", c.cp}, {"tp", c.tp}}));
      out.layer[r] = impl.layer(mesh.along("tp"), mesh.along("cp"), c.layer, layer_in[r]);
    });
    out.ledgers = std::move(result.ledgers);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

namespace {

void core_traffic(const AttentionCase& c, int cp_rank, std::size_t heads_kv, DType t, DType a,
                  std::vector<DeclaredCall>& calls) {
  const int p = c.cp;
  const std::size_t row = c.batch * heads_kv * c.attention().head_dim;
  if (c.context().algorithm == CpAlgorithm::all_gather) {
    const std::uint64_t kv = c.len() * row;
    for (int i = 0; i < 4; ++i) calls.push_back({Collective::all_gather, t, kv});
    calls.push_back({Collective::reduce_scatter, a, kv});
    calls.push_back({Collective::reduce_scatter, a, kv});
    return;
  }
  if (p == 1) return;
  auto chunk = [&](int step) { return 2 * row * positions_of(c, (cp_rank - step + p) % p).size(); };
  for (int s = 0; s + 1 < p; ++s) {
    calls.push_back({Collective::ring_shift, t, chunk(s)});  // forward K/V
    calls.push_back({Collective::ring_shift, t, chunk(s)});  // backward K/V
  }
  for (int s = 0; s < p; ++s) calls.push_back({Collective::ring_shift, a, chunk(s)});  // dK/dV
}

}  // namespace

std::vector<DeclaredCall> attention_declared_traffic(const AttentionCase& c, int world_rank) {
  std::vector<DeclaredCall> calls;
  const DType t = c.dtype, a = acc_dtype(t);
  const int cpr = cp_coord(c, world_rank);
  if (c.op == AttentionOp::context_parallel) {
    core_traffic(c, cpr, c.attention().kv_heads, t, a, calls);
    return calls;
  }
  const auto& L = c.layer;
  const HeadAssignment h = head_assignment(L, c.tp, tp_coord(c, world_rank));
  const std::size_t d = L.attention.head_dim;
  const std::uint64_t act = c.batch * positions_of(c, cpr).size() * L.hidden;
  calls.push_back({Collective::all_reduce, t, act});  // y
  calls.push_back({Collective::all_reduce, t, act});  // dx
  const std::uint64_t bias = L.has_bias ? 1 : 0;
  if (h.kv_replicas > 1) {
    calls.push_back({Collective::all_reduce, t, 2 * h.kv_count * d * (L.hidden + bias)});
  }
  if (L.context_parallel && h.q_count > 0) core_traffic(c, cpr, h.kv_count, t, a, calls);
  if (L.context_parallel && c.cp > 1) {
    const std::uint64_t params =
        (h.q_count + 2 * h.kv_count) * d * (L.hidden + bias) + L.hidden * h.q_count * d;
    calls.push_back({Collective::all_reduce, t, params});  // the rank's shards, packed
    if (L.has_bias) calls.push_back({Collective::all_reduce, t, L.hidden});  // dbo alone
  }
  return calls;
}

#define SHARDCHECK_INSTANTIATE(T)                                                                 \
  template AttentionRun<T> run_attention<T>(const AttentionImplementation&, const AttentionCase&, \
                                            const AttentionData<T>&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck::check
