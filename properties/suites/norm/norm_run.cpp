#include "suites/norm/norm_run.hpp"

#include "engine/slicing.hpp"

namespace shardcheck::check {

template <class T>
NormRun<T> run_norm(const NormImplementation& impl, const NormCase& c, const NormData<T>& d) {
  const int p = c.world;
  const auto& ts = c.norm().token_split;
  std::vector<BlockRankInputs<T>> inputs;
  for (int r = 0; r < p; ++r) {
    BlockRankInputs<T> in;
    in.x = shard(d.x, 0, ts, p, r);
    in.gamma = d.gamma;
    in.beta = d.beta;
    in.dy = shard(d.dy, 0, ts, p, r);
    if (c.op == NormOp::block) {
      in.w1_shard = shard(d.w1, 0, c.block.ffn_split, p, r);
      in.w2_shard = shard(d.w2, 1, c.block.ffn_split, p, r);
    }
    inputs.push_back(std::move(in));
  }
  return run_on_ranks<BlockRankOutputs<T>>(p, [&](Communicator& comm) -> BlockRankOutputs<T> {
    const auto& in = inputs[static_cast<std::size_t>(comm.rank())];
    if (c.op == NormOp::block) return impl.block(comm, c.block, in);
    auto o = impl.norm(comm, c.norm(), NormRankInputs<T>{in.x, in.gamma, in.beta, in.dy});
    return {std::move(o.y), std::move(o.dx), std::move(o.dgamma), std::move(o.dbeta), {}, {}};
  });
}

NormPlacements norm_placements(const NormCase& c) {
  const auto tok = Placement::shard(0, c.norm().token_split);
  return {tok,
          tok,
          Placement::replicate(),
          Placement::replicate(),
          Placement::shard(0, c.block.ffn_split),
          Placement::shard(1, c.block.ffn_split)};
}

std::vector<DeclaredCall> norm_declared_traffic(const NormCase& c) {
  const DType t = c.dtype;
  const std::uint64_t h = c.hidden;
  std::vector<DeclaredCall> calls{{Collective::all_reduce, t, has_beta(c.kind()) ? 2 * h : h}};
  if (c.op == NormOp::block) {
    const std::uint64_t z = c.tokens() * h;
    calls.push_back({Collective::all_gather, t, z});
    calls.push_back({Collective::all_gather, t, z});
    calls.push_back({Collective::reduce_scatter, t, z});
    calls.push_back({Collective::reduce_scatter, t, z});
    calls.push_back({Collective::all_gather, t, z});
  }
  return calls;
}

#define SHARDCHECK_INSTANTIATE(T) \
  template NormRun<T> run_norm<T>(const NormImplementation&, const NormCase&, const NormData<T>&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck::check
