// reference_linear/<dtype>/tokens:T/in:I/out:O/plain:0|1: what a suite pays for one checked
// linear forward, end to end: reference::linear<hp>(x, w, {}) from storage-typed tensors (the
// conversion to doubles, the fast contraction, the values in hp), then reference::bounds<hp> of
// the result with the dtype's arithmetic (the per-element bound the linear and MLP suites
// compare against: linear_expected.cpp, mlp_bound.hpp's up_projection_error).
//   linear_s   reference::linear with ContractionPath::fast (the default)
//   bounds_s   reference::bounds of that result
//   total_s    the two (the iteration time)
//   plain_s    reference::linear with ContractionPath::plain (only where it takes seconds:
//              registered with plain:1), and plain_over_fast = plain_s / linear_s
//   threads    OpenMP's thread count (the fast path's tiles are shared among them)
// Operands: normal(0, 1) rounded to <dtype>, fixed seeds; no bias (Llama's projections have none).
// The Llama-2-7B MLP up projection, 2048 tokens, 4096 → 11008, is registered only with
// SHARDCHECK_BENCH_BIG=1 (a few minutes; about 3 GB of memory).
#include "bench_registry.hpp"
#include "operands.hpp"
#include "timing.hpp"

#include "reference/bounds.hpp"
#include "reference/linear/linear.hpp"

#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace shardcheck::bench {
namespace {

using reference::ContractionPath;
using reference::hp;

template <class T>
void reference_linear_entry(benchmark::State& state) {
  const auto [tokens, in, out] = sizes_of<3>(state);
  const bool with_plain = state.range(3) != 0;
  const Tensor<T> x = normal_tensor<T>({tokens, in}, 1), w = normal_tensor<T>({out, in}, 2);
  const Tensor<T> no_bias;
  double linear_s = 0, bounds_s = 0, plain_s = 0;
  for (auto _ : state) {
    reference::Contraction<hp> c;
    const double l =
        seconds_of([&] { c = reference::linear<hp>(x, w, no_bias, {}, ContractionPath::fast); });
    const double b = seconds_of([&] {
      const auto bound = reference::bounds<hp>(c, reference::arithmetic_of<T>());
      benchmark::DoNotOptimize(bound.bound.data());
    });
    linear_s += l;
    bounds_s += b;
    state.SetIterationTime(l + b);
    if (with_plain) {
      plain_s += seconds_of([&] {
        const auto p = reference::linear<hp>(x, w, no_bias, {}, ContractionPath::plain);
        benchmark::DoNotOptimize(p.value.data());
      });
    }
  }
  const auto it = static_cast<double>(state.iterations());
  state.counters["linear_s"] = linear_s / it;
  state.counters["bounds_s"] = bounds_s / it;
  state.counters["total_s"] = (linear_s + bounds_s) / it;
  if (with_plain) {
    state.counters["plain_s"] = plain_s / it;
    state.counters["plain_over_fast"] = plain_s / linear_s;
  }
  state.counters["threads"] = omp_get_max_threads();
}

template <class T>
void register_shape(const char* dtype, std::int64_t tokens, std::int64_t in, std::int64_t out,
                    bool with_plain) {
  register_timed(std::string("reference_linear/") + dtype, &reference_linear_entry<T>,
                 {"tokens", "in", "out", "plain"}, {tokens, in, out, with_plain ? 1 : 0}, 1);
}

}  // namespace

void register_reference_linear_benchmarks() {
  const char* env = std::getenv("SHARDCHECK_BENCH_BIG");
  const bool big = env != nullptr && std::string(env) == "1";
  register_shape<bfloat16>("bfloat16", 64, 256, 256, true);
  register_shape<float>("float32", 64, 256, 256, true);
  if (big) register_shape<bfloat16>("bfloat16", 2048, 4096, 11008, false);
}

}  // namespace shardcheck::bench
