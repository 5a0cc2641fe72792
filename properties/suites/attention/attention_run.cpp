#include "suites/attention/attention_run.hpp"

#include "engine/instantiate.hpp"
#include "engine/rank_family.hpp"
#include "engine/slicing.hpp"
#include "layout/device_mesh.hpp"

#include <numeric>

namespace shardcheck::check {

std::vector<std::size_t> positions_of(const AttentionCase& c, int cp_rank) {
  if (c.layer.context_parallel) return cp_positions(c.context(), c.cp, cp_rank);
  std::vector<std::size_t> all(c.k_len());
  std::iota(all.begin(), all.end(), std::size_t{0});
  return all;
}

std::vector<std::size_t> query_positions_of(const AttentionCase& c, int cp_rank) {
  if (c.layer.context_parallel) return cp_query_positions(c.context(), c.cp, cp_rank);
  std::vector<std::size_t> all(c.q_len());
  std::iota(all.begin(), all.end(), std::size_t{0});
  return all;
}

std::vector<std::size_t> sp_row_counts(const AttentionCase& c, int cp_rank) {
  return split_sizes(c.layer.token_split, c.batch * positions_of(c, cp_rank).size(), c.tp);
}

template <class T>
Tensor<T> layer_piece(const AttentionCase& c, const Tensor<T>& g, int world_rank) {
  Tensor<T> mine = take_positions(g, positions_of(c, cp_coord(c, world_rank)));
  if (!c.layer.sequence_parallel) return mine;
  const Shape flat{mine.dim(0) * mine.dim(1), mine.dim(2)};
  return shard(Tensor<T>(flat, std::move(mine.values())), 0, c.layer.token_split, c.tp,
               tp_coord(c, world_rank));
}

#define SHARDCHECK_LAYER_PIECE(T) \
  template Tensor<T> layer_piece(const AttentionCase&, const Tensor<T>&, int);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_LAYER_PIECE)
#undef SHARDCHECK_LAYER_PIECE

namespace {

// The library's layer (projections, head mapping, gradient sums) around impl's own core: the
// forward takes out and lse from impl.core() (given a zero dout), the backward dq, dk, dv from
// impl.core() with the real dout (its forward recomputed).
template <class T>
LayerRankOutputs<T> layer_around_core(const AttentionImplementation& impl, Communicator& tp,
                                      Communicator& cp, const HeadParallelConfig& cfg,
                                      const LayerRankInputs<T>& in) {
  ContextParallelCore<T> core;
  core.forward = [&impl](Communicator& g, const AttentionConfig& a, const ContextParallelConfig& cc,
                         const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v) {
    auto o = impl.core(g, a, cc, CoreRankInputs<T>{q, k, v, Tensor<T>(q.shape())});
    return AttentionOutput<T>{std::move(o.out), std::move(o.lse)};
  };
  core.backward = [&impl](Communicator& g, const AttentionConfig& a,
                          const ContextParallelConfig& cc, const Tensor<T>& q, const Tensor<T>& k,
                          const Tensor<T>& v, const AttentionOutput<T>&, const Tensor<T>& dout) {
    auto o = impl.core(g, a, cc, CoreRankInputs<T>{q, k, v, dout});
    return AttentionGrads<T>{std::move(o.dq), std::move(o.dk), std::move(o.dv)};
  };
  const auto w = shard_attention_weights(in.dense, cfg, head_assignment(cfg, tp.size(), tp.rank()));
  auto fwd = attention_layer(tp, cp, cfg, in.x, w, core);
  auto g = attention_layer_backward(tp, cp, cfg, in.x, w, fwd, in.dy, core);
  return {std::move(fwd.y), std::move(g)};
}

}  // namespace

template <class T>
AttentionRun<T> run_ranks(const AttentionImplementation& impl, const AttentionCase& c,
                          const AttentionData<T>& d) {
  AttentionRun<T> out;
  const int p = c.world();
  const auto n = static_cast<std::size_t>(p);
  const bool core = c.op == AttentionOp::context_parallel;
  std::vector<CoreRankInputs<T>> core_in(core ? n : 0);
  std::vector<LayerRankInputs<T>> layer_in(core ? 0 : n);
  for (int r = 0; r < p; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (core) {
      const auto pos = positions_of(c, cp_coord(c, r));
      const auto qpos = query_positions_of(c, cp_coord(c, r));
      core_in[i] = {take_positions(d.q, qpos), take_positions(d.k, pos), take_positions(d.v, pos),
                    take_positions(d.dout, qpos)};
    } else {
      layer_in[i] = {layer_piece(c, d.x, r), layer_piece(c, d.dy, r), d.w};
    }
  }
  auto run = run_on_ranks<AttentionRankOutputs<T>>(p, [&](Communicator& world) {
    const auto r = static_cast<std::size_t>(world.rank());
    AttentionRankOutputs<T> o;
    if (core) {
      o.core = impl.core(world, c.attention(), c.context(), core_in[r]);
      return o;
    }
    MeshGroups mesh(world, DeviceMesh({{"cp", c.cp}, {"tp", c.tp}}));
    o.layer =
        c.core_in_layer
            ? layer_around_core(impl, mesh.along("tp"), mesh.along("cp"), c.layer, layer_in[r])
            : impl.layer(mesh.along("tp"), mesh.along("cp"), c.layer, layer_in[r]);
    return o;
  });
  for (auto& o : run.outputs) {
    if (core) {
      out.core.push_back(std::move(o.core));
    } else {
      out.layer.push_back(std::move(o.layer));
    }
  }
  out.ledgers = std::move(run.ledgers);
  out.error = std::move(run.error);
  return out;
}

spec::OpSpec op_spec(const AttentionCase& c) {
  return c.op == AttentionOp::context_parallel
             ? context_parallel_attention_spec(c.attention(), c.context(), c.batch, c.cp)
             : attention_layer_spec(c.layer, c.batch, c.cp, c.tp);
}

SHARDCHECK_INSTANTIATE_RUN_RANKS(AttentionImplementation, AttentionCase, AttentionData,
                                 AttentionRun)

}  // namespace shardcheck::check
