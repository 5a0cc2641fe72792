// What the mlp suite expects of a case: every output's exact value in high precision with its
// elementwise a-priori bound for the case's element type, ffn split and world size
// (reference/mlp/mlp_bound.hpp; the derivation is docs/mlp.md's "The bound").
#pragma once

#include "engine/expected.hpp"
#include "suites/mlp/mlp_case.hpp"

namespace shardcheck::check {

struct MlpExpected {
  ExpectedTensor y, dx, dw_gate, dw_up, db_gate, db_up, dw_down, db_down;  // empty when absent
};

// The split contractions are fc2's forward (over the ranks' ffn features, reduced in T) and
// fc1's dx (over the ranks' gate and up features, reduced in T); every other dot is on one rank.
template <class T>
MlpExpected expected(const MlpCase& c, const MlpData<T>& d);

}  // namespace shardcheck::check
