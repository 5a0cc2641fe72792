// Latency of Communicator::barrier() beside OpenMP's own `#pragma omp barrier` in a team of the
// same size, measured in the same process, batch for batch, so both see the same load.
//
// Both are timed the same way: one warm-up barrier, one barrier after which thread/rank 0
// reads the clock, then k barriers, then the clock again; latency = interval / k. With more
// threads than cores (P = 8, 16 on a 2-core machine) this measures how well waiting threads
// hand the core to the ones still to arrive, which is what the goal is about.
// Counters: P, barrier_us and omp_us (microseconds per barrier), vs_omp_pct
// (barrier / omp barrier, in percent; the goal is at most 150).
#include "bench_registry.hpp"
#include "timing.hpp"

#include "runtime/communicator.hpp"

#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>

namespace shardcheck::bench {
namespace {

// About 1000 rank-arrivals per batch: a few milliseconds at every P on an idle 2-core machine,
// so that even a loaded one completes several batches (the ratio then averages over them).
std::int64_t barriers_per_batch(int world_size) {
  return std::max<std::int64_t>(1, 1000 / world_size);
}

double time_omp_barriers(int world_size, std::int64_t k) {
  double elapsed = 0.0;
  int team = 0;
  const int saved_dynamic = omp_get_dynamic();
  omp_set_dynamic(0);
#pragma omp parallel num_threads(world_size) default(none) shared(elapsed, team, k)
  {
#pragma omp barrier
#pragma omp barrier
    const auto t0 = Clock::now();
    for (std::int64_t i = 0; i < k; ++i) {
#pragma omp barrier
    }
    if (omp_get_thread_num() == 0) {
      elapsed = seconds_between(t0, Clock::now());
      team = omp_get_num_threads();
    }
  }
  omp_set_dynamic(saved_dynamic);
  if (team != world_size) {
    throw std::runtime_error("OpenMP started " + std::to_string(team) + " threads for " +
                             std::to_string(world_size) + "; raise OMP_THREAD_LIMIT");
  }
  return elapsed;
}

void barrier_bench(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0));
  const std::int64_t k = barriers_per_batch(p);
  double barrier_s = 0.0;
  double omp_s = 0.0;
  std::int64_t n = 0;
  while (state.KeepRunningBatch(k)) {
    try {
      const double t = time_on_ranks(p, k, [](Communicator& comm) { comm.barrier(); });
      state.SetIterationTime(t);
      barrier_s += t;
      omp_s += time_omp_barriers(p, k);
      n += k;
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      break;
    }
  }
  if (n == 0) return;
  state.counters["P"] = p;
  state.counters["k"] = static_cast<double>(k);
  state.counters["barrier_us"] = 1e6 * barrier_s / static_cast<double>(n);
  state.counters["omp_us"] = 1e6 * omp_s / static_cast<double>(n);
  state.counters["vs_omp_pct"] = 100.0 * barrier_s / omp_s;
}

}  // namespace

void register_barrier_benchmarks() {
  // Google Benchmark's registry keeps (owns) the benchmark RegisterBenchmark allocates; the
  // analyzer sees the new in benchmark.h but not the compiled library that stores the pointer.
  // NOLINTNEXTLINE(clang-analyzer-cplusplus.NewDeleteLeaks): owned by the benchmark registry
  benchmark::RegisterBenchmark("barrier", barrier_bench)
      ->ArgNames({"P"})
      ->Args({2})
      ->Args({4})
      ->Args({8})
      ->Args({16})
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace shardcheck::bench
