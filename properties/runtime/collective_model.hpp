// The sequential model of every collective: plain loops over all ranks' buffers, written from
// the documentation in lib/runtime/communicator.hpp, reduce_op.hpp, ledger.hpp and
// wire_bytes.hpp, never from the library's code. The property suites (properties/runtime/) and the
// fuzz harness compare each rank's result with these functions bitwise, and each rank's ledger with
// the byte formulas at the bottom.
//
// Why a second implementation of the binary ops: the library's combine() is what is under
// test, so the model spells the documented semantics out on its own (NaN-propagating max/min
// returning the first NaN operand, ties to the left operand, two's-complement wraparound,
// avg = fold as sum then one division by the group size in the element type, bfloat16 and
// float16 computed in float and rounded once). Only the element types and Eigen's
// float <-> 16-bit conversions (dtype.hpp) are shared.
//
// Buffers are indexed by group rank: bufs[k] is group rank k's buffer. Every function returns
// the expected buffer of every rank (or of the root), so a caller compares all ranks at once.
// Dependencies: dtype.hpp and the standard library only (the fuzz harness includes this).
#pragma once

#include "runtime/dtype.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace shardcheck::model {

// The model's own names, so it does not depend on reduce_op.hpp / ledger.hpp.
enum class Op { sum, avg, max, min, product };
enum class Order { ring, sequential };  // the two all_reduce / reduce_scatter algorithms

template <class T>
using Bufs = std::vector<std::vector<T>>;

// ---------------------------------------------------------------- element semantics

// Raw bits of an element (for bitwise comparison and NaN tests independent of Eigen's).
template <Element T>
auto bits_of(T x) noexcept {
  if constexpr (sizeof(T) == 2) {
    std::uint16_t b = 0;
    std::memcpy(&b, &x, 2);
    return b;
  } else if constexpr (sizeof(T) == 4) {
    std::uint32_t b = 0;
    std::memcpy(&b, &x, 4);
    return b;
  } else {
    std::uint64_t b = 0;
    std::memcpy(&b, &x, 8);
    return b;
  }
}

template <Element T>
T from_bits(decltype(bits_of(T{})) b) noexcept {
  T x;
  std::memcpy(static_cast<void*>(&x), &b, sizeof(T));  // Eigen's 16-bit types are bit copies
  return x;
}

template <Element T>
bool is_nan(T x) noexcept {
  if constexpr (std::is_integral_v<T>) {
    return false;
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return (bits_of(x) & 0x7FFFu) > 0x7F80u;  // exponent all ones, fraction non-zero
  } else if constexpr (std::is_same_v<T, float16>) {
    return (bits_of(x) & 0x7FFFu) > 0x7C00u;
  } else {
    return std::isnan(x);
  }
}

// bfloat16/float16 arithmetic: widen to float (exact), one float operation, round once.
template <Element T>
T add(T a, T b) noexcept {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(U(a) + U(b)));
  } else if constexpr (sizeof(T) == 2) {
    return T(static_cast<float>(a) + static_cast<float>(b));
  } else {
    return a + b;
  }
}

template <Element T>
T mul(T a, T b) noexcept {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(U(a) * U(b)));
  } else if constexpr (sizeof(T) == 2) {
    return T(static_cast<float>(a) * static_cast<float>(b));
  } else {
    return a * b;
  }
}

template <Element T>
bool less(T a, T b) noexcept {
  if constexpr (sizeof(T) == 2 && !std::is_integral_v<T>) {
    return static_cast<float>(a) < static_cast<float>(b);
  } else {
    return a < b;
  }
}

// One binary step, left operand = the running accumulator.
template <Element T>
T step(Op op, T acc, T x) noexcept {
  switch (op) {
    case Op::sum:
    case Op::avg: return add(acc, x);
    case Op::product: return mul(acc, x);
    case Op::max:
      if (is_nan(acc)) return acc;
      if (is_nan(x)) return x;
      return less(acc, x) ? x : acc;  // tie (incl. +0 vs -0): the left operand
    case Op::min:
      if (is_nan(acc)) return acc;
      if (is_nan(x)) return x;
      return less(x, acc) ? x : acc;
  }
  return acc;
}

// avg's last step: one division by the group size, rounded once in T.
template <Element T>
T divide_by(T sum, int p) noexcept {
  if constexpr (std::is_integral_v<T>) {
    return sum;  // avg on integers is a UsageError; never modelled
  } else if constexpr (sizeof(T) == 2) {
    return T(static_cast<float>(sum) / static_cast<float>(T(static_cast<float>(p))));
  } else {
    return sum / static_cast<T>(p);
  }
}

