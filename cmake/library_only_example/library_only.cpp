// The install.library_only test: column_parallel_linear on two ranks against the dense linear
// and the reference, using only shardcheck::lib and shardcheck::reference.
#include "ops/linear/linear.hpp"
#include "reference/linear/linear.hpp"
#include "runtime/launcher.hpp"

#include <cstdio>
#include <exception>
#include <vector>

namespace {

int run_example() {
  using shardcheck::Tensor;
  const Tensor<double> x({2, 3}, std::vector<double>{1, 2, 3, 4, 5, 6});
  const Tensor<double> w({4, 3}, std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1});
  const Tensor<double> b({4}, std::vector<double>{0.5, 0.5, 0.5, 0.5});
  const Tensor<double> dense = shardcheck::linear(x, w, b);
  shardcheck::ColumnParallelConfig cfg;
  cfg.out_features = 4;
  cfg.gather_output = true;
  std::vector<Tensor<double>> y(2);
  shardcheck::run(2, [&](shardcheck::Communicator& tp) {
    const int r = tp.rank();
    y[static_cast<std::size_t>(r)] =
        shardcheck::column_parallel_linear(
            tp, cfg, x, shardcheck::split_weight_by_output_features(w, cfg.out_split, 2, r),
            shardcheck::split_bias(b, cfg.out_split, 2, r))
            .y;
  });
  const auto exact = shardcheck::reference::linear(x, w, b);
  for (std::size_t i = 0; i < dense.size(); ++i) {
    if (y[0][i] != dense[i] || y[1][i] != dense[i] ||
        static_cast<double>(exact.value[i]) != dense[i]) {
      std::printf("library_only: element %zu differs\n", i);
      return 1;
    }
  }
  std::printf(
      "library_only: column_parallel_linear on 2 ranks equals the dense linear and the "
      "reference\n");
  return 0;
}

}  // namespace

int main() {
  try {
    return run_example();
  } catch (const std::exception& e) {  // a shardcheck error names the rank and what to do
    std::fprintf(stderr, "library_only: %s\n", e.what());
    return 1;
  }
}
