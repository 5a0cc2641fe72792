// The reduction kernel of the OpenMP-thread backend, shared with the MPI backend (runtime/mpi/):
// an elementwise left fold of several ranks' buffers in a given order, the order being what
// makes each algorithm's rounding its own. Nothing here depends on how the buffers arrived, so a
// backend that gathers the contributions into local memory first gets the same bits.
#pragma once

#include "runtime/counts.hpp"
#include "runtime/dtype.hpp"
#include "runtime/ledger.hpp"
#include "runtime/reduce_op.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace shardcheck::omp {

namespace detail {

// Output larger than this (bytes one rank writes in one call) goes out with non-temporal
// stores: it would not stay in the cache anyway, and a normal store first reads the line it
// overwrites. glibc's memcpy (the benchmarks' reference) switches to such stores above a
// threshold of the same order (a fraction of the L3). Measured in docs/benchmarks.md.
inline constexpr std::size_t stream_threshold = std::size_t{4} << 20;

// memcpy with non-temporal stores for the 16-byte-aligned middle. Callers end with a fence.
inline void stream_bytes(void* dst, const void* src, std::size_t bytes) {
#if defined(__SSE2__)
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const std::size_t head = std::min(bytes, (16 - reinterpret_cast<std::uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
    const auto* si = reinterpret_cast<const __m128i*>(s);
    auto* di = reinterpret_cast<__m128i*>(d);
    _mm_stream_si128(di + 0, _mm_loadu_si128(si + 0));
    _mm_stream_si128(di + 1, _mm_loadu_si128(si + 1));
    _mm_stream_si128(di + 2, _mm_loadu_si128(si + 2));
    _mm_stream_si128(di + 3, _mm_loadu_si128(si + 3));
  }
  std::memcpy(d, s, bytes);
#else
  std::memcpy(dst, src, bytes);
#endif
}

inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

template <Element T, ReduceOp Op>
void fold_typed(std::span<const void* const> inputs, std::size_t offset, std::size_t len,
                std::span<void* const> outs, int group_size) {
  // Blocks keep the accumulator in cache; a whole block is read from every input before any
  // of it is written, so `out` may be the same memory as one input (in-place collectives).
  constexpr std::size_t block = 1024;
  alignas(64) T acc[block];
  const bool stream = len * sizeof(T) * outs.size() >= stream_threshold;
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
    for (void* out : outs) {
      if (stream) stream_bytes(static_cast<T*>(out) + start, acc, n * sizeof(T));
      else std::copy(acc, acc + n, static_cast<T*>(out) + start);
    }
  }
  if (stream) stream_fence();
}

}  // namespace detail

// For every out in `outs`: out[i] = ((in_0[offset+i] (+) in_1[offset+i]) (+) ...) (+)
// in_last[offset+i], i < len, where (+) is `op` (reduce_op.hpp); avg then divides by group_size
// once. An out may be the same memory as an input at the same offset (in place).
// @pre inputs non-empty; every input has offset + len elements of `dtype`; op supports dtype.
inline void fold_to(DType dtype, ReduceOp op, std::span<const void* const> inputs,
                    std::size_t offset, std::size_t len, std::span<void* const> out,
                    int group_size) {
  if (len == 0) return;
  visit_dtype(dtype, [&](auto tag) {
    visit_reduce_op(op, [&](auto op_constant) {
      detail::fold_typed<decltype(tag), decltype(op_constant)::value>(inputs, offset, len, out,
                                                                      group_size);
    });
  });
}

// The group ranks whose contributions make chunk `owner`, in folding order (communicator.hpp):
// ring: owner+1, owner+2, ..., owner (mod p); sequential: 0, 1, ..., p-1. reduce uses the ring
// order with owner = root.
inline std::vector<int> fold_order(Algorithm algo, int owner, int p) {
  std::vector<int> order(static_cast<std::size_t>(p));
  for (int j = 0; j < p; ++j) {
    order[static_cast<std::size_t>(j)] = algo == Algorithm::ring ? wrap_rank(owner + 1 + j, p) : j;
  }
  return order;
}

// fold_to with one output.
inline void fold(DType dtype, ReduceOp op, std::span<const void* const> inputs, std::size_t offset,
                 std::size_t len, void* out, int group_size) {
  void* const outs[] = {out};
  fold_to(dtype, op, inputs, offset, len, outs, group_size);
}

}  // namespace shardcheck::omp
