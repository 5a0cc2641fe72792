// fast_contraction/<dtype>/m:M/k:K/n:N/hp:0|1: the reference's fast contraction
// (reference/contraction/fast_contraction.hpp) beside Eigen's double GEMM and the plain hp path
// (contract_parts element by element, linear.hpp's ContractionPath::plain), on the same
// operands, one after the other in every iteration, so each ratio compares figures measured
// under the same load a few seconds apart (docs/fast-reference.md).
//
//   eigen  C = A·B in double, the output cut into the same 256 × 256 tiles the fast path uses,
//          shared among the same OpenMP threads (Eigen itself is single-threaded in shardcheck:
//          EIGEN_DONT_PARALLELIZE)
//   fast   fast_contraction<hp>(A, B): every element's partial and Σ|ab| in hp (one part), the
//          abs sums as upper bounds (AbsSums::upper_bound, the default); up to 1024³ also
//          with AbsSums::exact (counter exact_abs_over_eigen)
//   hp     to_hp of both operands, then contract_parts per element in hp, one thread (as the
//          plain reference path runs); only for the shapes where it takes seconds (m·k·n ≤ 256³)
// Operands: values of <dtype> (normal(0, 1) rounded to it, fixed seed), passed as doubles.
// Counters: eigen_s, fast_s, hp_s (seconds per iteration), fast_over_eigen, hp_over_fast,
// exact_abs_over_eigen,
// pairs (slice pairs s_a·s_b), rest (rest products added in hp), rho (the largest number of
// sums in hp of one term: its error is ≤ gamma_rho(2^-113)·Σ|ab|), threads. The iteration time is
// the fast path's (manual time). The shape, 2048 × 11008 · 11008 × 4096, is registered only
// when SHARDCHECK_BENCH_BIG=1 (fast and eigen only; a few minutes, several GB of memory).
#include "bench_registry.hpp"
#include "operands.hpp"
#include "timing.hpp"

#include "reference/contraction/fast_contraction.hpp"

#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace shardcheck::bench {
namespace {

using reference::hp;

template <class T>
std::vector<double> operand(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> out(count);
  for (double& v : out) v = static_cast<double>(static_cast<T>(normal(rng)));
  return out;
}

constexpr std::size_t tile = 256;

// C = A·B in double, tiled and threaded as the fast path is. A row-major [m, k], B [k, n].
void eigen_gemm(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, Eigen::MatrixXd& c) {
  reference::for_each_tile(
      static_cast<std::size_t>(c.rows()), static_cast<std::size_t>(c.cols()), tile, 0,
      [&](std::size_t r0, std::size_t rows, std::size_t c0, std::size_t cols) {
        const auto er0 = static_cast<Eigen::Index>(r0), erows = static_cast<Eigen::Index>(rows);
        const auto ec0 = static_cast<Eigen::Index>(c0), ecols = static_cast<Eigen::Index>(cols);
        c.block(er0, ec0, erows, ecols).noalias() =
            a.middleRows(er0, erows) * b.middleCols(ec0, ecols);
      });
}

// The plain reference: convert, then contract_parts for every element.
double hp_checksum(const std::vector<double>& a, const std::vector<double>& b, std::size_t m,
                   std::size_t k, std::size_t n) {
  std::vector<hp> x(a.begin(), a.end()), y(b.begin(), b.end());
  const std::size_t one[] = {k};
  hp sum(0);
  reference::PartTerms<hp> t;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      reference::contract_parts<hp>(x.data() + i * k, 1, y.data() + j,
                                    static_cast<std::ptrdiff_t>(n), one, &t);
      sum += t.partial;
    }
  }
  return static_cast<double>(sum);
}

