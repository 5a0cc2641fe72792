#include "suites/linear/linear_case.hpp"

#include "engine/instantiate.hpp"
#include "engine/slicing.hpp"
#include "runtime/errors.hpp"

namespace shardcheck::check {

spec::OpSpec op_spec(const LinearCase& c) {
  return c.layer == LinearLayer::column_parallel
             ? column_parallel_linear_spec(c.column, c.tokens, c.in, c.out, c.has_bias, c.world)
             : row_parallel_linear_spec(c.row, c.tokens, c.in, c.out, c.has_bias, c.world);
}

// What rank r is given (linear_impl.hpp documents the layout).
template <class T>
LinearRankInputs<T> linear_rank_inputs(const LinearCase& c, const LinearData<T>& d, int r) {
  const auto s = op_spec(c);
  auto cut = [&](const Tensor<T>& t, const char* name) {
    return place(t, s.tensor(name).placement(), c.world, r);
  };
  LinearRankInputs<T> in;
  in.has_bias = c.has_bias;
  in.x = cut(d.x, "x");
  in.w_shard = cut(d.w, "w");
  if (c.has_bias) in.b = cut(d.b, "b");
  in.dy = cut(d.dy, "dy");
  return in;
}

template <class T>
LinearRun<T> run_ranks(const LinearImplementation& impl, const LinearCase& c,
                       const LinearData<T>& d) {
  return run_on_ranks_with<LinearRankOutputs<T>>(
      c.world, [&](int r) { return linear_rank_inputs(c, d, r); },
      [&](Communicator& comm, const LinearRankInputs<T>& in) {
        return c.layer == LinearLayer::column_parallel ? impl.column_parallel(comm, c.column, in)
                                                       : impl.row_parallel(comm, c.row, in);
      });
}

SHARDCHECK_INSTANTIATE_RUN_RANKS(LinearImplementation, LinearCase, LinearData, LinearRun)

}  // namespace shardcheck::check
