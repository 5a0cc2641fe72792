// The mutant catalog of the linear suite. One hand-written tensor-parallel linear, correct,
// with a switch per bug; each mutant turns one switch on. Every bug here has shipped somewhere
// or is the obvious slip in code that handles uneven shards; the description says which.
#include "suites/linear/linear_mutants.hpp"

#include "engine/slicing.hpp"
#include "layout/split_policy.hpp"
#include "ops/tp_transitions.hpp"
#include "suites/linear/linear_impl.hpp"

#include <algorithm>
#include <cstring>

namespace shardcheck::check {
namespace {

enum class Bug {
  bias_on_every_rank,
  column_dx_not_summed,
  grad_b_scaled_by_inverse_p,
  floor_split_loses_rows,
  offset_off_by_one,
  every_rank_uses_rank0_shard,
  gather_wrong_axis,
  sum_replaced_by_average,
  sp_db_from_local_tokens,
  sp_backward_all_reduce,
  dw_transposed,
  dx_reduced_twice,
  column_dx_averaged,
  partial_not_reduced,
};

std::vector<std::size_t> scaled(std::vector<std::size_t> sizes, std::size_t row_len) {
  for (auto& s : sizes) s *= row_len;
  return sizes;
}

// Columns [offset, offset + size) of a; columns past the end read as zero (an off-by-one
// reads past its shard without crashing, as it would inside a larger buffer).
template <class T>
Tensor<T> columns(const Tensor<T>& a, std::size_t offset, std::size_t size) {
  Tensor<T> out({a.dim(0), size});
  for (std::size_t i = 0; i < a.dim(0); ++i) {
    for (std::size_t j = 0; j < size; ++j) {
      out(i, j) = offset + j < a.dim(1) ? a(i, offset + j) : T(0);
    }
  }
  return out;
}

template <class T>
Tensor<T> add_bias(Tensor<T> y, const Tensor<T>& b) {
  if (b.empty()) return y;
  for (std::size_t i = 0; i < y.dim(0); ++i) {
    for (std::size_t j = 0; j < y.dim(1); ++j) y(i, j) = static_cast<T>(y(i, j) + b[j]);
  }
  return y;
}

template <Bug B>
struct MutantLinear {
  template <class T>
  LinearRankOutputs<T> column_parallel(Communicator& tp, const ColumnParallelConfig& cfg,
                                       const LinearRankInputs<T>& in) const {
    const int p = tp.size();
    const auto r = static_cast<std::size_t>(tp.rank());
    const std::size_t in_f = in.w_shard.dim(1);
    const auto token_sizes = split_sizes(cfg.token_split, cfg.tokens, p);
    // Forward: the full x, gathered along tokens under sequence parallelism.
    Tensor<T> x = in.x;
    if (cfg.sequence_parallel_input) {
      if constexpr (B == Bug::floor_split_loses_rows) {
        const std::size_t each = cfg.tokens / static_cast<std::size_t>(p);
        const Tensor<T> mine = rows(in.x, 0, std::min(each, in.x.dim(0)));
        Tensor<T> padded({each, in_f});
        std::copy(mine.values().begin(), mine.values().end(), padded.values().begin());
        Tensor<T> all({each * static_cast<std::size_t>(p), in_f});
        tp.all_gather<T>(padded.span(), all.span());
        x = Tensor<T>({cfg.tokens, in_f});
        std::copy(all.values().begin(), all.values().end(), x.values().begin());
      } else {
        x = all_gather_tokens(tp, in.x, token_sizes);
      }
    }
    Tensor<T> y = linear(x, in.w_shard, in.b, Kernel::deterministic);
    const auto out_sizes = split_sizes(cfg.out_split, cfg.out_features, p);
    if (cfg.gather_output) {
      if constexpr (B == Bug::gather_wrong_axis) {
        Tensor<T> all({x.dim(0), cfg.out_features});
        tp.all_gather<T>(y.span(), all.span(), scaled(out_sizes, x.dim(0)));
        y = std::move(all);
      } else {
        y = all_gather_last_axis(tp, y, out_sizes);
      }
    }
    // Backward.
    Tensor<T> dy = in.dy;
    if (cfg.gather_output) {
      const auto pieces = split(cfg.out_split, cfg.out_features, p);
      dy = columns(in.dy, pieces[r].offset, pieces[r].size);
    }
    // Under sequence parallelism only the shard is kept: the backward gathers x again.
    if (cfg.sequence_parallel_input) x = all_gather_tokens(tp, in.x, token_sizes);
    auto g = linear_backward(x, in.w_shard, in.has_bias, dy, Kernel::deterministic);
    Tensor<T> dx = std::move(g.dx);
    if (cfg.sequence_parallel_input) {
      if constexpr (B == Bug::sp_backward_all_reduce) {
        tp.all_reduce<T>(dx.span(), ReduceOp::sum, cfg.all_reduce_algorithm);
        std::size_t offset = 0;
        for (std::size_t k = 0; k < r; ++k) offset += token_sizes[k];
        dx = rows(dx, offset, token_sizes[r]);
      } else {
        dx = reduce_scatter_tokens(tp, dx, token_sizes, cfg.all_reduce_algorithm);
      }
    } else if constexpr (B != Bug::column_dx_not_summed) {
      tp.all_reduce<T>(dx.span(), B == Bug::column_dx_averaged ? ReduceOp::avg : ReduceOp::sum,
                       cfg.all_reduce_algorithm);
      if constexpr (B == Bug::dx_reduced_twice) {
        tp.all_reduce<T>(dx.span(), ReduceOp::sum, cfg.all_reduce_algorithm);
      }
    }
    Tensor<T> dw = std::move(g.dw);
    if constexpr (B == Bug::dw_transposed) {
      dw = Tensor<T>(dw.shape(), transpose(dw).values());
    }
    return {std::move(y), std::move(dx), std::move(dw), std::move(g.db)};
  }

