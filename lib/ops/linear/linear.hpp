// Linear layers: the dense op and Megatron-LM's two tensor-parallel splits, forward and backward.
//
// Shapes (PyTorch's convention): x [tokens, in], W [out, in], b [out], y = x·Wᵀ + b [tokens, out].
// Gradients: dx = dy·W [tokens, in]; dW = dyᵀ·x [out, in]; db = Σ_tokens dy [out].
//
// Arithmetic, for every element type T (float64, float32, bfloat16, float16):
//   - products are accumulated in acc_t<T> (float64 for float64, float32 otherwise: bfloat16 and
//     float16 as tensor cores do; Eigen's own 16-bit products accumulate in 16 bits, so they are
//     not used), then rounded once to T;
//   - the bias is added after that rounding, in T (one more rounding), as matmul + add in T;
//   - communication carries T: row-parallel partial products are rounded to T before the
//     reduction, and the reduction rounds at each step (runtime/reduce_op.hpp).
// Kernel::deterministic accumulates each output element in index order k = 0, 1, ..., so a
// column-parallel rank reproduces the dense result's bits for its features exactly.
// Kernel::fast blocks the loops (another order): its results are checked by bound, not bits.
//
// Sources: Shoeybi et al. 2019 (Megatron-LM) §3; Megatron-LM core/tensor_parallel/layers.py
// (ColumnParallelLinear, RowParallelLinear); Korthikanti et al. 2022 §4.2.2 for the
// sequence-parallel transitions (all_gather forward / reduce_scatter backward and reverse).
#pragma once

#include "layout/split_policy.hpp"
#include "runtime/communicator.hpp"
#include "tensor/tensor.hpp"

#include <string_view>

#include <optional>
#include <type_traits>

