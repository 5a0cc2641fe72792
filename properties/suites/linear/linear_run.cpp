#include "suites/linear/linear_run.hpp"

#include "engine/slicing.hpp"
#include "runtime/errors.hpp"

namespace shardcheck::check {

template <class T>
LinearRankInputs<T> linear_rank_inputs(const LinearCase& c, const LinearData<T>& d, int r) {
  LinearRankInputs<T> in;
  in.has_bias = c.has_bias;
  const int p = c.world;
  if (c.layer == LinearLayer::column_parallel) {
    const auto& cfg = c.column;
    in.x = cfg.sequence_parallel_input ? shard(d.x, 0, cfg.token_split, p, r) : d.x;
    in.w_shard = shard(d.w, 0, cfg.out_split, p, r);
    if (c.has_bias) in.b = shard(d.b, 0, cfg.out_split, p, r);
    in.dy = cfg.gather_output ? d.dy : shard(d.dy, 1, cfg.out_split, p, r);
  } else {
    const auto& cfg = c.row;
    in.x = cfg.input_is_parallel ? shard(d.x, 1, cfg.in_split, p, r) : d.x;
    in.w_shard = shard(d.w, 1, cfg.in_split, p, r);
    if (c.has_bias) in.b = d.b;
    in.dy = cfg.sequence_parallel_output ? shard(d.dy, 0, cfg.token_split, p, r) : d.dy;
  }
  return in;
}

template <class T>
LinearRun<T> run_linear(const LinearImplementation& impl, const LinearCase& c,
                        const LinearData<T>& d) {
  std::vector<LinearRankInputs<T>> inputs;
  for (int r = 0; r < c.world; ++r) inputs.push_back(linear_rank_inputs(c, d, r));
  return run_on_ranks<LinearRankOutputs<T>>(c.world, [&](Communicator& comm) {
    const auto& in = inputs[static_cast<std::size_t>(comm.rank())];
    return c.layer == LinearLayer::column_parallel ? impl.column_parallel(comm, c.column, in)
                                                   : impl.row_parallel(comm, c.row, in);
  });
}

LinearPlacements linear_placements(const LinearCase& c) {
  if (c.layer == LinearLayer::column_parallel) {
    const auto& cfg = c.column;
    const auto feature = Placement::shard(0, cfg.out_split);
    return {
        cfg.gather_output ? Placement::replicate() : Placement::shard(1, cfg.out_split),
        cfg.sequence_parallel_input ? Placement::shard(0, cfg.token_split) : Placement::replicate(),
        feature, feature};
  }
  const auto& cfg = c.row;
  return {
      cfg.sequence_parallel_output ? Placement::shard(0, cfg.token_split) : Placement::replicate(),
      cfg.input_is_parallel ? Placement::shard(1, cfg.in_split) : Placement::replicate(),
      Placement::shard(1, cfg.in_split), Placement::replicate()};
}

std::vector<DeclaredCall> linear_declared_traffic(const LinearCase& c) {
  std::vector<DeclaredCall> calls;
  const std::uint64_t x_count = c.tokens * c.in;
  const std::uint64_t y_count = c.tokens * c.out;
  const DType t = c.dtype;
  if (c.layer == LinearLayer::column_parallel) {
    const auto& cfg = c.column;
    if (cfg.sequence_parallel_input) {
      calls.push_back({Collective::all_gather, t, x_count});
      calls.push_back({Collective::all_gather, t, x_count});
    }
    if (cfg.gather_output) calls.push_back({Collective::all_gather, t, y_count});
    calls.push_back(
        {cfg.sequence_parallel_input ? Collective::reduce_scatter : Collective::all_reduce, t,
         x_count});
  } else {
    const auto& cfg = c.row;
    calls.push_back(
        {cfg.sequence_parallel_output ? Collective::reduce_scatter : Collective::all_reduce, t,
         y_count});
    if (cfg.sequence_parallel_output) calls.push_back({Collective::all_gather, t, y_count});
    if (!cfg.input_is_parallel) calls.push_back({Collective::all_gather, t, x_count});
  }
  return calls;
}

#define SHARDCHECK_INSTANTIATE(T)                                                             \
  template LinearRankInputs<T> linear_rank_inputs<T>(const LinearCase&, const LinearData<T>&, \
                                                     int);                                    \
  template LinearRun<T> run_linear<T>(const LinearImplementation&, const LinearCase&,         \
                                      const LinearData<T>&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck::check
