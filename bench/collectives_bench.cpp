// Bus bandwidth of all_reduce (ring, sequential) and all_gather on float32 buffers, 1 KiB to
// 64 MiB at P = 2, 4, 8, each beside a single-thread memcpy of the same size measured in the
// same process, interleaved with the collective's batches so both see the same machine load.
//
// Definitions (nccl-tests PERFORMANCE.md): S = bytes of the full buffer (for all_gather the
// gathered output), t = seconds per call, algbw = S / t, busbw = algbw * 2(p-1)/p for
// all_reduce and algbw * (p-1)/p for all_gather. memcpy bandwidth = S / (seconds per memcpy
// of S bytes), one thread. Counters (bytes/s unless named otherwise): algbw, busbw, memcpy,
// busbw_pct (busbw as a percentage of memcpy), k (calls per timed batch).
// One benchmark iteration is one collective call: the Time column is seconds per call.
#include "bench_registry.hpp"
#include "timing.hpp"

#include "runtime/communicator.hpp"
#include "runtime/reduce_op.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace shardcheck::bench {
namespace {

// Powers of 4 from 1 KiB to 64 MiB, and 8 MiB: the size the goal names.
std::vector<std::int64_t> buffer_sizes() {
  std::vector<std::int64_t> sizes;
  for (std::int64_t s = std::int64_t{1} << 10; s <= std::int64_t{64} << 20; s *= 4) {
    sizes.push_back(s);
  }
  sizes.push_back(std::int64_t{8} << 20);
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

// Calls per timed batch: about 16 MiB of buffer per batch, at most 64 calls, at least one. Small
// calls then fill a batch long enough for the clock and the starting barrier to weigh little,
// and a loaded machine still completes several batches within --benchmark_min_time.
std::int64_t calls_per_batch(std::size_t bytes) {
  constexpr std::size_t target = std::size_t{16} << 20;
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(target / bytes), 1, 64);
}

struct RankBuffers {
  std::vector<float> send;
  std::vector<float> recv;
};

// Per-rank buffers kept across benchmarks (up to 2 x 8 x 64 MiB): allocating and first-touching
// them for every benchmark would cost more than the benchmark. Send values are small integers
// (no rounding surprises, no subnormals); out-of-place calls leave them unchanged.
std::vector<RankBuffers>& rank_buffers(int world_size, std::size_t send_n, std::size_t recv_n) {
  static std::vector<RankBuffers> pool;
  if (pool.size() < static_cast<std::size_t>(world_size)) {
    pool.resize(static_cast<std::size_t>(world_size));
  }
  for (std::size_t r = 0; r < static_cast<std::size_t>(world_size); ++r) {
    if (pool[r].send.size() < send_n) pool[r].send.resize(send_n, static_cast<float>(r + 1));
    if (pool[r].recv.size() < recv_n) pool[r].recv.resize(recv_n, 0.0F);
  }
  return pool;
}

// Times batches of `call` on `world_size` ranks, each followed by memcpy batches of the same
// size, and sets the counters. `bus_factor` converts algbw to busbw.
void measure_collective(benchmark::State& state, int world_size, std::size_t bytes,
                        double bus_factor, const std::function<void(Communicator&)>& call) {
  const std::int64_t k = calls_per_batch(bytes);
  const std::int64_t reps = memcpy_reps(bytes);
  double collective_s = 0.0;
  double memcpy_s = 0.0;
  std::int64_t calls = 0;
  std::int64_t copies = 0;
  while (state.KeepRunningBatch(k)) {
    try {
      const double t = time_on_ranks(world_size, k, call);
      state.SetIterationTime(t);
      collective_s += t;
      calls += k;
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      break;
    }
    memcpy_s += time_memcpy(bytes, reps);
    copies += reps;
  }
  if (calls == 0 || copies == 0) return;
  const auto S = static_cast<double>(bytes);
  const double algbw = S * static_cast<double>(calls) / collective_s;
  const double busbw = algbw * bus_factor;
  const double memcpy_bw = S * static_cast<double>(copies) / memcpy_s;
  state.counters["P"] = world_size;
  state.counters["bytes"] = S;
  state.counters["k"] = static_cast<double>(k);
  state.counters["algbw"] = algbw;
  state.counters["busbw"] = busbw;
  state.counters["memcpy"] = memcpy_bw;
  state.counters["busbw_pct"] = 100.0 * busbw / memcpy_bw;
}

void all_reduce_bench(benchmark::State& state, Algorithm algo) {
  const int p = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  const std::size_t n = bytes / sizeof(float);
  auto& buffers = rank_buffers(p, n, n);
  const double bus_factor = 2.0 * (p - 1) / p;
  measure_collective(state, p, bytes, bus_factor, [&](Communicator& comm) {
    auto& b = buffers[static_cast<std::size_t>(comm.rank())];
    comm.all_reduce(std::span<const float>(b.send.data(), n), std::span<float>(b.recv.data(), n),
                    ReduceOp::sum, algo);
  });
}

void all_gather_bench(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  const std::size_t n = bytes / sizeof(float);  // gathered elements; every size here is p | n
  const std::size_t piece = n / static_cast<std::size_t>(p);
  auto& buffers = rank_buffers(p, piece, n);
  const double bus_factor = static_cast<double>(p - 1) / p;
  measure_collective(state, p, bytes, bus_factor, [&](Communicator& comm) {
    auto& b = buffers[static_cast<std::size_t>(comm.rank())];
    comm.all_gather(std::span<const float>(b.send.data(), piece),
                    std::span<float>(b.recv.data(), n));
  });
}

// The reference alone, for its own row in the output.
void memcpy_bench(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const std::int64_t reps = memcpy_reps(bytes);
  double seconds = 0.0;
  std::int64_t copies = 0;
  while (state.KeepRunningBatch(reps)) {
    const double t = time_memcpy(bytes, reps);
    state.SetIterationTime(t);
    seconds += t;
    copies += reps;
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["memcpy"] = static_cast<double>(bytes) * static_cast<double>(copies) / seconds;
}

}  // namespace

void register_collective_benchmarks() {
  const auto sizes = buffer_sizes();
  const std::vector<std::int64_t> world_sizes = {2, 4, 8};
  for (const Algorithm algo : {Algorithm::ring, Algorithm::sequential}) {
    const std::string name = "all_reduce/" + std::string(shardcheck::name(algo));
    benchmark::RegisterBenchmark(name.c_str(), all_reduce_bench, algo)
        ->ArgNames({"P", "bytes"})
        ->ArgsProduct({world_sizes, sizes})
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("all_gather", all_gather_bench)
      ->ArgNames({"P", "bytes"})
      ->ArgsProduct({world_sizes, sizes})
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("memcpy", memcpy_bench)
      ->ArgNames({"bytes"})
      ->ArgsProduct({sizes})
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace shardcheck::bench
