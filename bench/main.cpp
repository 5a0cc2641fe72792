// shardcheck_bench: the collectives' bus bandwidth beside memcpy, the barrier's latency beside
// OpenMP's, the reference's fast contraction beside Eigen's GEMM and the reference linear layer
// with its bounds (fast beside plain), in one process
// (docs/benchmarks.md). Google Benchmark's flags apply; after the benchmarks a Markdown summary
// with the ratios and the goals follows (on stdout with the console format, on stderr with
// --benchmark_format=json so stdout stays valid JSON).
#include "bench_registry.hpp"
#include "summary.hpp"

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <iostream>
#include <string_view>

int main(int argc, char** argv) {
  shardcheck::bench::register_collective_benchmarks();
  shardcheck::bench::register_barrier_benchmarks();
  shardcheck::bench::register_fast_contraction_benchmarks();
  shardcheck::bench::register_reference_linear_benchmarks();
  shardcheck::bench::register_reference_mlp_benchmarks();
  shardcheck::bench::register_reference_attention_benchmarks();

  std::string_view format = "console";
  constexpr std::string_view flag = "--benchmark_format=";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with(flag)) format = arg.substr(flag.size());
  }
  if (format != "console" && format != "json") {
    std::cerr << "shardcheck_bench: --benchmark_format=" << format
              << " is not supported; use console or json\n";
    return 1;
  }

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (format == "json") {
    shardcheck::bench::SummarizingReporter<benchmark::JSONReporter> reporter(std::cerr);
    benchmark::RunSpecifiedBenchmarks(&reporter);
  } else {
    const auto options = isatty(STDOUT_FILENO) != 0 ? benchmark::ConsoleReporter::OO_ColorTabular
                                                    : benchmark::ConsoleReporter::OO_Tabular;
    shardcheck::bench::SummarizingReporter<benchmark::ConsoleReporter> reporter(std::cout, options);
    benchmark::RunSpecifiedBenchmarks(&reporter);
  }
  benchmark::Shutdown();
  return 0;
}
