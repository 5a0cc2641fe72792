// What the norm suite expects of a case: the exact values of every output in high precision,
// each with its elementwise a-priori bound for the case's element type, token split and world
// size (reference/norm/norm.hpp and docs/norm.md derive them).
#pragma once

#include "engine/expected.hpp"
#include "suites/norm/norm_case.hpp"

namespace shardcheck::check {

struct NormExpected {
  ExpectedTensor y, dx, dgamma, dbeta;  // dbeta empty without beta
  ExpectedTensor dw1, dw2;              // the block only
};

// norm:  reference::norm_expected with the token split as the parts of dgamma/dbeta.
// block: the same error propagation through the whole block (reference/norm/norm_bound.hpp's
// Propagator):
//        z = T(norm(x)); a = T(Σ_i z·W1) one dot over hidden in A; y = Σ_r T(Σ_{f in r} a·W2)
//        the ffn split's partial dots in A rounded to T and summed in T; backward da = T(dy·W2)
//        one dot over hidden; dz = Σ_r T(Σ_{f in r} da·W1) as y; dW1 = T(Σ_t da·z),
//        dW2 = T(Σ_t dy·a) (the full token sum on one rank); then the norm's backward with the
//        tracked dz as its upstream gradient (its error carried into dx, dgamma, dbeta).
template <class T>
NormExpected expected(const NormCase& c, const NormData<T>& d);

}  // namespace shardcheck::check
