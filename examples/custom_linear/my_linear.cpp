// A user's own tensor-parallel linear, checked by shardcheck's linear suite with no change to
// shardcheck's sources: write the two member templates, register, link shardcheck::main.
//
//   my_shardcheck check linear --impl my-linear
//   my_shardcheck check linear --impl my-linear --dtype bfloat16 --max-world 4 --report out/
//
// This one computes its local products with its own loops (accumulating in float, or double
// for double) and communicates through shardcheck's Communicator; the row-parallel layer takes
// its columns of a full input with shardcheck's split_input_by_features.
#include "ops/tp_transitions.hpp"
#include "suites/linear/linear_impl.hpp"

#include <memory>

namespace {

using namespace shardcheck;
using namespace shardcheck::check;

template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// out[i][j] = Σ_k a[i][k] * b[j][k] (a·bᵀ), rounded once to T.
template <class T>
Tensor<T> matmul_abt(const Tensor<T>& a, const Tensor<T>& b) {
  Tensor<T> out({a.dim(0), b.dim(0)});
  for (std::size_t i = 0; i < a.dim(0); ++i) {
    for (std::size_t j = 0; j < b.dim(0); ++j) {
      Acc<T> acc = 0;
      for (std::size_t k = 0; k < a.dim(1); ++k) {
        acc += static_cast<Acc<T>>(a(i, k)) * static_cast<Acc<T>>(b(j, k));
      }
      out(i, j) = static_cast<T>(acc);
    }
  }
  return out;
}

template <class T>
Tensor<T> bias_grad(const Tensor<T>& dy) {
  Tensor<T> db({dy.dim(1)});
  for (std::size_t j = 0; j < dy.dim(1); ++j) {
    Acc<T> acc = 0;
    for (std::size_t t = 0; t < dy.dim(0); ++t) acc += static_cast<Acc<T>>(dy(t, j));
    db[j] = static_cast<T>(acc);
  }
  return db;
}

template <class T>
Tensor<T> add_bias(Tensor<T> y, const Tensor<T>& b) {
  for (std::size_t i = 0; i < y.dim(0) && !b.empty(); ++i) {
    for (std::size_t j = 0; j < y.dim(1); ++j) y(i, j) = static_cast<T>(y(i, j) + b[j]);
  }
  return y;
}

struct MyLinear {
  template <class T>
  LinearRankOutputs<T> column_parallel(Communicator& tp, const ColumnParallelConfig& cfg,
                                       const LinearRankInputs<T>& in) const {
    const int p = tp.size();
    const auto tokens = split_sizes(cfg.token_split, cfg.tokens, p);
    const auto outs = split_sizes(cfg.out_split, cfg.out_features, p);
    const auto pieces = split(cfg.out_split, cfg.out_features, p);
    const auto r = static_cast<std::size_t>(tp.rank());
    auto full_x = [&] {
      return cfg.sequence_parallel_input ? all_gather_tokens(tp, in.x, tokens) : in.x;
    };
    LinearRankOutputs<T> out;
    out.y = add_bias(matmul_abt(full_x(), in.w_shard), in.b);
    if (cfg.gather_output) out.y = all_gather_last_axis(tp, out.y, outs);
    Tensor<T> dy = in.dy;
    if (cfg.gather_output) {
      dy = Tensor<T>({in.dy.dim(0), pieces[r].size});
      for (std::size_t t = 0; t < dy.dim(0); ++t) {
        for (std::size_t j = 0; j < dy.dim(1); ++j) dy(t, j) = in.dy(t, pieces[r].offset + j);
      }
    }
    const Tensor<T> x = full_x();  // the backward re-gathers x, as Megatron does
    Tensor<T> dx = matmul_abt(dy, transpose(in.w_shard));
    if (cfg.sequence_parallel_input) {
      dx = reduce_scatter_tokens(tp, dx, tokens, cfg.all_reduce_algorithm);
    } else {
      tp.all_reduce<T>(dx.span(), ReduceOp::sum, cfg.all_reduce_algorithm);
    }
    out.dx = std::move(dx);
    out.dw = matmul_abt(transpose(dy), transpose(x));
    if (in.has_bias) out.db = bias_grad(dy);
    return out;
  }

  template <class T>
  LinearRankOutputs<T> row_parallel(Communicator& tp, const RowParallelConfig& cfg,
                                    const LinearRankInputs<T>& in) const {
    const int p = tp.size();
    // This rank's columns of x: given, or taken from the full input.
    const Tensor<T> x =
        cfg.input_is_parallel ? in.x : split_input_by_features(in.x, cfg.in_split, p, tp.rank());
    const auto tokens = split_sizes(cfg.token_split, x.dim(0), p);
    LinearRankOutputs<T> out;
    Tensor<T> partial = matmul_abt(x, in.w_shard);
    if (cfg.sequence_parallel_output) {
      out.y = reduce_scatter_tokens(tp, partial, tokens, cfg.reduce_algorithm);
    } else {
      tp.all_reduce<T>(partial.span(), ReduceOp::sum, cfg.reduce_algorithm);
      out.y = std::move(partial);
    }
    out.y = add_bias(std::move(out.y), in.b);
    const Tensor<T> dy =
        cfg.sequence_parallel_output ? all_gather_tokens(tp, in.dy, tokens) : in.dy;
    out.dx = matmul_abt(dy, transpose(in.w_shard));
    if (!cfg.input_is_parallel) {
      out.dx = all_gather_last_axis(tp, out.dx, split_sizes(cfg.in_split, in.x.dim(1), p));
    }
    out.dw = matmul_abt(transpose(dy), transpose(x));
    if (in.has_bias) out.db = bias_grad(dy);
    return out;
  }
};

const Registration<LinearImplementation> registration(
    {"my-linear", "an out-of-tree tensor-parallel linear with its own loops", false, false},
    std::make_shared<LinearAdapter<MyLinear>>());

}  // namespace