template <class T>
void fast_contraction_bench(benchmark::State& state, std::size_t m, std::size_t k, std::size_t n,
                            bool with_hp) {
  const std::vector<double> a = operand<T>(m * k, 1), b = operand<T>(k * n, 2);
  const Eigen::MatrixXd ea =
      Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
          a.data(), static_cast<Eigen::Index>(m), static_cast<Eigen::Index>(k));
  const Eigen::MatrixXd eb =
      Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
          b.data(), static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(n));
  Eigen::MatrixXd ec(static_cast<Eigen::Index>(m), static_cast<Eigen::Index>(n));
  double eigen_s = 0, fast_s = 0, hp_s = 0, exact_abs_s = 0;
  reference::FastStats stats;
  reference::FastOptions options;
  options.stats = &stats;
  options.tile = tile;
  // The same contraction with exact abs sums (2·s_a·s_b GEMMs instead of s_a·s_b + 1), up to
  // 1024³: the saving of AbsSums::upper_bound, measured in the same run.
  reference::FastOptions exact_options = options;
  exact_options.stats = nullptr;
  exact_options.abs_sums = reference::AbsSums::exact;
  const bool with_exact_abs =
      static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n) <=
      1024.0 * 1024.0 * 1024.0;
  for (auto _ : state) {
    eigen_s += seconds_of([&] { eigen_gemm(ea, eb, ec); });
    benchmark::DoNotOptimize(ec.data());
    double fast_one = 0;
    fast_one = seconds_of([&] {
      auto c =
          reference::fast_contraction<hp>(reference::row_major_view(a.data(), m, k),
                                          reference::row_major_view(b.data(), k, n), {}, options);
      benchmark::DoNotOptimize(c.value.data());
    });
    fast_s += fast_one;
    state.SetIterationTime(fast_one);
    if (with_exact_abs) {
      exact_abs_s += seconds_of([&] {
        auto c = reference::fast_contraction<hp>(reference::row_major_view(a.data(), m, k),
                                                 reference::row_major_view(b.data(), k, n), {},
                                                 exact_options);
        benchmark::DoNotOptimize(c.value.data());
      });
    }
    if (with_hp) {
      double check = 0;
      hp_s += seconds_of([&] { check = hp_checksum(a, b, m, k, n); });
      benchmark::DoNotOptimize(check);
    }
  }
  const auto it = static_cast<double>(state.iterations());
  state.counters["eigen_s"] = eigen_s / it;
  state.counters["fast_s"] = fast_s / it;
  state.counters["fast_over_eigen"] = fast_s / eigen_s;
  if (with_exact_abs) state.counters["exact_abs_over_eigen"] = exact_abs_s / eigen_s;
  if (with_hp) {
    state.counters["hp_s"] = hp_s / it;
    state.counters["hp_over_fast"] = hp_s / fast_s;
  }
  state.counters["pairs"] = static_cast<double>(stats.max_pairs);
  state.counters["rest"] = static_cast<double>(stats.rest_products);
  state.counters["rho"] = static_cast<double>(stats.max_roundings);
  state.counters["threads"] = omp_get_max_threads();
}

// The entry point Google Benchmark calls: the shape and whether to run hp from the arguments.
template <class T>
void fast_contraction_entry(benchmark::State& state) {
  const auto [m, k, n] = sizes_of<3>(state);
  fast_contraction_bench<T>(state, m, k, n, state.range(3) != 0);
}

template <class T>
void register_shape(const char* dtype, std::int64_t m, std::int64_t k, std::int64_t n, bool with_hp,
                    int iterations) {
  register_timed(std::string("fast_contraction/") + dtype, &fast_contraction_entry<T>,
                 {"m", "k", "n", "hp"}, {m, k, n, with_hp ? 1 : 0}, iterations);
}

template <class T>
void register_dtype(const char* dtype, bool big) {
  register_shape<T>(dtype, 64, 64, 64, true, 5);
  register_shape<T>(dtype, 256, 256, 256, true, 1);
  register_shape<T>(dtype, 1024, 1024, 1024, false, 1);
  if (big) register_shape<T>(dtype, 2048, 11008, 4096, false, 1);
}

}  // namespace

void register_fast_contraction_benchmarks() {
  const char* env = std::getenv("SHARDCHECK_BENCH_BIG");
  const bool big = env != nullptr && std::string(env) == "1";
  register_dtype<bfloat16>("bfloat16", big);
  register_dtype<float>("float32", big);
  register_dtype<double>("float64", false);
}

}  // namespace shardcheck::bench
