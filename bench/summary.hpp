// The tables of docs/benchmarks.md, built from the runs the display reporter prints: bus
// bandwidth beside memcpy per size and P, barrier latency beside OpenMP's per P, and the
// issue's two goals marked "met" or "NOT met". Ratios use the memcpy and OpenMP figures
// measured in the same benchmark, batch for batch (collectives_bench.cpp, barrier_bench.cpp).
// With --benchmark_repetitions the medians are used.
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <ostream>
#include <string>
#include <utility>

namespace shardcheck::bench {

class Summary {
 public:
  void add(const benchmark::BenchmarkReporter::Run& run);
  // Markdown: one bandwidth table per P, the barrier table, the goals.
  void print(std::ostream& out) const;

 private:
  struct Row {
    std::map<std::string, double> counters;
    bool median = false;  // from a median aggregate, which an iteration run must not replace
  };
  // Keyed by (family, P, bytes); family is the registered name ("all_reduce/ring", "barrier").
  std::map<std::string, std::map<std::pair<int, double>, Row>> rows_;
};

// A display reporter (ConsoleReporter or JSONReporter) that also feeds a Summary and prints it
// after the last benchmark, to `summary_out`.
template <class Base>
class SummarizingReporter final : public Base {
 public:
  template <class... BaseArgs>
  explicit SummarizingReporter(std::ostream& summary_out, BaseArgs&&... args)
      : Base(std::forward<BaseArgs>(args)...), out_(summary_out) {}

  void ReportRuns(const std::vector<benchmark::BenchmarkReporter::Run>& runs) override {
    Base::ReportRuns(runs);
    for (const auto& run : runs) summary_.add(run);
  }
  void Finalize() override {
    Base::Finalize();
    summary_.print(out_);
  }

 private:
  std::ostream& out_;
  Summary summary_;
};

}  // namespace shardcheck::bench
