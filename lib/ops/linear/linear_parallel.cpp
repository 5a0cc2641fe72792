// The column- and row-parallel linear layers (ops/linear/linear.hpp), forward and backward, on one
// rank each. Every rank runs the dense core (linear.cpp) on its shard; this file adds the
// collectives and the checks that the ranks' shards fit the configured splits.
//
// Global sizes a rank cannot see (with sequence_parallel_input its own tokens only, with
// gather_output its own output features only) come from ColumnParallelConfig::tokens and
// ::out_features, as Megatron's layers know them. Every other transition derives its counts from
// a full dimension it holds (dy's tokens, x's tokens, x's features). No metadata moves.
#include "ops/linear/linear.hpp"

#include "ops/linear/linear_internal.hpp"
#include "ops/tp_transitions.hpp"
#include "ops/workspace.hpp"

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace shardcheck {

using namespace linear_detail;  // NOLINT(google-build-using-namespace): this op's own helpers

// ================================================================ column-parallel

template <class T>
ColumnParallelOutput<T> column_parallel_linear(Communicator& tp, const ColumnParallelConfig& cfg,
                                               const Tensor<T>& x, const Tensor<T>& w_shard,
                                               const Tensor<T>& b_shard) {
  const std::string where = on_rank("column_parallel_linear", tp);
  require_2d(
      where, "x", x,
      cfg.sequence_parallel_input ? "[tokens_r, in] (sequence_parallel_input)" : "[tokens, in]");
  require_2d(where, "w_shard", w_shard, "[out_r, in]");
  require_same_in(where, "w_shard", w_shard, "x", x, "[out_r, in]");
  require_bias(where, "b_shard", b_shard, "w_shard", w_shard, "out_r");

  // The counts of the uneven gathers come from the configured global sizes, identical on every
  // rank, so no collective exchanges shapes; this rank's own piece is checked against them.
  const int p = tp.size();
  const auto r = static_cast<std::size_t>(tp.rank());
  std::vector<std::size_t> token_counts, out_counts;
  if (cfg.sequence_parallel_input) {
    token_counts = require_token_shard(where, tp, cfg.token_split, cfg.tokens, "x", x);
  }
  if (cfg.gather_output) {
    out_counts =
        sizes_of(pieces(where, "cfg.out_features = " + str(cfg.out_features) + " output features",
                        cfg.out_split, cfg.out_features, p));
    if (w_shard.dim(0) != out_counts[r]) {
      throw UsageError(where + "w_shard is " + format_shape(w_shard.shape()) + " but out_split " +
                       cfg.out_split.to_string() + " gives this rank " + str(out_counts[r]) +
                       " of cfg.out_features = " + str(cfg.out_features) +
                       " features; give rank k split_weight_by_output_features(w, out_split, P, "
                       "k) and set cfg.out_features to the global output size");
    }
  }

  Held<Tensor<T>> gathered;  // the all_gathered x, live until the end (a workspace buffer)
  const Tensor<T>* x_full = &x;
  if (cfg.sequence_parallel_input) {
    gathered = Workspace::of_this_rank().hold(
        all_gather_tokens(tp, x, std::span<const std::size_t>(token_counts)));
    x_full = &*gathered;
  }
  ColumnParallelOutput<T> result{forward_core(*x_full, w_shard, b_shard, cfg.kernel)};
  if (cfg.gather_output) {
    result.y = all_gather_last_axis(tp, result.y, std::span<const std::size_t>(out_counts));
  }
  return result;
}

namespace {

// A backward's token-sharded operand made whole along tokens. `shard` (x of the column-parallel
// layer with sequence_parallel_input, dy of the row-parallel one with sequence_parallel_output)
// must be this rank's piece by `token_split` of the tokens of `full` (the other of x and dy);
// it is all_gathered into `gathered`, a workspace buffer. `hint` ends the error message: what to
// pass instead. Returns the token counts of the ranks.
template <class T>
std::vector<std::size_t> gather_token_shard(const std::string& where, Communicator& tp,
                                            const SplitPolicy& token_split, const char* shard_name,
                                            const Tensor<T>& shard, const char* full_name,
                                            const Tensor<T>& full, const char* hint,
                                            Held<Tensor<T>>& gathered) {
  const std::size_t tokens = full.dim(0);
  const std::string of_full = std::string(full_name) + "'s " + str(tokens) + " tokens";
  auto counts = sizes_of(pieces(where, of_full, token_split, tokens, tp.size()));
  const auto r = static_cast<std::size_t>(tp.rank());
  if (shard.dim(0) != counts[r]) {
    throw UsageError(where + shard_name + " is " + format_shape(shard.shape()) +
                     " but token_split " + token_split.to_string() + " gives this rank " +
                     str(counts[r]) + " of " + of_full + " (" + full_name + " " +
                     format_shape(full.shape()) + "); " + hint);
  }
  gathered = Workspace::of_this_rank().hold(
      all_gather_tokens(tp, shard, std::span<const std::size_t>(counts)));
  return counts;
}

// x and dy of a backward without sequence parallelism hold the same tokens.
template <class T>
void require_same_tokens(const std::string& where, const Tensor<T>& x, const Tensor<T>& dy) {
  if (dy.dim(0) != x.dim(0)) {
    throw UsageError(where + "dy is " + format_shape(dy.shape()) + " but x is " +
                     format_shape(x.shape()) + "; dy must have x's " + str(x.dim(0)) + " tokens");
  }
}

}  // namespace

template <class T>
LinearGrads<T> column_parallel_linear_backward(Communicator& tp, const ColumnParallelConfig& cfg,
                                               const Tensor<T>& x, const Tensor<T>& w_shard,
                                               bool has_bias, const Tensor<T>& dy) {
  const std::string where = on_rank("column_parallel_linear_backward", tp);
  const int p = tp.size();
  const auto r = static_cast<std::size_t>(tp.rank());
  require_2d(
      where, "x", x,
      cfg.sequence_parallel_input ? "[tokens_r, in] (sequence_parallel_input)" : "[tokens, in]");
  require_2d(where, "w_shard", w_shard, "[out_r, in]");
  require_2d(where, "dy", dy,
             cfg.gather_output ? "[tokens, out] (gather_output)" : "[tokens, out_r]");
  require_same_in(where, "w_shard", w_shard, "x", x, "[out_r, in]");

  Tensor<T> dy_cols;
  const Tensor<T>* dy_r = &dy;
  if (cfg.gather_output) {
    const auto ps =
        pieces(where, "the out = " + str(dy.dim(1)) + " features of dy " + format_shape(dy.shape()),
               cfg.out_split, dy.dim(1), p);
    if (ps[r].size != w_shard.dim(0)) {
      throw UsageError(where + "dy is " + format_shape(dy.shape()) + " and out_split " +
                       cfg.out_split.to_string() + " gives this rank " + str(ps[r].size) +
                       " of its " + str(dy.dim(1)) + " features, but w_shard is " +
                       format_shape(w_shard.shape()) +
                       "; with gather_output dy is the full [tokens, out] gradient and "
                       "w_shard must be split_weight_by_output_features(w, out_split, P, rank)");
    }
    dy_cols = take_cols(dy, ps[r]);
    dy_r = &dy_cols;
  } else if (dy.dim(1) != w_shard.dim(0)) {
    throw UsageError(where + "dy is " + format_shape(dy.shape()) + " but w_shard is " +
                     format_shape(w_shard.shape()) +
                     "; dy must be [tokens, out_r] with out_r = "
                     "w_shard.dim(0) = " +
                     str(w_shard.dim(0)) + " (or the full [tokens, out] with gather_output)");
  }

  std::vector<std::size_t> token_counts;
  Held<Tensor<T>> gathered;  // the all_gathered x, live until the end (a workspace buffer)
  const Tensor<T>* x_full = &x;
  if (cfg.sequence_parallel_input) {
    // The backward needs the whole input for dW (Megatron gathers it again, as here).
    token_counts = gather_token_shard(
        where, tp, cfg.token_split, "x", x, "dy", dy,
        "with sequence_parallel_input pass the token shard x given to the forward", gathered);
    x_full = &*gathered;
  } else {
    require_same_tokens(where, x, dy);
  }

  LinearGrads<T> g = backward_core(*x_full, w_shard, has_bias, *dy_r, cfg.kernel);
  if (cfg.sequence_parallel_input) {
    // The full dx, reduce_scatter's input, held in the workspace while it is reduced.
    const auto full_dx = Workspace::of_this_rank().hold(std::move(g.dx));
    g.dx = reduce_scatter_tokens(tp, *full_dx, std::span<const std::size_t>(token_counts),
                                 cfg.all_reduce_algorithm);
  } else {
    tp.all_reduce(g.dx.span(), ReduceOp::sum, cfg.all_reduce_algorithm);
  }
  return g;
}

// ================================================================ row-parallel

namespace {

// This rank's x columns [tokens, in_r]: x itself (input_is_parallel) or its piece of in_split.
template <class T>
Tensor<T> row_parallel_input(const std::string& where, const Communicator& tp,
                             const RowParallelConfig& cfg, const Tensor<T>& x,
                             const Tensor<T>& w_shard, std::vector<std::size_t>* in_counts) {
  if (cfg.input_is_parallel) {
    if (x.dim(1) != w_shard.dim(1)) {
      throw UsageError(where + "w_shard is " + format_shape(w_shard.shape()) + " but x is " +
                       format_shape(x.shape()) +
                       "; with input_is_parallel x must be this "
                       "rank's [tokens, in_r] with in_r = w_shard.dim(1) = " +
                       str(w_shard.dim(1)));
    }
    return x;
  }
  const auto ps =
      pieces(where, "the in = " + str(x.dim(1)) + " features of x " + format_shape(x.shape()),
             cfg.in_split, x.dim(1), tp.size());
  const auto r = static_cast<std::size_t>(tp.rank());
  if (ps[r].size != w_shard.dim(1)) {
    throw UsageError(where + "x is " + format_shape(x.shape()) + " and in_split " +
                     cfg.in_split.to_string() + " gives this rank " + str(ps[r].size) + " of its " +
                     str(x.dim(1)) + " features, but w_shard is " + format_shape(w_shard.shape()) +
                     "; w_shard must be "
                     "split_weight_by_input_features(w, in_split, P, rank)");
  }
  if (in_counts != nullptr) *in_counts = sizes_of(ps);
  return take_cols(x, ps[r]);
}

}  // namespace

template <class T>
RowParallelOutput<T> row_parallel_linear(Communicator& tp, const RowParallelConfig& cfg,
                                         const Tensor<T>& x, const Tensor<T>& w_shard,
                                         const Tensor<T>& b) {
  const std::string where = on_rank("row_parallel_linear", tp);
  require_2d(where, "x", x, cfg.input_is_parallel ? "[tokens, in_r]" : "[tokens, in]");
  require_2d(where, "w_shard", w_shard, "[out, in_r]");
  require_bias(where, "b", b, "w_shard", w_shard, "out");
  const Tensor<T> x_r = row_parallel_input(where, tp, cfg, x, w_shard, nullptr);

  // The partial product, rounded to T, without the bias: the bias joins after the reduction.
  Tensor<T> y = forward_core(x_r, w_shard, Tensor<T>(), cfg.kernel);
  if (cfg.sequence_parallel_output) {
    const auto counts = sizes_of(
        pieces(where, "x's " + str(x.dim(0)) + " tokens", cfg.token_split, x.dim(0), tp.size()));
    // The full partial y, reduce_scatter's input, held in the workspace while it is reduced.
    const auto full_y = Workspace::of_this_rank().hold(std::move(y));
    y = reduce_scatter_tokens(tp, *full_y, std::span<const std::size_t>(counts),
                              cfg.reduce_algorithm);
  } else {
    tp.all_reduce(y.span(), ReduceOp::sum, cfg.reduce_algorithm);
  }
  add_bias(y, b);  // once, after the reduction
  return {std::move(y)};
}

template <class T>
LinearGrads<T> row_parallel_linear_backward(Communicator& tp, const RowParallelConfig& cfg,
                                            const Tensor<T>& x, const Tensor<T>& w_shard,
                                            bool has_bias, const Tensor<T>& dy) {
  const std::string where = on_rank("row_parallel_linear_backward", tp);
  require_2d(where, "x", x, cfg.input_is_parallel ? "[tokens, in_r]" : "[tokens, in]");
  require_2d(where, "w_shard", w_shard, "[out, in_r]");
  require_2d(where, "dy", dy,
             cfg.sequence_parallel_output ? "[tokens_r, out] (sequence_parallel_output)"
                                          : "[tokens, out]");
  std::vector<std::size_t> in_counts;
  const Tensor<T> x_r = row_parallel_input(where, tp, cfg, x, w_shard, &in_counts);

  if (dy.dim(1) != w_shard.dim(0)) {
    throw UsageError(where + "dy is " + format_shape(dy.shape()) + " but w_shard is " +
                     format_shape(w_shard.shape()) +
                     "; dy must have out = w_shard.dim(0) = " + str(w_shard.dim(0)) + " features");
  }
  Held<Tensor<T>> gathered;  // the all_gathered dy, live until the end (a workspace buffer)
  const Tensor<T>* dy_full = &dy;
  if (cfg.sequence_parallel_output) {
    (void)gather_token_shard(
        where, tp, cfg.token_split, "dy", dy, "x", x,
        "with sequence_parallel_output dy is the gradient of this rank's token shard of y",
        gathered);
    dy_full = &*gathered;
  } else {
    require_same_tokens(where, x, dy);
  }

  LinearGrads<T> g = backward_core(x_r, w_shard, has_bias, *dy_full, cfg.kernel);
  if (!cfg.input_is_parallel) {
    g.dx = all_gather_last_axis(tp, g.dx, std::span<const std::size_t>(in_counts));
  }
  return g;
}

// ================================================================ a block's two linears

namespace linear_detail {

ColumnParallelConfig block_column_config(std::size_t tokens, bool sequence_parallel,
                                         const SplitPolicy& token_split, Algorithm algorithm,
                                         Kernel kernel) {
  return {.tokens = tokens,
          .sequence_parallel_input = sequence_parallel,
          .token_split = token_split,
          .all_reduce_algorithm = algorithm,
          .kernel = kernel};
}

RowParallelConfig block_row_config(bool sequence_parallel, const SplitPolicy& token_split,
                                   Algorithm algorithm, Kernel kernel) {
  return {.input_is_parallel = true,
          .sequence_parallel_output = sequence_parallel,
          .token_split = token_split,
          .reduce_algorithm = algorithm,
          .kernel = kernel};
}

}  // namespace linear_detail

// ================================================================ instantiations

#define SHARDCHECK_INSTANTIATE(T)                                                                  \
  template ColumnParallelOutput<T> column_parallel_linear<T>(                                      \
      Communicator&, const ColumnParallelConfig&, const Tensor<T>&, const Tensor<T>&,              \
      const Tensor<T>&);                                                                           \
  template LinearGrads<T> column_parallel_linear_backward<T>(                                      \
      Communicator&, const ColumnParallelConfig&, const Tensor<T>&, const Tensor<T>&, bool,        \
      const Tensor<T>&);                                                                           \
  template RowParallelOutput<T> row_parallel_linear<T>(Communicator&, const RowParallelConfig&,    \
                                                       const Tensor<T>&, const Tensor<T>&,         \
                                                       const Tensor<T>&);                          \
  template LinearGrads<T> row_parallel_linear_backward<T>(Communicator&, const RowParallelConfig&, \
                                                          const Tensor<T>&, const Tensor<T>&,      \
                                                          bool, const Tensor<T>&);

SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck
