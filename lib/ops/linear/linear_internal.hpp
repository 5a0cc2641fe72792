// Internals shared by linear.cpp (dense op, splits), linear_parallel.cpp (column- and
// row-parallel layers) and the ops built of linears: the shape checks and their messages,
// slicing, the dense cores the parallel layers run on each rank, and the configurations of a
// block's two linears. Not part of the API.
#pragma once

#include "ops/linear/linear.hpp"
#include "runtime/errors.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace shardcheck::linear_detail {

// ---------------------------------------------------------------- messages

inline std::string str(std::size_t n) { return std::to_string(n); }

inline std::string join(const std::vector<std::size_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : ", ") + str(v[i]);
  return s + ']';
}

// "column_parallel_linear on rank 2: "
inline std::string on_rank(const char* op, const Communicator& comm) {
  return std::string(op) + " on rank " + std::to_string(comm.rank()) + ": ";
}

template <class T>
void require_2d(const std::string& where, const char* name, const Tensor<T>& t,
                const char* expected) {
  if (t.ndim() != 2) {
    throw UsageError(where + name + " must be 2-D " + expected + " but is " +
                     format_shape(t.shape()));
  }
}

// split() with the caller's context prepended to its UsageError.
inline std::vector<Piece> pieces(const std::string& where, const std::string& what,
                                 const SplitPolicy& policy, std::size_t n, int parts) {
  try {
    return split(policy, n, parts);
  } catch (const UsageError& e) {
    throw UsageError(where + "cannot split " + what + " with " + policy.to_string() + ": " +
                     e.what());
  }
}

inline std::vector<std::size_t> sizes_of(const std::vector<Piece>& ps) {
  std::vector<std::size_t> s;
  s.reserve(ps.size());
  for (const auto& p : ps) s.push_back(p.size);
  return s;
}

// ---------------------------------------------------------------- slicing

template <class T>
Tensor<T> take_rows(const Tensor<T>& t, Piece p) {
  Shape shape = t.shape();
  const std::size_t row = numel(Shape(shape.begin() + 1, shape.end()));
  shape[0] = p.size;
  Tensor<T> out(shape);
  std::copy_n(t.data() + p.offset * row, p.size * row, out.data());
  return out;
}

template <class T>
Tensor<T> take_cols(const Tensor<T>& t, Piece p) {
  const std::size_t rows = t.dim(0);
  Tensor<T> out(Shape{rows, p.size});
  for (std::size_t i = 0; i < rows; ++i) {
    std::copy_n(t.data() + i * t.dim(1) + p.offset, p.size, out.data() + i * p.size);
  }
  return out;
}

// ---------------------------------------------------------------- checks shared by the ops

// b empty, or [n] with n = w.dim(0).
template <class T>
void require_bias(const std::string& where, const char* b_name, const Tensor<T>& b,
                  const char* w_name, const Tensor<T>& w, const char* out_name) {
  if (!b.empty() && b.shape() != Shape({w.dim(0)})) {
    throw UsageError(where + b_name + " is " + format_shape(b.shape()) + " but " + w_name + " is " +
                     format_shape(w.shape()) + "; " + b_name + " must be empty (no bias) or [" +
                     out_name + "] with " + out_name + " = " + w_name +
                     ".dim(0) = " + str(w.dim(0)));
  }
}

// The ranks' token counts by `token_split` of the configured global token count `tokens` (the
// config's cfg.tokens), this rank's token shard `name` checked against its own: what an op whose
// input arrives as a token shard (sequence parallelism) takes the counts of its gathers from.
// @throws UsageError when the split fails or the shard holds another count.
template <class T>
std::vector<std::size_t> require_token_shard(const std::string& where, const Communicator& comm,
                                             const SplitPolicy& token_split, std::size_t tokens,
                                             const char* name, const Tensor<T>& shard) {
  auto counts = sizes_of(
      pieces(where, "cfg.tokens = " + str(tokens) + " tokens", token_split, tokens, comm.size()));
  const auto r = static_cast<std::size_t>(comm.rank());
  if (shard.dim(0) != counts[r]) {
    throw UsageError(where + name + " is " + format_shape(shard.shape()) + " but token_split " +
                     token_split.to_string() + " gives this rank " + str(counts[r]) +
                     " of cfg.tokens = " + str(tokens) +
                     " tokens; give rank k split_by_tokens(x, token_split, P, k) and set "
                     "cfg.tokens to the global token count");
  }
  return counts;
}

// x [tokens, in] against w [out, in].
template <class T>
void require_same_in(const std::string& where, const char* w_name, const Tensor<T>& w,
                     const char* x_name, const Tensor<T>& x, const char* w_shape) {
  if (w.dim(1) != x.dim(1)) {
    throw UsageError(where + w_name + " is " + format_shape(w.shape()) + " but " + x_name + " is " +
                     format_shape(x.shape()) + "; " + w_name + " must be " + w_shape +
                     " with in = " + x_name + ".dim(1) = " + str(x.dim(1)));
  }
}

// ---------------------------------------------------------------- the dense cores

// y = x·wᵀ (+ b) with x [tokens, in], w [out, in], b empty or [out]; shapes already checked.
template <class T>
Tensor<T> forward_core(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b, Kernel kernel);

// Gradients of y = x·wᵀ + b given dy [tokens, out]; shapes already checked.
template <class T>
LinearGrads<T> backward_core(const Tensor<T>& x, const Tensor<T>& w, bool has_bias,
                             const Tensor<T>& dy, Kernel kernel);

// y[t, j] = y[t, j] + b[j] in T (one rounding); no-op for an empty b.
template <class T>
void add_bias(Tensor<T>& y, const Tensor<T>& b);

// ---------------------------------------------------------------- a block's two linears
//
// A tensor-parallel block (the MLP, attention, the model's output layer, the norm's block) opens
// with a column-parallel linear and closes with a row-parallel one; under sequence parallelism
// its input and output are token shards (Korthikanti et al. 2022 §4.2.2). These derive both
// linears' settings from the block's, so every block wires them alike.

// The opening linear: tokens, sequence_parallel_input = sequence_parallel, token_split,
// all_reduce_algorithm = algorithm and kernel as given; every other field its default (no
// gather_output: y stays the rank's feature shard).
ColumnParallelConfig block_column_config(std::size_t tokens, bool sequence_parallel,
                                         const SplitPolicy& token_split, Algorithm algorithm,
                                         Kernel kernel = Kernel::deterministic);

// The closing linear: input_is_parallel (x is the opening linear's feature shard),
// sequence_parallel_output = sequence_parallel, token_split, reduce_algorithm = algorithm and
// kernel as given; in_split its default.
RowParallelConfig block_row_config(bool sequence_parallel, const SplitPolicy& token_split,
                                   Algorithm algorithm, Kernel kernel = Kernel::deterministic);

}  // namespace shardcheck::linear_detail
