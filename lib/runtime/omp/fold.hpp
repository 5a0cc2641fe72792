// The reduction kernel of the OpenMP-thread backend: an elementwise left fold of several
// ranks' buffers in a given order, the order being what makes each algorithm's rounding its own.
#pragma once

#include "runtime/dtype.hpp"
#include "runtime/reduce_op.hpp"

#include <algorithm>
#include <cstddef>
#include <span>

namespace shardcheck::omp {

namespace detail {

template <Element T, ReduceOp Op>
void fold_typed(std::span<const void* const> inputs, std::size_t offset, std::size_t len,
                void* out_raw, int group_size) {
  // Blocks keep the accumulator in cache; a whole block is read from every input before any
  // of it is written, so `out` may be the same memory as one input (in-place collectives).
  constexpr std::size_t block = 1024;
  T acc[block];
  T* out = static_cast<T*>(out_raw);
  for (std::size_t start = 0; start < len; start += block) {
    const std::size_t n = std::min(block, len - start);
    const T* first = static_cast<const T*>(inputs[0]) + offset + start;
    std::copy(first, first + n, acc);
    for (std::size_t j = 1; j < inputs.size(); ++j) {
      const T* x = static_cast<const T*>(inputs[j]) + offset + start;
      for (std::size_t i = 0; i < n; ++i) acc[i] = combine(Op, acc[i], x[i]);
    }
    if constexpr (Op == ReduceOp::avg) {
      for (std::size_t i = 0; i < n; ++i) acc[i] = finish_avg(acc[i], group_size);
    }
    std::copy(acc, acc + n, out + start);
  }
}

}  // namespace detail

// out[i] = ((in_0[offset+i] (+) in_1[offset+i]) (+) ...) (+) in_last[offset+i], i < len, where
// (+) is `op` (reduce_op.hpp); avg then divides by group_size once.
// @pre inputs non-empty; every input has offset + len elements of `dtype`; op supports dtype.
inline void fold(DType dtype, ReduceOp op, std::span<const void* const> inputs,
                 std::size_t offset, std::size_t len, void* out, int group_size) {
  if (len == 0) return;
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
      case ReduceOp::sum:
        detail::fold_typed<T, ReduceOp::sum>(inputs, offset, len, out, group_size);
        break;
      case ReduceOp::avg:
        detail::fold_typed<T, ReduceOp::avg>(inputs, offset, len, out, group_size);
        break;
      case ReduceOp::max:
        detail::fold_typed<T, ReduceOp::max>(inputs, offset, len, out, group_size);
        break;
      case ReduceOp::min:
        detail::fold_typed<T, ReduceOp::min>(inputs, offset, len, out, group_size);
        break;
      case ReduceOp::product:
        detail::fold_typed<T, ReduceOp::product>(inputs, offset, len, out, group_size);
        break;
    }
  });
}

}  // namespace shardcheck::omp