namespace shardcheck {

enum class Kernel { deterministic, fast };
SHARDCHECK_ENUM_NAMES(Kernel, "deterministic", "fast");

// ---- the dense op (also each rank's local compute) ----

// y = x·Wᵀ + b. @pre x [tokens, in], w [out, in], b empty or [out].
template <class T>
Tensor<T> linear(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b,
                 Kernel kernel = Kernel::deterministic);

template <class T>
struct LinearGrads {
  Tensor<T> dx;  // [tokens, in]
  Tensor<T> dw;  // [out, in]
  Tensor<T> db;  // [out], empty when the layer has no bias
};

// Gradients of linear() given dy [tokens, out]; each element is one dot product accumulated in
// acc_t<T> and rounded once (db: the sum over tokens, in token order).
template <class T>
LinearGrads<T> linear_backward(const Tensor<T>& x, const Tensor<T>& w, bool has_bias,
                               const Tensor<T>& dy, Kernel kernel = Kernel::deterministic);

// ---- splitting the dense parameters (each rank's piece under a split policy) ----

// Rows [offset, offset + size) of w [out, in]: the output features of `rank`.
template <class T>
Tensor<T> split_weight_by_output_features(const Tensor<T>& w, const SplitPolicy& policy, int parts,
                                          int rank);
// Columns of w [out, in]: the input features of `rank`.
template <class T>
Tensor<T> split_weight_by_input_features(const Tensor<T>& w, const SplitPolicy& policy, int parts,
                                         int rank);
// Elements of b [out] matching split_weight_by_output_features (empty b stays empty).
template <class T>
Tensor<T> split_bias(const Tensor<T>& b, const SplitPolicy& policy, int parts, int rank);
// Columns of x [tokens, in] matching split_weight_by_input_features.
template <class T>
Tensor<T> split_input_by_features(const Tensor<T>& x, const SplitPolicy& policy, int parts,
                                  int rank);
// Rows of x [tokens, ...]: a rank's tokens under sequence parallelism.
template <class T>
Tensor<T> split_by_tokens(const Tensor<T>& x, const SplitPolicy& policy, int parts, int rank);

// ---- column-parallel: W split by rows (output features) ----

struct ColumnParallelConfig {
  // The global sizes, known to every rank (as Megatron's layers know output_size and the
  // sequence length): the counts of the uneven gathers derive from them, with no collective
  // to exchange shapes. out_features is required with gather_output, tokens with
  // sequence_parallel_input; a rank whose pieces disagree with them gets a UsageError.
  std::size_t out_features = 0;
  std::size_t tokens = 0;
  SplitPolicy out_split = SplitPolicy::chunk();  // output features over the tp ranks
  bool gather_output = false;  // all_gather y along features (else y stays a feature shard)
  // x arrives as a token shard (sequence parallelism): all_gather it along tokens forward,
  // reduce_scatter dx backward. Else x is the full input, identical on every rank.
  bool sequence_parallel_input = false;
  SplitPolicy token_split = SplitPolicy::chunk();
  Algorithm all_reduce_algorithm = Algorithm::ring;
  Kernel kernel = Kernel::deterministic;
};

template <class T>
struct ColumnParallelOutput {
  Tensor<T> y;  // [tokens, out_r], or [tokens, out] with gather_output
};

// Forward on one rank. x: [tokens, in] (or [tokens_r, in] with sequence_parallel_input);
// w_shard [out_r, in], b_shard empty or [out_r]. Collectives: all_gather of x (sequence
// parallel), all_gather of y (gather_output).
template <class T>
ColumnParallelOutput<T> column_parallel_linear(Communicator& tp, const ColumnParallelConfig& cfg,
                                               const Tensor<T>& x, const Tensor<T>& w_shard,
                                               const Tensor<T>& b_shard);

// Backward on one rank. dy: [tokens, out_r], or [tokens, out] with gather_output (the rank
// takes its columns). Returns dx [tokens, in] summed over the ranks by all_reduce (or its token
// shard by reduce_scatter with sequence_parallel_input), dw_shard [out_r, in], db_shard [out_r].
// @post dx is bit-identical on every rank (all_reduce's result).
template <class T>
LinearGrads<T> column_parallel_linear_backward(Communicator& tp, const ColumnParallelConfig& cfg,
                                               const Tensor<T>& x, const Tensor<T>& w_shard,
                                               bool has_bias, const Tensor<T>& dy);

// ---- row-parallel: W split by columns (input features) ----

struct RowParallelConfig {
  SplitPolicy in_split = SplitPolicy::chunk();  // input features over the tp ranks
  // x is already this rank's feature shard (the output of a column-parallel layer); else x is
  // the full input and each rank takes its columns.
  bool input_is_parallel = true;
  // Reduce the partial outputs with reduce_scatter along tokens (sequence parallelism) instead
  // of all_reduce; y is then this rank's token shard.
  bool sequence_parallel_output = false;
  SplitPolicy token_split = SplitPolicy::chunk();
  Algorithm reduce_algorithm = Algorithm::ring;
  Kernel kernel = Kernel::deterministic;
};

template <class T>
struct RowParallelOutput {
  Tensor<T> y;  // [tokens, out], or [tokens_r, out] with sequence_parallel_output
};

// Forward on one rank: partial = x_r·W_rᵀ rounded to T, reduced over the ranks, then the
// unsplit bias b [out] added once, after the reduction (never before: that adds it P times).
template <class T>
RowParallelOutput<T> row_parallel_linear(Communicator& tp, const RowParallelConfig& cfg,
                                         const Tensor<T>& x, const Tensor<T>& w_shard,
                                         const Tensor<T>& b);

// Backward on one rank. dy: [tokens, out] (or the token shard with sequence_parallel_output,
// all_gathered along tokens first). Returns dx: with input_is_parallel, this rank's columns
// [tokens, in_r]; without it, the full [tokens, in] all_gathered along features (the backward of
// the local split), bit-identical on every rank. dw_shard [out, in_r]. db [out]: the full sum
// over tokens, computed from the full dy on every rank, so bit-identical on every rank.
template <class T>
LinearGrads<T> row_parallel_linear_backward(Communicator& tp, const RowParallelConfig& cfg,
                                            const Tensor<T>& x, const Tensor<T>& w_shard,
                                            bool has_bias, const Tensor<T>& dy);

}  // namespace shardcheck
