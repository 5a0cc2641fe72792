// How a case on disk names the reduction of a tensor-parallel layer whose config spells its fields
// alike (RowParallelConfig, MlpConfig; docs/case-format.md): shared by those families' case_of
// (suites/<family>/<family>_compare.cpp).
#pragma once

#include "cases/json_fields.hpp"
#include "compare/config_fields.hpp"

namespace shardcheck::check {

// Reads the config's token_split (its sequence-parallel token split), reduce_algorithm and kernel
// from `f`, each keeping k's value when the case omits it.
template <class Config>
void read_reduction_fields(cases::Fields& f, Config& k) {
  k.token_split = split_or(f, "token_split", k.token_split);
  k.reduce_algorithm = named_or(f, "reduce_algorithm", k.reduce_algorithm);
  k.kernel = named_or(f, "kernel", k.kernel);
}

}  // namespace shardcheck::check
