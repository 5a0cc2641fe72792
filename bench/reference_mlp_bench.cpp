// reference_mlp/<dtype>/tokens:T/hidden:H/ffn:F/<path>: what the MLP suite and `compare` pay for
// one checked SwiGLU MLP, end to end: reference::mlp, reference::mlp_backward and
// reference::mlp_bounds (every output's bound) from storage-typed tensors, on one contraction
// path (contraction_path.hpp):
//   fast   the default: the six products on the fast contraction, the four with an operand
//          computed in R (y = a·w_downᵀ, dx = dh·w_up, dw_up = dhᵀ·x, dw_down = dyᵀ·a) sliced
//          as R values
//   plain  the 113-bit loops (what the reference did before issue 15)
// Counters: fwd_s, bwd_s, bounds_s (mlp_bounds on the same path: its products and perturbed dots)
// and total_s; threads is OpenMP's thread count. Operands: normal(0, 1) rounded to <dtype>, fixed
// seeds, with biases.
#include "bench_registry.hpp"
#include "operands.hpp"
#include "timing.hpp"

#include "reference/mlp/mlp.hpp"
#include "reference/mlp/mlp_bound.hpp"

#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <string>

namespace shardcheck::bench {
namespace {

using reference::ContractionPath;
using reference::hp;

template <class T>
void reference_mlp_entry(benchmark::State& state) {
  const auto [n, hid, f] = sizes_of<3>(state);
  const auto path = state.range(3) != 0 ? ContractionPath::plain : ContractionPath::fast;
  const auto act = Activation::swiglu;
  const Tensor<hp> x = normal_tensor<T, hp>({n, hid}, 1),
                   w_up = normal_tensor<T, hp>({2 * f, hid}, 2),
                   b_up = normal_tensor<T, hp>({2 * f}, 3),
                   w_down = normal_tensor<T, hp>({hid, f}, 4),
                   b_down = normal_tensor<T, hp>({hid}, 5), dy = normal_tensor<T, hp>({n, hid}, 6);
  double fwd_s = 0, bwd_s = 0, bounds_s = 0;
  for (auto _ : state) {
    reference::MlpForward<hp> fwd;
    reference::MlpGrads<hp> grads;
    const double a =
        seconds_of([&] { fwd = reference::mlp<hp>(x, w_up, b_up, w_down, b_down, act, path); });
    const double b = seconds_of(
        [&] { grads = reference::mlp_backward<hp>(x, w_up, w_down, fwd, true, dy, act, path); });
    const double c = seconds_of([&] {
      const auto bounds = reference::mlp_bounds<hp>(x, w_up, b_up, w_down, b_down, dy, act, fwd,
                                                    grads, {}, reference::arithmetic_of<T>(), path);
      benchmark::DoNotOptimize(bounds.dx.data());
    });
    fwd_s += a;
    bwd_s += b;
    bounds_s += c;
    state.SetIterationTime(a + b + c);
  }
  const auto it = static_cast<double>(state.iterations());
  state.counters["fwd_s"] = fwd_s / it;
  state.counters["bwd_s"] = bwd_s / it;
  state.counters["bounds_s"] = bounds_s / it;
  state.counters["total_s"] = (fwd_s + bwd_s + bounds_s) / it;
  state.counters["threads"] = omp_get_max_threads();
}

template <class T>
void register_mlp(const char* dtype, std::int64_t n, std::int64_t hid, std::int64_t f) {
  for (const int plain : {0, 1}) {
    register_timed(std::string("reference_mlp/") + dtype + (plain != 0 ? "/plain" : "/fast"),
                   &reference_mlp_entry<T>, {"tokens", "hidden", "ffn", "plain"},
                   {n, hid, f, plain}, 1);
  }
}

}  // namespace

void register_reference_mlp_benchmarks() {
  register_mlp<bfloat16>("bfloat16", 8, 24, 16);     // a suite-sized case
  register_mlp<bfloat16>("bfloat16", 64, 256, 512);  // a small real layer
}

}  // namespace shardcheck::bench
