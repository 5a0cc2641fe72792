#include "timing.hpp"

#include "runtime/launcher.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace shardcheck::bench {

double time_on_ranks(int world_size, std::int64_t k,
                     const std::function<void(Communicator&)>& call) {
  double elapsed = 0.0;
  run(world_size, [&](Communicator& comm) {
    call(comm);
    comm.barrier();
    const auto t0 = Clock::now();
    for (std::int64_t i = 0; i < k; ++i) call(comm);
    if (comm.rank() == 0) elapsed = seconds_between(t0, Clock::now());
  });
  return elapsed;
}

double time_memcpy(std::size_t bytes, std::int64_t reps) {
  // Kept across calls: first-touching up to 64 MiB for each measurement would dominate it.
  static std::vector<unsigned char> src;
  static std::vector<unsigned char> dst;
  if (src.size() < bytes) {
    src.resize(bytes, 1);
    dst.resize(bytes, 0);
  }
  std::memcpy(dst.data(), src.data(), bytes);
  benchmark::ClobberMemory();
  const auto t0 = Clock::now();
  for (std::int64_t i = 0; i < reps; ++i) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  return seconds_between(t0, Clock::now());
}

std::int64_t memcpy_reps(std::size_t bytes) {
  constexpr std::size_t target = std::size_t{64} << 20;
  return static_cast<std::int64_t>(
      std::max<std::size_t>(1, target / std::max<std::size_t>(1, bytes)));
}

}  // namespace shardcheck::bench
