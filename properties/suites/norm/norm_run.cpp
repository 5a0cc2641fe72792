#include "suites/norm/norm_run.hpp"

#include "engine/slicing.hpp"

namespace shardcheck::check {

spec::OpSpec norm_spec(const NormCase& c) {
  return c.op == NormOp::block
             ? sp_block_spec(c.norm(), c.hidden, c.block.ffn, c.block.ffn_split, c.world)
             : sequence_parallel_norm_spec(c.norm(), c.hidden, c.world);
}

template <class T>
NormRun<T> run_norm(const NormImplementation& impl, const NormCase& c, const NormData<T>& d) {
  const int p = c.world;
  const auto s = norm_spec(c);
  std::vector<BlockRankInputs<T>> inputs;
  for (int r = 0; r < p; ++r) {
    auto cut = [&](const Tensor<T>& t, const char* name) {
      return place(t, s.tensor(name).placement(), p, r);
    };
    BlockRankInputs<T> in;
    in.x = cut(d.x, "x");
    in.gamma = cut(d.gamma, "gamma");
    in.beta = has_beta(c.kind()) ? cut(d.beta, "beta") : d.beta;
    in.dy = cut(d.dy, "dy");
    if (c.op == NormOp::block) {
      in.w1_shard = cut(d.w1, "w1");
      in.w2_shard = cut(d.w2, "w2");
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
  const auto s = norm_spec(c);
  const bool block = c.op == NormOp::block;
  const auto& dgamma = s.tensor("dgamma").placement();
  // dbeta, dw1 and dw2 when the op has them (the others are empty and never materialized).
  return {s.tensor("y").placement(),
          s.tensor("dx").placement(),
          dgamma,
          has_beta(c.kind()) ? s.tensor("dbeta").placement() : dgamma,
          block ? s.tensor("dw1").placement() : dgamma,
          block ? s.tensor("dw2").placement() : dgamma};
}

std::vector<std::vector<DeclaredCall>> norm_declared_traffic(const NormCase& c) {
  return declared_calls(norm_spec(c), c.dtype);
}

#define SHARDCHECK_INSTANTIATE(T) \
  template NormRun<T> run_norm<T>(const NormImplementation&, const NormCase&, const NormData<T>&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck::check
