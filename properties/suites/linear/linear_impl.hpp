// The linear suite's implementation interface: what one rank is given and what it returns,
// for column_parallel_linear and row_parallel_linear, forward and backward in one call.
//
// A user checks their own tensor-parallel linear by writing a type with two member templates
// and registering it (see examples/custom_linear/):
//
//   struct MyLinear {
//     template <class T> LinearRankOutputs<T> column_parallel(Communicator&,
//         const ColumnParallelConfig&, const LinearRankInputs<T>&) const;
//     template <class T> LinearRankOutputs<T> row_parallel(Communicator&,
//         const RowParallelConfig&, const LinearRankInputs<T>&) const;
//   };
//   static Registration<LinearImplementation> reg({.name = "mine"},
//                                                 std::make_shared<LinearAdapter<MyLinear>>());
//
// T is double, float, bfloat16 or float16. Inputs and outputs are this rank's pieces, laid out
// as lib/ops/linear/linear.hpp documents; the suite materializes them by these placements:
//
//   column_parallel   y  S(1)[out_split], or R with gather_output
//                     dx R, or S(0)[token_split] with sequence_parallel_input
//                     dw S(0)[out_split]      db S(0)[out_split]
//   row_parallel      y  R, or S(0)[token_split] with sequence_parallel_output
//                     dx S(1)[in_split] with input_is_parallel, else R
//                     dw S(1)[in_split]       db R
#pragma once

#include "engine/implementation.hpp"
#include "engine/registry.hpp"
#include "ops/linear/linear.hpp"
#include "runtime/communicator.hpp"
#include "tensor/tensor.hpp"

namespace shardcheck::check {

template <class T>
struct LinearRankInputs {
  // column_parallel: the full x [tokens, in] (identical on every rank), or this rank's token
  //                  rows with sequence_parallel_input.
  // row_parallel:    this rank's feature columns [tokens, in_r] with input_is_parallel, else
  //                  the full x.
  Tensor<T> x;
  Tensor<T> w_shard;  // column: [out_r, in]; row: [out, in_r]
  Tensor<T> b;        // column: this rank's slice [out_r]; row: the full bias [out]; or empty
  bool has_bias = false;
  // The gradient of the loss with respect to y, as this rank holds y: column: [tokens, out_r],
  // or the full [tokens, out] with gather_output; row: the full [tokens, out], or this rank's
  // token rows with sequence_parallel_output.
  Tensor<T> dy;
};

template <class T>
struct LinearRankOutputs {
  Tensor<T> y, dx, dw, db;  // db empty without bias
};

template <class T, class F>  // f(every member): the MPI case driver's bytes (engine/rank_bytes.hpp)
void fields(LinearRankOutputs<T>& o, F&& f) {
  f(o.y, o.dx, o.dw, o.db);
}
static_assert(sizeof(LinearRankOutputs<double>) == 4 * sizeof(Tensor<double>));

// The interface (LinearImplementation) and LinearAdapter<Impl>, which adapts a type with member
// templates column_parallel<T> and row_parallel<T> (engine/implementation.hpp).
#define SHARDCHECK_LINEAR_METHODS(M, T)                                                  \
  M(T, LinearRankOutputs<T>, column_parallel,                                            \
    (Communicator & tp, const ColumnParallelConfig& cfg, const LinearRankInputs<T>& in), \
    (tp, cfg, in))                                                                       \
  M(T, LinearRankOutputs<T>, row_parallel,                                               \
    (Communicator & tp, const RowParallelConfig& cfg, const LinearRankInputs<T>& in),    \
    (tp, cfg, in))
SHARDCHECK_IMPLEMENTATION(LinearImplementation, LinearAdapter, SHARDCHECK_LINEAR_METHODS)
#undef SHARDCHECK_LINEAR_METHODS

// A rank's outputs from its forward output y and its backward's gradients.
template <class T>
LinearRankOutputs<T> linear_outputs(Tensor<T> y, LinearGrads<T> g) {
  return {std::move(y), std::move(g.dx), std::move(g.dw), std::move(g.db)};
}

// The library's own ops (lib/ops/linear/linear.hpp), as an implementation: "shardcheck".
struct LibraryLinear {
  template <class T>
  LinearRankOutputs<T> column_parallel(Communicator& tp, const ColumnParallelConfig& cfg,
                                       const LinearRankInputs<T>& in) const {
    return linear_outputs(
        column_parallel_linear(tp, cfg, in.x, in.w_shard, in.b).y,
        column_parallel_linear_backward(tp, cfg, in.x, in.w_shard, in.has_bias, in.dy));
  }
  template <class T>
  LinearRankOutputs<T> row_parallel(Communicator& tp, const RowParallelConfig& cfg,
                                    const LinearRankInputs<T>& in) const {
    return linear_outputs(
        row_parallel_linear(tp, cfg, in.x, in.w_shard, in.b).y,
        row_parallel_linear_backward(tp, cfg, in.x, in.w_shard, in.has_bias, in.dy));
  }
};

}  // namespace shardcheck::check