  template <class T>
  LinearRankOutputs<T> row_parallel(Communicator& tp, const RowParallelConfig& cfg,
                                    const LinearRankInputs<T>& in) const {
    const int p = tp.size();
    const auto r = static_cast<std::size_t>(tp.rank());
    Tensor<T> x = in.x;
    if (!cfg.input_is_parallel) {
      const auto pieces = split(cfg.in_split, in.x.dim(1), p);
      std::size_t offset = pieces[r].offset;
      if constexpr (B == Bug::offset_off_by_one) offset += 1;
      if constexpr (B == Bug::every_rank_uses_rank0_shard) offset = pieces[0].offset;
      x = columns(in.x, offset, pieces[r].size);
    }
    const std::size_t tokens = x.dim(0);
    const std::size_t out_f = in.w_shard.dim(0);
    Tensor<T> partial = linear(x, in.w_shard, Tensor<T>(), Kernel::deterministic);
    if constexpr (B == Bug::bias_on_every_rank) partial = add_bias(std::move(partial), in.b);
    const ReduceOp op = B == Bug::sum_replaced_by_average ? ReduceOp::avg : ReduceOp::sum;
    const auto token_sizes = split_sizes(cfg.token_split, tokens, p);
    Tensor<T> y;
    if constexpr (B == Bug::partial_not_reduced) {
      // No reduction at all: each rank keeps its own partial product (its token rows of it
      // under sequence parallelism).
      if (cfg.sequence_parallel_output) {
        std::size_t offset = 0;
        for (std::size_t k = 0; k < r; ++k) offset += token_sizes[k];
        y = rows(partial, offset, token_sizes[r]);
      } else {
        y = std::move(partial);
      }
    } else if (cfg.sequence_parallel_output) {
      y = Tensor<T>({token_sizes[r], out_f});
      tp.reduce_scatter<T>(partial.span(), y.span(), scaled(token_sizes, out_f), op,
                           cfg.reduce_algorithm);
    } else {
      tp.all_reduce<T>(partial.span(), op, cfg.reduce_algorithm);
      y = std::move(partial);
    }
    if constexpr (B != Bug::bias_on_every_rank) y = add_bias(std::move(y), in.b);
    // Backward.
    Tensor<T> dy = cfg.sequence_parallel_output ? all_gather_tokens(tp, in.dy, token_sizes) : in.dy;
    auto g = linear_backward(x, in.w_shard, in.has_bias, dy, Kernel::deterministic);
    Tensor<T> dx = std::move(g.dx);
    if (!cfg.input_is_parallel) {
      dx = all_gather_last_axis(tp, dx, split_sizes(cfg.in_split, in.x.dim(1), p));
    }
    Tensor<T> db = std::move(g.db);
    if constexpr (B == Bug::grad_b_scaled_by_inverse_p) {
      for (auto& v : db.values()) v = static_cast<T>(v / static_cast<T>(p));
    }
    if constexpr (B == Bug::sp_db_from_local_tokens) {
      if (cfg.sequence_parallel_output && in.has_bias) {
        db = linear_backward(rows(x, 0, in.dy.dim(0)), in.w_shard, true, in.dy,
                             Kernel::deterministic)
                 .db;
      }
    }
    return {std::move(y), std::move(dx), std::move(g.dw), std::move(db)};
  }
};

template <Bug B>
constexpr auto& make = make_mutant<LinearImplementation, LinearAdapter<MutantLinear<B>>>;

// The catalog: each bug's name (as "mutant:<name>") and its story.
constexpr Mutant<LinearImplementation> catalog[] = {
    {"bias-on-every-rank",
     "row_parallel_linear adds the bias to every rank's partial product before the "
     "all_reduce, so the output carries P copies of it (the bias must be added once, after "
     "the reduction)",
     &make<Bug::bias_on_every_rank>},
    {"column-dx-not-summed",
     "column_parallel_linear's backward returns each rank's partial dx = dy_r·W_r without the "
     "all_reduce over the tensor-parallel group (Megatron's f: identity forward, all_reduce "
     "backward, forgotten)",
     &make<Bug::column_dx_not_summed>},
    {"grad-b-scaled-by-inverse-p",
     "row_parallel_linear's db is divided by P, as if the replicated bias gradient were "
     "averaged like a data-parallel gradient",
     &make<Bug::grad_b_scaled_by_inverse_p>},
    {"floor-split-loses-rows",
     "the sequence-parallel all_gather of x assumes floor(tokens/P) rows per rank, so an uneven "
     "token split loses its remainder rows (the uneven gather that lost a row)",
     &make<Bug::floor_split_loses_rows>},
    {"offset-off-by-one",
     "row_parallel_linear splitting its input locally takes the columns starting one past its "
     "offset: every shard boundary is shifted by one feature",
     &make<Bug::offset_off_by_one>},
    {"every-rank-uses-rank0-shard",
     "row_parallel_linear splitting its input locally takes the columns at rank 0's offset on "
     "every rank",
     &make<Bug::every_rank_uses_rank0_shard>},
    {"gather-wrong-axis",
     "column_parallel_linear with gather_output concatenates the [tokens, out_r] pieces along "
     "the flat buffer (tokens) and reinterprets the result as [tokens, out]: the all_gather "
     "along the wrong axis",
     &make<Bug::gather_wrong_axis>},
    {"sum-replaced-by-average",
     "row_parallel_linear reduces the partial products with avg instead of sum",
     &make<Bug::sum_replaced_by_average>},
    {"sp-db-from-local-tokens",
     "row_parallel_linear with a sequence-parallel output computes db from this rank's token "
     "shard of dy only, without the all_gather: a partial sum on each rank, never combined "
     "(like LayerNorm gradients never summed under sequence parallelism)",
     &make<Bug::sp_db_from_local_tokens>},
    {"sp-backward-all-reduce",
     "column_parallel_linear with a sequence-parallel input all_reduces dx and slices its "
     "tokens instead of a reduce_scatter: right values, twice the traffic (the wrong conjugate "
     "collective)",
     &make<Bug::sp_backward_all_reduce>},
    {"dw-transposed",
     "the weight gradient is computed as xᵀ·dy ([in, out_r]) and stored into the [out_r, in] "
     "buffer as is",
     &make<Bug::dw_transposed>},
    {"column-dx-averaged",
     "column_parallel_linear's backward all_reduces dx with avg instead of sum (the "
     "tensor-parallel sum of partial input gradients treated like a data-parallel gradient "
     "average): dx is 1/P of what it should be",
     &make<Bug::column_dx_averaged>},
    {"partial-not-reduced",
     "row_parallel_linear returns each rank's partial product x_r·W_rᵀ (+ b) without the "
     "all_reduce (reduce_scatter under sequence parallelism) over the tensor-parallel group "
     "(Megatron's reduce_from_tensor_model_parallel_region forgotten): every rank holds a "
     "different, partial y",
     &make<Bug::partial_not_reduced>},
    {"dx-reduced-twice",
     "column_parallel_linear's backward all_reduces dx twice (a hook registered in two "
     "places), multiplying it by P",
     &make<Bug::dx_reduced_twice>},
};

}  // namespace

std::span<const Mutant<LinearImplementation>> linear_mutants() { return catalog; }

}  // namespace shardcheck::check
