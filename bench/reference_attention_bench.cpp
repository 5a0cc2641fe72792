// reference_attention/<dtype>/<fast|plain>/batch:B/heads:H/kv_heads:G/len:L/head_dim:D: what the
// attention suite and `compare` pay for one checked attention core, end to end:
// reference::attention_forward, attention_backward, attention_bounds (every output's bound, the
// dtype's arithmetic, one part, natural exp) and attention_reference_error (the reference's own
// bound) from storage-typed tensors, causal (bottom-right) mask, on one contraction path
// (contraction_path.hpp):
//   fast   the per-head products on the fast contraction, and the bounds' sums of magnitudes
//          as contractions (attention_bound.hpp, step (7))
//   plain  the 113-bit loops for the values and the bounds (the bounds' only evaluation before)
// Counters: fwd_s, bwd_s, bounds_s (attention_bounds), own_s (attention_reference_error) and
// total_s; threads is OpenMP's thread count. Operands: normal(0, 1) rounded to <dtype>, fixed
// seeds. The larger shapes, 128·32 with 4 heads and 512·64 with 8 heads (minutes on the plain
// path), are registered only with SHARDCHECK_BENCH_BIG=1.
#include "bench_registry.hpp"
#include "operands.hpp"
#include "timing.hpp"

#include "reference/attention/attention.hpp"

#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace shardcheck::bench {
namespace {

using reference::ContractionPath;
using reference::hp;

template <class T>
void reference_attention_entry(benchmark::State& state) {
  const auto [batch, h, g, len, d] = sizes_of<5>(state);
  const auto path = state.range(5) != 0 ? ContractionPath::plain : ContractionPath::fast;
  AttentionConfig cfg;
  cfg.q_heads = h;
  cfg.kv_heads = g;
  cfg.head_dim = d;
  cfg.mask.kind = MaskKind::causal;
  cfg.mask.q_len = len;
  cfg.mask.k_len = len;
  const Tensor<hp> q = normal_tensor<T, hp>({batch, len, h, d}, 1),
                   k = normal_tensor<T, hp>({batch, len, g, d}, 2),
                   v = normal_tensor<T, hp>({batch, len, g, d}, 3),
                   dout = normal_tensor<T, hp>({batch, len, h, d}, 4);
  double fwd_s = 0, bwd_s = 0, bounds_s = 0, own_s = 0;
  for (auto _ : state) {
    reference::AttentionOutput<hp> fwd;
    const double a =
        seconds_of([&] { fwd = reference::attention_forward<hp>(cfg, q, k, v, path); });
    const double b = seconds_of([&] {
      const auto grads = reference::attention_backward<hp>(cfg, q, k, v, fwd, dout, path);
      benchmark::DoNotOptimize(grads.dq.data());
    });
    const double c = seconds_of([&] {
      const auto bounds = reference::attention_bounds<hp>(cfg, q, k, v, dout,
                                                          reference::arithmetic_of<T>(), {}, path);
      benchmark::DoNotOptimize(bounds.dk.data());
    });
    const double e = seconds_of([&] {
      const auto own = reference::attention_reference_error<hp>(cfg, q, k, v, dout, path);
      benchmark::DoNotOptimize(own.dk.data());
    });
    fwd_s += a;
    bwd_s += b;
    bounds_s += c;
    own_s += e;
    state.SetIterationTime(a + b + c + e);
  }
  const auto it = static_cast<double>(state.iterations());
  state.counters["fwd_s"] = fwd_s / it;
  state.counters["bwd_s"] = bwd_s / it;
  state.counters["bounds_s"] = bounds_s / it;
  state.counters["own_s"] = own_s / it;
  state.counters["total_s"] = (fwd_s + bwd_s + bounds_s + own_s) / it;
  state.counters["threads"] = omp_get_max_threads();
}

template <class T>
void register_attention(const char* dtype, std::int64_t batch, std::int64_t h, std::int64_t g,
                        std::int64_t len, std::int64_t d) {
  for (const int plain : {0, 1}) {
    register_timed(std::string("reference_attention/") + dtype + (plain != 0 ? "/plain" : "/fast"),
                   &reference_attention_entry<T>,
                   {"batch", "heads", "kv_heads", "len", "head_dim", "plain"},
                   {batch, h, g, len, d, plain}, 1);
  }
}

}  // namespace

void register_reference_attention_benchmarks() {
  const char* env = std::getenv("SHARDCHECK_BENCH_BIG");
  const bool big = env != nullptr && std::string(env) == "1";
  register_attention<float>("float32", 2, 4, 2, 9, 4);  // a suite-sized case
  if (!big) return;
  register_attention<float>("float32", 1, 4, 2, 128, 32);
  register_attention<float>("float32", 1, 8, 8, 512, 64);
}

}  // namespace shardcheck::bench
