// The column- and row-parallel linear layers (ops/linear/linear.hpp) measured against the budget's
// model: a generated case (world size, shapes, splits, sequence parallelism, gather, algorithm),
// one run of each layer's forward and backward under measured_support.hpp's Probe, and the
// model's prediction for each rank.
#pragma once

#include "measured_support.hpp"
#include "ops/linear/linear.hpp"

#include <cstddef>
#include <vector>

namespace shardcheck::budget::measured {

struct LinearCase {
  int p = 1;
  std::size_t tokens = 1, in = 1, out = 1;
  ColumnParallelConfig col;
  RowParallelConfig row;
};

// The case of p ranks with x [tokens, in] and W [out, in], the column-parallel config told the
// shapes it checks the pieces against (tokens, out_features); every option at its default.
inline LinearCase linear_case(int p, std::size_t tokens, std::size_t in, std::size_t out) {
  LinearCase k;
  k.p = p;
  k.tokens = tokens;
  k.in = in;
  k.out = out;
  k.col.tokens = tokens;
  k.col.out_features = out;
  return k;
}

template <class T>
std::vector<Measured> run_column(const LinearCase& k) {
  return measure_ranks(k.p, [&](Communicator& c, Probe& probe) {
    const int r = c.rank();
    const auto& cfg = k.col;
    const std::size_t tr =
        cfg.sequence_parallel_input ? piece_of(cfg.token_split, k.tokens, k.p, r) : k.tokens;
    const std::size_t outr = piece_of(cfg.out_split, k.out, k.p, r);
    const auto x = zeros<T>({tr, k.in});
    const auto w = zeros<T>({outr, k.in});
    probe.forward([&] { return column_parallel_linear(c, cfg, x, w, Tensor<T>()); });
    probe.keep(x);
    const auto dy = zeros<T>({k.tokens, cfg.gather_output ? k.out : outr});
    probe.backward([&] { (void)column_parallel_linear_backward(c, cfg, x, w, false, dy); });
  });
}

inline Predict predict_column(const LinearCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{column_parallel_traffic(k.col, k.tokens, k.in, k.out, k.p, r, e),
                      column_parallel_activations(k.col, k.tokens, k.in, k.out, k.p, r, e)};
  };
}

template <class T>
std::vector<Measured> run_row(const LinearCase& k) {
  return measure_ranks(k.p, [&](Communicator& c, Probe& probe) {
    const int r = c.rank();
    const auto& cfg = k.row;
    const std::size_t inr = piece_of(cfg.in_split, k.in, k.p, r);
    const auto x = zeros<T>({k.tokens, cfg.input_is_parallel ? inr : k.in});
    const auto w = zeros<T>({k.out, inr});
    probe.forward([&] { return row_parallel_linear(c, cfg, x, w, Tensor<T>()); });
    probe.keep(x);
    const std::size_t tr =
        cfg.sequence_parallel_output ? piece_of(cfg.token_split, k.tokens, k.p, r) : k.tokens;
    const auto dy = zeros<T>({tr, k.out});
    probe.backward([&] { (void)row_parallel_linear_backward(c, cfg, x, w, false, dy); });
  });
}

inline Predict predict_row(const LinearCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{row_parallel_traffic(k.row, k.tokens, k.in, k.out, k.p, r, e),
                      row_parallel_activations(k.row, k.tokens, k.in, k.out, k.p, r, e)};
  };
}

inline LinearCase gen_linear_case() {
  const int p = *rc::gen::inRange(1, 5);
  const auto tokens = *rc::gen::inRange<std::size_t>(1, 8);
  const auto in = *rc::gen::inRange<std::size_t>(1, 6);
  LinearCase k = linear_case(p, tokens, in, *rc::gen::inRange<std::size_t>(1, 7));
  k.col.sequence_parallel_input = *rc::gen::arbitrary<bool>();
  k.col.gather_output = *rc::gen::arbitrary<bool>();
  k.col.token_split = *gen_split(k.tokens, k.p);
  k.col.out_split = *gen_split(k.out, k.p);
  k.col.all_reduce_algorithm = gen_algorithm();
  k.row.input_is_parallel = *rc::gen::arbitrary<bool>();
  k.row.sequence_parallel_output = *rc::gen::arbitrary<bool>();
  k.row.in_split = *gen_split(k.in, k.p);
  k.row.token_split = k.col.token_split;
  k.row.reduce_algorithm = gen_algorithm();
  return k;
}

}  // namespace shardcheck::budget::measured
