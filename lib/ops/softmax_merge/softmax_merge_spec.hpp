// The spec of softmax_merge (ops/op_spec.hpp): per-rank math that moves no data. n partials
// of the same rows, each an unnormalized-then-normalized output and its lse (softmax_merge.hpp),
// merge into one: out = Σ_j exp(lse_j − lse)·out_j with lse = log Σ_j exp(lse_j). The partials
// come from wherever the caller computed them (the blocks of a context-parallel ring, the
// splits of a split-KV decode); every tensor is the caller's, whole (R), and the op makes no
// collective. Element type: the accumulator A the partials are in.
#pragma once

#include "ops/op_spec.hpp"

#include <vector>

namespace shardcheck {

// n partials of out [rows, width] and lse [rows], stacked: out_parts [n, rows, width],
// lse_parts [n, rows].
spec::OpSpec softmax_merge_spec(std::size_t parts, std::size_t rows, std::size_t width);

std::vector<spec::OpSpec> softmax_merge_example_specs();

}  // namespace shardcheck
