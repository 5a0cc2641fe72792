#include "suites/norm/norm_case.hpp"

#include "engine/instantiate.hpp"
#include "engine/slicing.hpp"

namespace shardcheck::check {

spec::OpSpec op_spec(const NormCase& c) {
  return c.op == NormOp::block
             ? sp_block_spec(c.norm(), c.hidden, c.block.ffn, c.block.ffn_split, c.world)
             : sequence_parallel_norm_spec(c.norm(), c.hidden, c.world);
}

template <class T>
NormRun<T> run_ranks(const NormImplementation& impl, const NormCase& c, const NormData<T>& d) {
  const int p = c.world;
  const auto s = op_spec(c);
  std::vector<BlockRankInputs<T>> inputs;
  inputs.reserve(static_cast<std::size_t>(p));
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

SHARDCHECK_INSTANTIATE_RUN_RANKS(NormImplementation, NormCase, NormData, NormRun)

}  // namespace shardcheck::check