// Folds ranks' elements left to right in the given rank order; avg divides by p at the end.
template <Element T>
T fold(Op op, const Bufs<T>& bufs, std::size_t index, std::span<const int> order, int p) {
  T acc = bufs[static_cast<std::size_t>(order[0])][index];
  for (std::size_t i = 1; i < order.size(); ++i) {
    acc = step(op, acc, bufs[static_cast<std::size_t>(order[i])][index]);
  }
  return op == Op::avg ? divide_by(acc, p) : acc;
}

// The ring order of a chunk owned by `owner`: owner+1, owner+2, ..., owner-1, owner.
inline std::vector<int> ring_order(int p, int owner) {
  std::vector<int> order;
  for (int i = 1; i <= p; ++i) order.push_back((owner + i) % p);
  return order;
}

inline std::vector<int> group_order(int p) {
  std::vector<int> order(static_cast<std::size_t>(p));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

// ---------------------------------------------------------------- chunking

// Balanced split of n over p (the first n mod p chunks get one more): all_reduce's chunks.
inline std::vector<std::size_t> balanced_counts(std::size_t n, int p) {
  const auto up = static_cast<std::size_t>(p);
  std::vector<std::size_t> c(up, n / up);
  for (std::size_t k = 0; k < n % up; ++k) ++c[k];
  return c;
}

// offsets[k] = counts[0] + ... + counts[k-1]; offsets has p + 1 entries.
inline std::vector<std::size_t> offsets_of(std::span<const std::size_t> counts) {
  std::vector<std::size_t> off(counts.size() + 1, 0);
  for (std::size_t k = 0; k < counts.size(); ++k) off[k + 1] = off[k] + counts[k];
  return off;
}

inline std::size_t total(std::span<const std::size_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

// ---------------------------------------------------------------- collectives

// Every rank ends with the root's buffer.
template <Element T>
Bufs<T> broadcast(const Bufs<T>& bufs, int root) {
  return Bufs<T>(bufs.size(), bufs[static_cast<std::size_t>(root)]);
}

// The root's result: chain starting after the root, ending at it.
template <Element T>
std::vector<T> reduce(const Bufs<T>& send, Op op, int root) {
  const int p = static_cast<int>(send.size());
  const auto order = ring_order(p, root);
  std::vector<T> out(send[0].size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = fold(op, send, i, order, p);
  return out;
}

// reduce_scatter: rank k's chunk (counts[k] elements at offset sum(counts[0..k))).
template <Element T>
Bufs<T> reduce_scatter(const Bufs<T>& send, std::span<const std::size_t> counts, Op op,
                       Order algo) {
  const int p = static_cast<int>(send.size());
  const auto off = offsets_of(counts);
  Bufs<T> out(send.size());
  for (int k = 0; k < p; ++k) {
    const auto order = algo == Order::ring ? ring_order(p, k) : group_order(p);
    const auto uk = static_cast<std::size_t>(k);
    for (std::size_t i = off[uk]; i < off[uk + 1]; ++i)
      out[uk].push_back(fold(op, send, i, order, p));
  }
  return out;
}

// all_reduce: the balanced chunks reduced as reduce_scatter does, then every rank gets all.
template <Element T>
Bufs<T> all_reduce(const Bufs<T>& send, Op op, Order algo) {
  const int p = static_cast<int>(send.size());
  const auto counts = balanced_counts(send[0].size(), p);
  const auto chunks = reduce_scatter(send, counts, op, algo);
  std::vector<T> whole;
  for (const auto& c : chunks) whole.insert(whole.end(), c.begin(), c.end());
  return Bufs<T>(send.size(), whole);
}

// all_gather: concat(send_0, ..., send_{p-1}) on every rank; counts are the buffers' sizes.
template <Element T>
Bufs<T> all_gather(const Bufs<T>& send) {
  std::vector<T> whole;
  for (const auto& s : send) whole.insert(whole.end(), s.begin(), s.end());
  return Bufs<T>(send.size(), whole);
}

// The root's result of gather.
template <Element T>
std::vector<T> gather(const Bufs<T>& send) {
  return all_gather(send)[0];
}

// scatter: rank k receives piece k of the root's buffer.
template <Element T>
Bufs<T> scatter(const std::vector<T>& root_send, std::span<const std::size_t> counts) {
  const auto off = offsets_of(counts);
  Bufs<T> out(counts.size());
  for (std::size_t k = 0; k < counts.size(); ++k) {
    out[k].assign(root_send.begin() + static_cast<std::ptrdiff_t>(off[k]),
                  root_send.begin() + static_cast<std::ptrdiff_t>(off[k + 1]));
  }
  return out;
}

// all_to_all: send_counts[s][d] elements go from s to d; rank d's result is the pieces from
// every source, in source order.
template <Element T>
Bufs<T> all_to_all(const Bufs<T>& send, const std::vector<std::vector<std::size_t>>& send_counts) {
  const std::size_t p = send.size();
  Bufs<T> out(p);
  for (std::size_t d = 0; d < p; ++d) {
    for (std::size_t s = 0; s < p; ++s) {
      const auto off = offsets_of(send_counts[s]);
      out[d].insert(out[d].end(), send[s].begin() + static_cast<std::ptrdiff_t>(off[d]),
                    send[s].begin() + static_cast<std::ptrdiff_t>(off[d + 1]));
    }
  }
  return out;
}

// ring_shift: rank r receives the buffer of rank (r - shift) mod p.
template <Element T>
Bufs<T> ring_shift(const Bufs<T>& send, int shift) {
  const int p = static_cast<int>(send.size());
  Bufs<T> out(send.size());
  for (int r = 0; r < p; ++r) {
    const int src = ((r - shift) % p + p) % p;
    out[static_cast<std::size_t>(r)] = send[static_cast<std::size_t>(src)];
  }
  return out;
}

// ---------------------------------------------------------------- ledger bytes per rank
// Transcribed from the documented formulas (docs/runtime.md's table, the comments of
// lib/runtime/wire_bytes.hpp), not from that header's code, which the backends' ledgers use:
// this model does not include it, so a wrong formula there shows up here. All in bytes;
// `elem` is the element size, counts in elements.

struct Traffic {
  std::uint64_t sent = 0;
  std::uint64_t recv = 0;
  friend bool operator==(const Traffic&, const Traffic&) = default;
};

inline std::size_t mod(int a, int p) { return static_cast<std::size_t>(((a % p) + p) % p); }

// Chain root, root+1, ..., root-1: all but the chain's last send S, all but the root receive S.
inline Traffic broadcast_traffic(int p, int r, int root, std::uint64_t S) {
  const int last = static_cast<int>(mod(root - 1, p));
  return {r == last ? 0 : S, r == root ? 0 : S};
}

// All but the root send S; all but root+1 (the chain's start) receive S.
inline Traffic reduce_traffic(int p, int r, int root, std::uint64_t S) {
  const int start = static_cast<int>(mod(root + 1, p));
  return {r == root ? 0 : S, r == start ? 0 : S};
}

inline Traffic all_reduce_traffic(Order algo, int p, int r, std::size_t n, std::size_t elem) {
  const auto c = balanced_counts(n, p);
  const std::uint64_t S = n * elem;
  const std::uint64_t cr = c[mod(r, p)] * elem;
  const std::uint64_t cnext = c[mod(r + 1, p)] * elem;
  const std::uint64_t cprev = c[mod(r - 1, p)] * elem;
  const std::uint64_t sent = (S - cr) + (S - cnext);
  const std::uint64_t recv = algo == Order::ring
                                 ? (S - cprev) + (S - cr)
                                 : static_cast<std::uint64_t>(p - 1) * cr + (S - cr);
  return {sent, recv};
}

inline Traffic all_gather_traffic(std::span<const std::size_t> counts, int r, std::size_t elem) {
  const int p = static_cast<int>(counts.size());
  const std::uint64_t S = total(counts) * elem;
  return {S - counts[mod(r + 1, p)] * elem, S - counts[mod(r, p)] * elem};
}

inline Traffic reduce_scatter_traffic(Order algo, std::span<const std::size_t> counts, int r,
                                      std::size_t elem) {
  const int p = static_cast<int>(counts.size());
  const std::uint64_t S = total(counts) * elem;
  const std::uint64_t cr = counts[mod(r, p)] * elem;
  if (algo == Order::ring) return {S - cr, S - counts[mod(r - 1, p)] * elem};
  return {S - cr, static_cast<std::uint64_t>(p - 1) * cr};
}

// Direct: everything but the piece a rank keeps for itself.
inline Traffic all_to_all_traffic(std::span<const std::size_t> send_counts,
                                  std::span<const std::size_t> recv_counts, int r,
                                  std::size_t elem) {
  const auto ur = static_cast<std::size_t>(r);
  return {(total(send_counts) - send_counts[ur]) * elem,
          (total(recv_counts) - recv_counts[ur]) * elem};
}

inline Traffic gather_traffic(std::span<const std::size_t> counts, int r, int root,
                              std::size_t elem) {
  const auto ur = static_cast<std::size_t>(r);
  if (r == root) return {0, (total(counts) - counts[ur]) * elem};
  return {counts[ur] * elem, 0};
}

inline Traffic scatter_traffic(std::span<const std::size_t> counts, int r, int root,
                               std::size_t elem) {
  const auto ur = static_cast<std::size_t>(r);
  if (r == root) return {(total(counts) - counts[ur]) * elem, 0};
  return {0, counts[ur] * elem};
}

// A shift that is a multiple of p moves nothing.
inline Traffic ring_shift_traffic(int p, int shift, std::size_t send_n, std::size_t recv_n,
                                  std::size_t elem) {
  if (mod(shift, p) == 0) return {0, 0};
  return {send_n * elem, recv_n * elem};
}

}  // namespace shardcheck::model
