// The tensor-parallel MLP (ops/mlp/mlp.hpp, Megatron's ParallelMLP: column-parallel fc1, the
// activation, row-parallel fc2) measured against the budget's model: a generated case, one run of
// parallel_mlp and parallel_mlp_backward under measured_support.hpp's Probe, and the model's
// prediction for each rank (budget/traffic.hpp parallel_mlp_traffic,
// budget/library_activations.hpp parallel_mlp_activations).
#pragma once

#include "measured_support.hpp"
#include "ops/mlp/mlp.hpp"

#include <cstddef>
#include <vector>

namespace shardcheck::budget::measured {

struct MlpCase {
  int p = 1;
  std::size_t tokens = 1, hidden = 1;
  bool has_bias = false;
  MlpConfig cfg;  // cfg.tokens = tokens, cfg.ffn_features = F
};

inline MlpCase gen_mlp_case() {
  MlpCase k;
  k.p = *rc::gen::inRange(1, 5);
  k.tokens = *rc::gen::inRange<std::size_t>(1, 8);
  k.hidden = *rc::gen::inRange<std::size_t>(1, 6);
  k.has_bias = *rc::gen::arbitrary<bool>();
  k.cfg.tokens = k.tokens;
  k.cfg.ffn_features = *rc::gen::inRange<std::size_t>(1, 7);
  k.cfg.activation = *rc::gen::element(Activation::gelu, Activation::gelu_tanh, Activation::swiglu);
  k.cfg.sequence_parallel = *rc::gen::arbitrary<bool>();
  k.cfg.token_split = *gen_split(k.tokens, k.p);
  k.cfg.ffn_split = *gen_split(k.cfg.ffn_features, k.p);
  k.cfg.reduce_algorithm = gen_algorithm();
  return k;
}

template <class T>
std::vector<Measured> run_mlp(const MlpCase& k) {
  return measure_ranks(k.p, [&](Communicator& c, Probe& probe) {
    const int r = c.rank();
    const auto& cfg = k.cfg;
    const std::size_t tr =
        cfg.sequence_parallel ? piece_of(cfg.token_split, k.tokens, k.p, r) : k.tokens;
    const std::size_t fr = piece_of(cfg.ffn_split, cfg.ffn_features, k.p, r);
    const std::size_t up_rows = (cfg.activation == Activation::swiglu ? 2 : 1) * fr;
    const auto x = zeros<T>({tr, k.hidden});
    const auto w_up = zeros<T>({up_rows, k.hidden});
    const auto b_up = k.has_bias ? zeros<T>({up_rows}) : Tensor<T>();
    const auto w_down = zeros<T>({k.hidden, fr});
    const auto b_down = k.has_bias ? zeros<T>({k.hidden}) : Tensor<T>();
    const auto f =
        probe.forward([&] { return parallel_mlp(c, cfg, x, w_up, b_up, w_down, b_down); });
    probe.keep(x);
    probe.keep(f.h);
    const auto dy = zeros<T>({tr, k.hidden});
    probe.backward(
        [&] { (void)parallel_mlp_backward(c, cfg, x, w_up, w_down, f, k.has_bias, dy); });
  });
}

inline Predict predict_mlp(const MlpCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{parallel_mlp_traffic(k.cfg, k.tokens, k.hidden, k.has_bias, k.p, r, e),
                      parallel_mlp_activations(k.cfg, k.tokens, k.hidden, k.has_bias, k.p, r, e)};
  };
}

}  // namespace shardcheck::budget::measured
