#include "suites/mlp/mlp_run.hpp"

#include "engine/slicing.hpp"

namespace shardcheck::check {

template <class T>
MlpRankInputs<T> mlp_rank_inputs(const MlpCase& c, const MlpData<T>& d, int r) {
  MlpRankInputs<T> in;
  const bool sp = c.cfg.sequence_parallel;
  in.x = sp ? shard(d.x, 0, c.cfg.token_split, c.world, r) : d.x;
  in.dy = sp ? shard(d.dy, 0, c.cfg.token_split, c.world, r) : d.dy;
  in.w_up = d.w_up;
  in.b_up = d.b_up;
  in.w_down = d.w_down;
  in.b_down = d.b_down;
  in.has_bias = c.has_bias;
  return in;
}

template <class T>
MlpRun<T> run_mlp(const MlpImplementation& impl, const MlpCase& c, const MlpData<T>& d) {
  std::vector<MlpRankInputs<T>> inputs;
  for (int r = 0; r < c.world; ++r) inputs.push_back(mlp_rank_inputs(c, d, r));
  return run_on_ranks<MlpRankOutputs<T>>(c.world, [&](Communicator& comm) {
    return impl.parallel_mlp(comm, c.cfg, inputs[static_cast<std::size_t>(comm.rank())]);
  });
}

MlpPlacements mlp_placements(const MlpCase& c) {
  const Placement tokens =
      c.cfg.sequence_parallel ? Placement::shard(0, c.cfg.token_split) : Placement::replicate();
  const Placement rows = Placement::shard(0, c.cfg.ffn_split);
  return {tokens,
          tokens,
          rows,
          rows,
          rows,
          rows,
          Placement::shard(1, c.cfg.ffn_split),
          Placement::replicate()};
}

std::vector<DeclaredCall> mlp_declared_traffic(const MlpCase& c) {
  const std::uint64_t n = c.tokens * c.hidden;
  const DType t = c.dtype;
  if (!c.cfg.sequence_parallel) {
    return {{Collective::all_reduce, t, n}, {Collective::all_reduce, t, n}};
  }
  return {{Collective::all_gather, t, n},
          {Collective::all_gather, t, n},
          {Collective::all_gather, t, n},
          {Collective::reduce_scatter, t, n},
          {Collective::reduce_scatter, t, n}};
}

#define SHARDCHECK_INSTANTIATE(T)                                                       \
  template MlpRankInputs<T> mlp_rank_inputs<T>(const MlpCase&, const MlpData<T>&, int); \
  template MlpRun<T> run_mlp<T>(const MlpImplementation&, const MlpCase&, const MlpData<T>&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck::check
