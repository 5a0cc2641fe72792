// Per-rank counts: the arithmetic every backend, the argument checks and the byte formulas
// share. Counts are elements; counts[k] belongs to group rank k, and piece k starts at
// counts_offsets(counts)[k].
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace shardcheck {

// k mod p in [0, p) for any k (also negative): the group rank k steps around the ring from 0.
// @pre p >= 1.
constexpr int wrap_rank(int k, int p) noexcept { return ((k % p) + p) % p; }

// counts[0] + ... + counts[p-1].
constexpr std::uint64_t counts_total(std::span<const std::size_t> counts) noexcept {
  std::uint64_t total = 0;
  for (const std::size_t c : counts) total += c;
  return total;
}

// Prefix sums, p + 1 entries: offsets[k] = counts[0] + ... + counts[k-1], offsets[p] = total.
inline std::vector<std::size_t> counts_offsets(std::span<const std::size_t> counts) {
  std::vector<std::size_t> off(counts.size() + 1, 0);
  for (std::size_t k = 0; k < counts.size(); ++k) off[k + 1] = off[k] + counts[k];
  return off;
}

// The balanced split all_reduce cuts its n elements into (communicator.hpp): chunk k of p is
// n/p elements, one more for the first n mod p chunks. Rank k finishes chunk k.
// @pre p >= 1, 0 <= k < p.
constexpr std::uint64_t balanced_chunk(std::uint64_t n, int p, int k) noexcept {
  const auto up = static_cast<std::uint64_t>(p);
  return n / up + (static_cast<std::uint64_t>(k) < n % up ? 1 : 0);
}

// All p chunks of the balanced split.
inline std::vector<std::size_t> balanced_chunks(std::uint64_t n, int p) {
  std::vector<std::size_t> c(static_cast<std::size_t>(p));
  for (int k = 0; k < p; ++k) c[static_cast<std::size_t>(k)] = balanced_chunk(n, p, k);
  return c;
}

}  // namespace shardcheck
