// One generated case of the softmax_merge suite: the accumulator type A, the rows, the row
// width, the keys and their scores (masked keys −inf; offsets up to ±1000, or ±1e30 where the
// property allows it; gaps beyond exp's range), the values, a partition of the keys into parts
// (any assignment of keys to parts: empty parts and all-empty rows included), what each empty
// partial's out holds (0, NaN or +inf: the merge must ignore it), a permutation of the parts,
// a grouping of the parts (for nested merges), a ring start and whether the ring's accumulator
// starts empty, and special-value partials for the conventions. Drawn on the main thread.
#pragma once

#include "engine/suite.hpp"
#include "tensor/tensor.hpp"

#include <rapidcheck.h>

#include <cstddef>
#include <string>
#include <vector>

namespace shardcheck::check {

enum class EmptyFill { zero, nan, inf };

struct MergeCase {
  DType dtype = DType::float64;  // float64 or float32: the merge's A
  std::size_t rows = 1, width = 1, keys = 0, parts = 1;
  bool huge = false;                     // offsets and gaps up to 1e30 drawn
  std::vector<std::size_t> part_of_key;  // [keys], each < parts
  std::vector<EmptyFill> empty_fill;     // [parts]: what an empty partial's out holds
  std::vector<std::size_t> permutation;  // of 0..parts−1
  std::size_t groups = 1;
  std::vector<std::size_t> group_of_part;  // [parts], each < groups
  std::size_t ring_start = 0;              // the rank whose chain is checked
  bool ring_from_empty = false;            // the accumulator starts as the identity

  // "float32 rows=3 width=2 keys=7 parts=4 part_of_key=[0,3,3,1,0,2,2] ..."
  std::string describe() const;
};

struct MergeCaseOptions {
  bool huge = false;  // allow ±1e30 offsets and gaps (the lse-only and exact-input properties)
};

rc::Gen<MergeCase> gen_case(const RunConfig& config, const MergeCaseOptions& options);

// scores [rows, keys] (A values or −inf), values [keys, width] (A values).
template <class A>
struct MergeData {
  Tensor<A> scores;
  Tensor<A> values;
};

template <class A>
rc::Gen<MergeData<A>> gen_data(const MergeCase& c);

// Partials with special values, for the conventions: per part and row an lse that is −inf, NaN,
// +inf or finite (±1000 range), and outs with NaN in some non-empty parts and NaN/±inf in empty
// ones. [rows, width] / [rows] each; zero parts possible.
template <class A>
struct SpecialPartials {
  std::vector<Tensor<A>> out, lse;
};

template <class A>
rc::Gen<SpecialPartials<A>> genSpecialPartials(const MergeCase& c);

}  // namespace shardcheck::check
