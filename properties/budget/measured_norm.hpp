// Sequence-parallel LayerNorm / RMSNorm (ops/norm/norm.hpp) and Megatron's sequence-parallel
// block (norm, column-parallel, row-parallel) measured against the budget's model: a generated
// case, one run of the forward and backward under measured_support.hpp's Probe, and the model's
// prediction for each rank.
#pragma once

#include "measured_support.hpp"
#include "ops/linear/linear.hpp"
#include "ops/norm/norm.hpp"

#include <cstddef>
#include <vector>

namespace shardcheck::budget::measured {

struct NormCase {
  int p = 1;
  std::size_t hidden = 1, ffn = 1;
  SequenceParallelNormConfig cfg;
  SplitPolicy ffn_split = SplitPolicy::chunk();
};

inline NormCase gen_norm_case() {
  NormCase k;
  k.p = *rc::gen::inRange(1, 5);
  k.hidden = *rc::gen::inRange<std::size_t>(1, 6);
  k.ffn = *rc::gen::inRange<std::size_t>(1, 7);
  k.cfg.tokens = *rc::gen::inRange<std::size_t>(1, 8);
  k.cfg.token_split = *gen_split(k.cfg.tokens, k.p);
  k.cfg.norm.kind =
      *rc::gen::element(NormKind::layer_norm, NormKind::layer_norm_no_bias, NormKind::rms_norm);
  k.cfg.reduce_algorithm = gen_algorithm();
  k.ffn_split = *gen_split(k.ffn, k.p);
  return k;
}

template <class T>
std::vector<Measured> run_norm(const NormCase& k) {
  return measure_ranks(k.p, [&](Communicator& c, Probe& probe) {
    const int r = c.rank();
    const std::size_t tr = piece_of(k.cfg.token_split, k.cfg.tokens, k.p, r);
    const auto x = zeros<T>({tr, k.hidden});
    const auto gamma = zeros<T>({k.hidden});
    const auto beta = has_beta(k.cfg.norm.kind) ? zeros<T>({k.hidden}) : Tensor<T>();
    probe.forward([&] { return sequence_parallel_norm(c, k.cfg, x, gamma, beta); });
    probe.keep(x);
    probe.backward([&] { (void)sequence_parallel_norm_backward(c, k.cfg, x, gamma, x); });
  });
}

inline Predict predict_norm(const NormCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{sp_norm_traffic(k.cfg, k.hidden, k.p, r, e),
                      sp_norm_activations(k.cfg, k.hidden, k.p, r, e)};
  };
}

// Megatron's sequence-parallel block as properties/suites/norm/norm_impl.hpp's LibraryNorm runs it.
template <class T>
std::vector<Measured> run_block(const NormCase& k) {
  const ColumnParallelConfig col = sp_block_column_config(k.cfg, k.ffn, k.ffn_split);
  const RowParallelConfig row = sp_block_row_config(k.cfg, k.ffn_split);
  return measure_ranks(k.p, [&](Communicator& c, Probe& probe) {
    const int r = c.rank();
    const std::size_t tr = piece_of(k.cfg.token_split, k.cfg.tokens, k.p, r);
    const std::size_t fr = piece_of(k.ffn_split, k.ffn, k.p, r);
    const auto x = zeros<T>({tr, k.hidden});
    const auto gamma = zeros<T>({k.hidden});
    const auto beta = has_beta(k.cfg.norm.kind) ? zeros<T>({k.hidden}) : Tensor<T>();
    const auto w1 = zeros<T>({fr, k.hidden});
    const auto w2 = zeros<T>({k.hidden, fr});
    const Tensor<T> none;
    struct Fwd {
      Tensor<T> z, a, y;
    };
    const Fwd f = probe.forward([&] {
      Fwd o;
      o.z = sequence_parallel_norm(c, k.cfg, x, gamma, beta);
      o.a = column_parallel_linear(c, col, o.z, w1, none).y;
      o.y = row_parallel_linear(c, row, o.a, w2, none).y;
      return o;
    });
    probe.keep(x);
    probe.keep(f.z);
    probe.keep(f.a);
    probe.backward([&] {
      auto gr = row_parallel_linear_backward(c, row, f.a, w2, false, f.y);
      auto gc = column_parallel_linear_backward(c, col, f.z, w1, false, gr.dx);
      (void)sequence_parallel_norm_backward(c, k.cfg, x, gamma, gc.dx);
    });
  });
}

inline Predict predict_block(const NormCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{sp_block_traffic(k.cfg, k.hidden, k.ffn, k.ffn_split, k.p, r, e),
                      sp_block_activations(k.cfg, k.hidden, k.ffn, k.ffn_split, k.p, r, e)};
  };
}

}  // namespace shardcheck::budget::measured
