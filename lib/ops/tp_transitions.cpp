#include "ops/tp_transitions.hpp"

#include "ops/workspace.hpp"
#include "runtime/errors.hpp"

#include <numeric>
#include <string>
#include <vector>

namespace shardcheck {
namespace {

std::string join(std::span<const std::size_t> v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : ", ") + std::to_string(v[i]);
  return s + ']';
}

std::string where(const char* op, const Communicator& comm) {
  return std::string(op) + " on rank " + std::to_string(comm.rank()) + ": ";
}

void check_counts(const char* op, const Communicator& comm, std::span<const std::size_t> counts) {
  if (counts.size() != static_cast<std::size_t>(comm.size())) {
    throw UsageError(where(op, comm) + "got " + std::to_string(counts.size()) + " counts " +
                     join(counts) + " for a group of " + std::to_string(comm.size()) +
                     " ranks; pass one count per rank");
  }
}

// The checks of a gather's arguments: one count per rank, and `shard` this rank's piece, whose
// extent along `axis` is its count (`has_axis`: the shard has the dimensions the gather needs).
// `unit` names what the counts count ("row"), `expected` the shard the caller must pass.
template <class T>
void check_gather_shard(const char* op, const Communicator& comm, const Tensor<T>& shard,
                        bool has_axis, std::size_t axis, std::span<const std::size_t> counts,
                        const std::string& unit, const char* expected) {
  check_counts(op, comm, counts);
  const auto r = static_cast<std::size_t>(comm.rank());
  if (!has_axis || shard.dim(axis) != counts[r]) {
    throw UsageError(where(op, comm) + "the shard is " + format_shape(shard.shape()) + " but the " +
                     unit + " counts " + join(counts) + " give this rank " +
                     std::to_string(counts[r]) + " " + unit + "s; pass " + expected +
                     " cut by the same split as the counts");
  }
}

// Elements per row of a tensor [rows, ...]: the product of the trailing dimensions.
template <class T>
std::size_t row_size(const Tensor<T>& t) {
  Shape tail(t.shape().begin() + 1, t.shape().end());
  return numel(tail);
}

std::vector<std::size_t> scaled(std::span<const std::size_t> counts, std::size_t by) {
  std::vector<std::size_t> out(counts.begin(), counts.end());
  for (auto& c : out) c *= by;
  return out;
}

}  // namespace

template <class T>
Tensor<T> all_gather_tokens(Communicator& comm, const Tensor<T>& shard,
                            std::span<const std::size_t> row_counts) {
  check_gather_shard("all_gather_tokens", comm, shard, shard.ndim() >= 1, 0, row_counts, "row",
                     "the shard [rows_r, ...]");
  const std::size_t row = row_size(shard);
  const std::size_t rows = std::accumulate(row_counts.begin(), row_counts.end(), std::size_t{0});
  Shape shape = shard.shape();
  shape[0] = rows;
  Tensor<T> full(shape);
  const auto counts = scaled(row_counts, row);
  comm.all_gather(shard.span(), full.span(), std::span<const std::size_t>(counts));
  return full;
}

template <class T>
Tensor<T> reduce_scatter_tokens(Communicator& comm, const Tensor<T>& full,
                                std::span<const std::size_t> row_counts, Algorithm algo) {
  constexpr const char* op = "reduce_scatter_tokens";
  check_counts(op, comm, row_counts);
  const std::size_t rows = std::accumulate(row_counts.begin(), row_counts.end(), std::size_t{0});
  if (full.ndim() < 1 || full.dim(0) != rows) {
    throw UsageError(where(op, comm) + "the tensor is " + format_shape(full.shape()) +
                     " but the row counts " + join(row_counts) + " add up to " +
                     std::to_string(rows) + " rows; pass the full [rows, ...] partial tensor");
  }
  const auto r = static_cast<std::size_t>(comm.rank());
  const std::size_t row = row_size(full);
  Shape shape = full.shape();
  shape[0] = row_counts[r];
  Tensor<T> mine(shape);
  const auto counts = scaled(row_counts, row);
  comm.reduce_scatter(full.span(), mine.span(), std::span<const std::size_t>(counts), ReduceOp::sum,
                      algo);
  return mine;
}

template <class T>
Tensor<T> all_gather_last_axis(Communicator& comm, const Tensor<T>& shard,
                               std::span<const std::size_t> col_counts) {
  check_gather_shard("all_gather_last_axis", comm, shard, shard.ndim() == 2, 1, col_counts,
                     "column", "a 2-D shard [rows, cols_r]");
  const std::size_t rows = shard.dim(0);
  const std::size_t cols = std::accumulate(col_counts.begin(), col_counts.end(), std::size_t{0});
  // Gather the row-major pieces whole (block k = [rows, c_k] at offset rows·off_k), then move
  // each block's rows into its columns.
  auto held_blocks = Workspace::of_this_rank().buffer<T>(rows * cols);  // the receive buffer
  std::vector<T>& blocks = *held_blocks;
  const auto counts = scaled(col_counts, rows);
  comm.all_gather(shard.span(), std::span<T>(blocks), std::span<const std::size_t>(counts));
  Tensor<T> full(Shape{rows, cols});
  std::size_t off = 0;
  for (const std::size_t c : col_counts) {
    const T* block = blocks.data() + rows * off;
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = 0; j < c; ++j) full(i, off + j) = block[i * c + j];
    }
    off += c;
  }
  return full;
}

#define SHARDCHECK_INSTANTIATE(T)                                                       \
  template Tensor<T> all_gather_tokens<T>(Communicator&, const Tensor<T>&,              \
                                          std::span<const std::size_t>);                \
  template Tensor<T> reduce_scatter_tokens<T>(Communicator&, const Tensor<T>&,          \
                                              std::span<const std::size_t>, Algorithm); \
  template Tensor<T> all_gather_last_axis<T>(Communicator&, const Tensor<T>&,           \
                                             std::span<const std::size_t>);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck
