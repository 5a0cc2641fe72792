// The norm suite's implementation interface: what one rank is given and what it returns, for
// the sequence-parallel norm (forward and backward in one call) and for Megatron's
// sequence-parallel block (SP norm → g → column-parallel linear → row-parallel linear → ḡ).
//
// A user checks their own sequence-parallel norm by writing a type with two member templates
// and registering it (as examples/custom_linear/ does for the linear suite):
//
//   struct MyNorm {
//     template <class T> NormRankOutputs<T> norm(Communicator&,
//         const SequenceParallelNormConfig&, const NormRankInputs<T>&) const;
//     template <class T> BlockRankOutputs<T> block(Communicator&, const BlockConfig&,
//         const BlockRankInputs<T>&) const;
//   };
//   static Registration<NormImplementation> reg({.name = "mine"},
//                                               std::make_shared<NormAdapter<MyNorm>>());
//
// T is double, float, bfloat16 or float16. Placements (what the suite materializes):
//   norm    y, dx S(0)[token_split]        dgamma, dbeta R (bit-identical on every rank)
//   block   y, dx S(0)[token_split]        dgamma, dbeta R
//           dw1 S(0)[ffn_split] ([ffn_r, hidden])   dw2 S(1)[ffn_split] ([hidden, ffn_r])
#pragma once

#include "engine/implementation.hpp"
#include "engine/registry.hpp"
#include "ops/linear/linear.hpp"
#include "ops/norm/norm.hpp"
#include "runtime/communicator.hpp"
#include "tensor/tensor.hpp"

namespace shardcheck::check {

template <class T>
struct NormRankInputs {
  Tensor<T> x;      // this rank's tokens [tokens_r, hidden] (tokens_r may be 0)
  Tensor<T> gamma;  // [hidden], replicated
  Tensor<T> beta;   // [hidden] for layer_norm, else empty
  Tensor<T> dy;     // [tokens_r, hidden]
};

template <class T>
struct NormRankOutputs {
  Tensor<T> y, dx, dgamma, dbeta;  // dbeta empty without beta
};

// The Megatron-LM sequence-parallel block (Korthikanti et al. 2022, Fig. 5), no linear biases:
//   z_r = norm(x_r)                                  local
//   z   = g(z_r) = all_gather_tokens                 backward: reduce_scatter_tokens
//   a_r = z·W1_rᵀ   W1 [ffn, hidden] split by rows   column-parallel
//   y_r = ḡ(a_r·W2_rᵀ) = reduce_scatter_tokens       W2 [hidden, ffn] split by columns;
//                                                    backward: all_gather_tokens of dy
struct BlockConfig {
  SequenceParallelNormConfig norm;  // tokens, token_split, eps, kind
  std::size_t ffn = 1;
  SplitPolicy ffn_split = SplitPolicy::chunk();
  Kernel kernel = Kernel::deterministic;  // the linear layers' kernel (fast: another order)
};

template <class T>
struct BlockRankInputs {
  Tensor<T> x, gamma, beta;  // as NormRankInputs
  Tensor<T> w1_shard;        // [ffn_r, hidden]
  Tensor<T> w2_shard;        // [hidden, ffn_r]
  Tensor<T> dy;              // [tokens_r, hidden]
};

template <class T>
struct BlockRankOutputs {
  Tensor<T> y, dx, dgamma, dbeta, dw1, dw2;
};

template <class T, class F>  // f(every member): the MPI case driver's bytes (engine/rank_bytes.hpp)
void fields(BlockRankOutputs<T>& o, F&& f) {
  f(o.y, o.dx, o.dgamma, o.dbeta, o.dw1, o.dw2);
}
static_assert(sizeof(BlockRankOutputs<double>) == 6 * sizeof(Tensor<double>));

template <class T, class F>  // f(every member): the MPI case driver's bytes (engine/rank_bytes.hpp)
void fields(NormRankOutputs<T>& o, F&& f) {
  f(o.y, o.dx, o.dgamma, o.dbeta);
}
static_assert(sizeof(NormRankOutputs<double>) == 4 * sizeof(Tensor<double>));

// The interface (NormImplementation) and NormAdapter<Impl>, which adapts a type with member
// templates norm<T> and block<T> (engine/implementation.hpp).
#define SHARDCHECK_NORM_METHODS(M, T)                                                        \
  M(T, NormRankOutputs<T>, norm,                                                             \
    (Communicator & sp, const SequenceParallelNormConfig& cfg, const NormRankInputs<T>& in), \
    (sp, cfg, in))                                                                           \
  M(T, BlockRankOutputs<T>, block,                                                           \
    (Communicator & tp, const BlockConfig& cfg, const BlockRankInputs<T>& in), (tp, cfg, in))
SHARDCHECK_IMPLEMENTATION(NormImplementation, NormAdapter, SHARDCHECK_NORM_METHODS)
#undef SHARDCHECK_NORM_METHODS

// A rank's outputs from the norm's forward output y and its backward's gradients; for the block
// also the linear layers' weight-gradient shards dw1, dw2.
template <class T>
NormRankOutputs<T> norm_outputs(Tensor<T> y, NormGrads<T> g) {
  return {std::move(y), std::move(g.dx), std::move(g.dgamma), std::move(g.dbeta)};
}
template <class T>
BlockRankOutputs<T> block_outputs(Tensor<T> y, NormGrads<T> g, Tensor<T> dw1, Tensor<T> dw2) {
  return {std::move(y),       std::move(g.dx), std::move(g.dgamma),
          std::move(g.dbeta), std::move(dw1),  std::move(dw2)};
}

// The block's linear configurations, derived from BlockConfig (no biases): the library's
// (ops/norm/norm.hpp) with the block's kernel.
inline ColumnParallelConfig block_column_config(const BlockConfig& cfg) {
  return sp_block_column_config(cfg.norm, cfg.ffn, cfg.ffn_split, cfg.kernel);
}

inline RowParallelConfig block_row_config(const BlockConfig& cfg) {
  return sp_block_row_config(cfg.norm, cfg.ffn_split, cfg.kernel);
}

// The library's own ops (lib/ops/norm/norm.hpp, lib/ops/linear/linear.hpp): "shardcheck".
struct LibraryNorm {
  template <class T>
  NormRankOutputs<T> norm(Communicator& sp, const SequenceParallelNormConfig& cfg,
                          const NormRankInputs<T>& in) const {
    return norm_outputs(sequence_parallel_norm(sp, cfg, in.x, in.gamma, in.beta),
                        sequence_parallel_norm_backward(sp, cfg, in.x, in.gamma, in.dy));
  }
  template <class T>
  BlockRankOutputs<T> block(Communicator& tp, const BlockConfig& cfg,
                            const BlockRankInputs<T>& in) const {
    const auto col = block_column_config(cfg);
    const auto row = block_row_config(cfg);
    const Tensor<T> none;
    const Tensor<T> z = sequence_parallel_norm(tp, cfg.norm, in.x, in.gamma, in.beta);
    const Tensor<T> a = column_parallel_linear(tp, col, z, in.w1_shard, none).y;
    Tensor<T> y = row_parallel_linear(tp, row, a, in.w2_shard, none).y;
    auto gr = row_parallel_linear_backward(tp, row, a, in.w2_shard, false, in.dy);
    auto gc = column_parallel_linear_backward(tp, col, z, in.w1_shard, false, gr.dx);
    return block_outputs(std::move(y),
                         sequence_parallel_norm_backward(tp, cfg.norm, in.x, in.gamma, gc.dx),
                         std::move(gc.dw), std::move(gr.dw));
  }
};

}  // namespace shardcheck::check
