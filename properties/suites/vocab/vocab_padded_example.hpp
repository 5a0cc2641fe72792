// The padded vocabulary the vocab unit tests share (vocab_unit_tests.cpp computes its cases by
// hand, vocab_usage_error_tests.cpp pins its UsageErrors): V = 3 real of V_pad = 6, split
// [2, 2, 2] over 3 ranks, so rank 1 holds a real column (row) and a padding one and rank 2 only
// padding (docs/vocab.md, "Padded vocabulary").
#pragma once

#include "layout/split_policy.hpp"
#include "runtime/communicator.hpp"
#include "tensor/tensor.hpp"

#include <cstddef>

namespace shardcheck::test {

constexpr std::size_t real_v = 3, padded_v = 6, width = 2;  // every rank holds 2 of the 6

// A VocabEmbeddingConfig or VocabCrossEntropyConfig of that vocabulary and split.
template <class Config>
Config padded() {
  Config c;
  c.vocab = padded_v;
  c.real_vocab = real_v;
  c.vocab_split = SplitPolicy::explicit_sizes({width, width, width});
  return c;
}

// This rank's columns [2r, 2r + 2) of z [tokens, V_pad].
inline Tensor<double> columns_of(const Tensor<double>& z, const Communicator& c) {
  Tensor<double> shard(Shape{z.dim(0), width});
  const auto off = width * static_cast<std::size_t>(c.rank());
  for (std::size_t t = 0; t < z.dim(0); ++t) {
    for (std::size_t v = 0; v < width; ++v) shard(t, v) = z(t, off + v);
  }
  return shard;
}

}  // namespace shardcheck::test
