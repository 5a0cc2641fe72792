// The mlp suite's implementation interface: what one rank is given and what it returns for
// Megatron-LM's ParallelMLP, forward and backward in one call.
//
// A user checks their own tensor-parallel MLP by writing a type with one member template and
// registering it (as examples/custom_linear/ does for the linear family):
//
//   struct MyMlp {
//     template <class T> MlpRankOutputs<T> parallel_mlp(Communicator&, const MlpConfig&,
//                                                       const MlpRankInputs<T>&) const;
//   };
//   static Registration<MlpImplementation> reg({.name = "mine"},
//                                              std::make_shared<MlpAdapter<MyMlp>>());
//
// T is double, float, bfloat16 or float16. The parameters arrive whole, as a checkpoint does, and
// each rank takes its own pieces (lib/ops/mlp/mlp.hpp: split_fused_up,
// split_weight_by_input_features): how the fused gate/up weight is sharded is part of what the
// suite checks. The suite materializes the outputs by these placements:
//   y, dx             R, or S(0)[token_split] with sequence_parallel
//   dw_gate, dw_up    S(0)[ffn_split]: rank r's rows [F_r, H] of Wg's and of Wu's gradient (for
//   db_gate, db_up    gelu and gelu_tanh only dw_up and db_up, the whole fc1; dw_gate, db_gate
//                     empty)
//   dw_down           S(1)[ffn_split]      db_down  R
#pragma once

#include "engine/implementation.hpp"
#include "engine/registry.hpp"
#include "engine/slicing.hpp"
#include "ops/mlp/mlp.hpp"
#include "runtime/communicator.hpp"
#include "tensor/tensor.hpp"

namespace shardcheck::check {

template <class T>
struct MlpRankInputs {
  Tensor<T> x;  // the full [tokens, H] (identical on every rank), or this rank's token rows
  // The global parameters: the fused fc1 [k·F, H] ([Wg; Wu] for swiglu) and its bias [k·F], fc2
  // [H, F] and its bias [H]; biases empty without bias.
  Tensor<T> w_up, b_up, w_down, b_down;
  bool has_bias = false;
  Tensor<T> dy;  // the gradient of y as this rank holds y: full, or its token rows
};

template <class T>
struct MlpRankOutputs {
  Tensor<T> y, dx, dw_gate, dw_up, db_gate, db_up, dw_down, db_down;
};

template <class T, class F>  // f(every member): the MPI case driver's bytes (engine/rank_bytes.hpp)
void fields(MlpRankOutputs<T>& o, F&& f) {
  f(o.y, o.dx, o.dw_gate, o.dw_up, o.db_gate, o.db_up, o.dw_down, o.db_down);
}
static_assert(sizeof(MlpRankOutputs<double>) == 8 * sizeof(Tensor<double>));

// The interface (MlpImplementation) and MlpAdapter<Impl>, which adapts a type with a member
// template parallel_mlp<T> (engine/implementation.hpp).
#define SHARDCHECK_MLP_METHODS(M, T)    \
  M(T, MlpRankOutputs<T>, parallel_mlp, \
    (Communicator & tp, const MlpConfig& cfg, const MlpRankInputs<T>& in), (tp, cfg, in))
SHARDCHECK_IMPLEMENTATION(MlpImplementation, MlpAdapter, SHARDCHECK_MLP_METHODS)
#undef SHARDCHECK_MLP_METHODS

// A rank's fused fc1 gradient [k·F_r, ...] as the outputs' gate and up pieces (rows [0, F_r) and
// [F_r, 2·F_r) for swiglu, [0, ...] pieces for a rank without ffn features; all of it is the up
// piece otherwise).
template <class T>
void unfuse_gate_up(const Tensor<T>& fused, Activation act, Tensor<T>& gate, Tensor<T>& up) {
  if (act != Activation::swiglu || fused.ndim() == 0) {  // ndim 0: no bias
    up = fused;
    return;
  }
  const std::size_t f_r = fused.dim(0) / 2;
  gate = slice(fused, 0, Piece{0, f_r});
  up = slice(fused, 0, Piece{f_r, f_r});
}

// A rank's outputs from y, dx and its fused fc1 gradients dw_up [k·F_r, H], db_up (unfused into
// the gate and up pieces, unfuse_gate_up) and fc2's dw_down, db_down.
template <class T>
MlpRankOutputs<T> mlp_outputs(Tensor<T> y, Tensor<T> dx, const Tensor<T>& dw_up,
                              const Tensor<T>& db_up, Tensor<T> dw_down, Tensor<T> db_down,
                              Activation act) {
  MlpRankOutputs<T> out;
  out.y = std::move(y);
  out.dx = std::move(dx);
  unfuse_gate_up(dw_up, act, out.dw_gate, out.dw_up);
  unfuse_gate_up(db_up, act, out.db_gate, out.db_up);
  out.dw_down = std::move(dw_down);
  out.db_down = std::move(db_down);
  return out;
}

// The library's own ParallelMLP (lib/ops/mlp/mlp.hpp), as an implementation: "shardcheck".
struct LibraryMlp {
  template <class T>
  MlpRankOutputs<T> parallel_mlp(Communicator& tp, const MlpConfig& cfg,
                                 const MlpRankInputs<T>& in) const {
    const int p = tp.size(), r = tp.rank();
    const auto act = cfg.activation;
    const Tensor<T> wu = split_fused_up(in.w_up, act, cfg.ffn_split, p, r);
    const Tensor<T> bu =
        in.has_bias ? split_fused_up(in.b_up, act, cfg.ffn_split, p, r) : Tensor<T>();
    const Tensor<T> wd = split_weight_by_input_features(in.w_down, cfg.ffn_split, p, r);
    const auto fwd = shardcheck::parallel_mlp(tp, cfg, in.x, wu, bu, wd, in.b_down);
    auto g = parallel_mlp_backward(tp, cfg, in.x, wu, wd, fwd, in.has_bias, in.dy);
    return mlp_outputs(fwd.y, std::move(g.dx), g.dw_up, g.db_up, std::move(g.dw_down),
                       std::move(g.db_down), act);
  }
};

}  // namespace shardcheck::check
