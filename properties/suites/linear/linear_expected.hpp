// What the linear suite expects of a case: the exact values of y, dx, dw and db in high
// precision, each with its elementwise a-priori bound for the case's element type, splits and
// world size (the derivations are in reference/bounds.hpp and docs/tolerances.md).
#pragma once

#include "engine/expected.hpp"
#include "suites/linear/linear_case.hpp"

namespace shardcheck::check {

struct LinearExpected {
  ExpectedTensor y, dx, dw, db;  // db empty without bias
};

// The bound of each element is the one of the rounding scheme the op's contract allows
// (lib/ops/linear/linear.hpp): which products share a rank (a partial dot product, rounded to T),
// how many partials are reduced in T, and the bias added once in T.
//   column_parallel  y: dense dot over in, + bias      dx: p partial dots over out_split
//                    dw, db: dense sums over tokens
//   row_parallel     y: p partial dots over in_split, + bias once
//                    dx: dense dot over out            dw, db: dense sums over tokens
template <class T>
LinearExpected expected(const LinearCase& c, const LinearData<T>& d);

}  // namespace shardcheck::check
