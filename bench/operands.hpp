// Operands shared by the reference benchmarks: normal(0, 1) samples rounded to the storage dtype T
// (so every value is one a T tensor can hold), from a fixed seed, stored as Stored (T itself, or
// reference::hp when the benchmark feeds the reference's high-precision entry points); and the
// benchmark's shape, its first arguments.
#pragma once

#include "tensor/tensor.hpp"

#include <benchmark/benchmark.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>

namespace shardcheck::bench {

template <class T, class Stored = T>
Tensor<Stored> normal_tensor(Shape shape, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Tensor<Stored> t(std::move(shape));
  for (Stored& v : t.values()) v = Stored(static_cast<double>(static_cast<T>(normal(rng))));
  return t;
}

// The first N arguments of the benchmark (its registered Args) as sizes:
// const auto [tokens, in, out] = sizes_of<3>(state).
template <std::size_t N>
std::array<std::size_t, N> sizes_of(const benchmark::State& state) {
  std::array<std::size_t, N> s{};
  for (std::size_t i = 0; i < N; ++i)
    s[i] = static_cast<std::size_t>(state.range(static_cast<int>(i)));
  return s;
}

}  // namespace shardcheck::bench
