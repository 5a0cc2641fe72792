// Timing helpers shared by the benchmarks: how a batch of collective calls is timed inside the
// ranks, and the single-thread memcpy every bandwidth is compared with in the same process.
//
// Why inside the ranks: run() starts (or wakes) an OpenMP team and builds a World; that cost
// belongs to no collective. Rank 0 reads the clock after a barrier that every rank has passed,
// runs k calls, and reads it again when its k-th call returns. Every collective of the OpenMP
// backend ends with a group-wide synchronization, so rank 0 returning from call k means every
// rank has finished moving call k's data: the interval covers exactly k complete calls.
#pragma once

#include "runtime/communicator.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace shardcheck::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The wall-clock seconds one call of f() takes.
template <class F>
double seconds_of(const F& f) {
  const auto t0 = Clock::now();
  f();
  return seconds_between(t0, Clock::now());
}

// nccl-tests reports GB/s with GB = 1e9 bytes.
inline constexpr double bytes_per_GB = 1e9;

// Runs `call` on each of `world_size` ranks once (warm-up: first touch, caches, ledger), then
// after a barrier k more times. Returns rank 0's seconds for the k timed calls.
// @throws RankFailure when a rank throws (run()'s contract).
double time_on_ranks(int world_size, std::int64_t k,
                     const std::function<void(Communicator&)>& call);

// Copies `bytes` once untimed, then `reps` times timed, on the calling thread, between two
// buffers owned by this file (grown on demand, never shrunk). Returns the timed seconds.
double time_memcpy(std::size_t bytes, std::int64_t reps);

// How many memcpy repetitions give a measurable interval (about 64 MiB moved, at least one).
std::int64_t memcpy_reps(std::size_t bytes);

}  // namespace shardcheck::bench
