// The benchmark families of shardcheck_bench, registered by main() in this order so the output
// (and the summary built from it) always lists them the same way; and how a family registers one
// shape of a benchmark that times itself.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

namespace shardcheck::bench {

// Registers `entry` as benchmark `name` with the one argument set `args` (named `arg_names`),
// timed by the entry itself (state.SetIterationTime) over `iterations` iterations, reported in
// milliseconds. A plain function pointer, so the registration is the library's own (no
// allocation in the header for the analyzer to follow; the registry owns the benchmark).
inline void register_timed(const std::string& name, void (*entry)(benchmark::State&),
                           const std::vector<std::string>& arg_names,
                           const std::vector<std::int64_t>& args, int iterations) {
  benchmark::RegisterBenchmark(name.c_str(), entry)
      ->ArgNames(arg_names)
      ->Args(args)
      ->UseManualTime()
      ->Iterations(iterations)
      ->Unit(benchmark::kMillisecond);
}

// all_reduce/ring, all_reduce/sequential, all_gather (P = 2, 4, 8; 1 KiB to 64 MiB) and memcpy.
void register_collective_benchmarks();

// barrier (P = 2, 4, 8, 16), each beside `#pragma omp barrier` in a team of the same size.
void register_barrier_benchmarks();

// fast_contraction/<dtype>/m/k/n (64³, 256³, 1024³; 2048 × 11008 × 4096 with
// SHARDCHECK_BENCH_BIG=1): the reference's fast contraction beside Eigen's GEMM and the hp path.
void register_fast_contraction_benchmarks();

// reference_linear/<dtype>/tokens/in/out (64·256·256 with the plain path beside; the Llama-2-7B
// MLP up projection 2048 × 4096 → 11008 with SHARDCHECK_BENCH_BIG=1): reference::linear and
// reference::bounds end to end, as a suite pays for one checked forward.
void register_reference_linear_benchmarks();

// reference_mlp/<dtype>/tokens/hidden/ffn/<fast|plain> (8·24·16 and 64·256·512, SwiGLU):
// reference::mlp, mlp_backward and mlp_bounds end to end on each contraction path.
void register_reference_mlp_benchmarks();

// reference_attention/<dtype>/<fast|plain>/batch/heads/kv_heads/len/head_dim (2·4·2·9·4; with
// SHARDCHECK_BENCH_BIG=1 also 1·4·2·128·32 and 1·8·8·512·64), causal, on both paths:
// reference::attention_forward, attention_backward, attention_bounds and attention_reference_error
// end to end on each contraction path.
void register_reference_attention_benchmarks();

}  // namespace shardcheck::bench
