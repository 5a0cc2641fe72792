#include "suites/mlp/mlp_case.hpp"

#include "engine/instantiate.hpp"
#include "engine/slicing.hpp"

namespace shardcheck::check {

spec::OpSpec op_spec(const MlpCase& c) {
  return parallel_mlp_spec(c.cfg, c.tokens, c.hidden, c.has_bias, c.world);
}

// What rank r is given (mlp_impl.hpp documents the layout): x and dy cut along tokens with
// sequence parallelism (engine/slicing.hpp), the parameters whole.
template <class T>
MlpRankInputs<T> mlp_rank_inputs(const MlpCase& c, const MlpData<T>& d, int r) {
  const auto s = op_spec(c);
  MlpRankInputs<T> in;
  in.x = place(d.x, s.tensor("x").placement(), c.world, r);
  in.dy = place(d.dy, s.tensor("dy").placement(), c.world, r);
  // The parameters whole: the implementation takes its pieces (split_fused_up for fc1).
  in.w_up = d.w_up;
  in.b_up = d.b_up;
  in.w_down = d.w_down;
  in.b_down = d.b_down;
  in.has_bias = c.has_bias;
  return in;
}

template <class T>
MlpRun<T> run_ranks(const MlpImplementation& impl, const MlpCase& c, const MlpData<T>& d) {
  return run_on_ranks_with<MlpRankOutputs<T>>(
      c.world, [&](int r) { return mlp_rank_inputs(c, d, r); },
      [&](Communicator& comm, const MlpRankInputs<T>& in) {
        return impl.parallel_mlp(comm, c.cfg, in);
      });
}

SHARDCHECK_INSTANTIATE_RUN_RANKS(MlpImplementation, MlpCase, MlpData, MlpRun)

}  // namespace shardcheck::check
