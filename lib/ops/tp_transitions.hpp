// Tensor-parallel and sequence-parallel transitions: the collectives that move a row-major
// tensor between "full" and "sharded along an axis", with uneven pieces (zeros included).
//
// The communicator's all_gather and reduce_scatter concatenate the ranks' pieces along the
// flat buffer. For a row-major [rows, cols] tensor that is the first axis (tokens). Gathering
// along the last axis (features) is not a flat concatenation: rank k's [rows, c_k] piece must
// land in columns [off_k, off_k + c_k) of every row. all_gather_last_axis does that; using the
// flat all_gather instead is the "concatenated along the wrong axis" bug.
//
// Counts are per rank, in rows (tokens) or columns (features), in rank order; every rank
// passes the same counts (the runtime throws CollectiveMismatch otherwise).
// Korthikanti et al. 2022 §4.2.2: g = all_gather forward / reduce_scatter backward, and ḡ the
// reverse.
#pragma once

#include "runtime/communicator.hpp"
#include "runtime/reduce_op.hpp"
#include "tensor/tensor.hpp"

#include <cstddef>
#include <span>

namespace shardcheck {

// [rows_r, ...] on each rank -> [Σ rows_k, ...] on every rank (concatenation along axis 0).
// @pre shard.ndim() >= 1, shard.dim(0) == row_counts[rank], trailing dims equal on all ranks.
template <class T>
Tensor<T> all_gather_tokens(Communicator& comm, const Tensor<T>& shard,
                            std::span<const std::size_t> row_counts);

// [rows, ...] on each rank (partial values) -> this rank's rows [rows_r, ...] of the sum over
// ranks, in `algo`'s order (runtime/communicator.hpp). @pre full.dim(0) == Σ row_counts.
template <class T>
Tensor<T> reduce_scatter_tokens(Communicator& comm, const Tensor<T>& full,
                                std::span<const std::size_t> row_counts,
                                Algorithm algo = Algorithm::ring);

// [rows, cols_r] on each rank -> [rows, Σ cols_k] on every rank, rank k's columns at offset
// Σ_{k' < k} cols_k' (concatenation along the last axis). @pre shard 2-D,
// shard.dim(1) == col_counts[rank], rows equal on all ranks.
template <class T>
Tensor<T> all_gather_last_axis(Communicator& comm, const Tensor<T>& shard,
                               std::span<const std::size_t> col_counts);

}  // namespace shardcheck
