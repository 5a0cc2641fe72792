// What the per-element-type properties of properties/reference/ share: one RC_GTEST_PROP per
// storage type (float64, float32, bfloat16, float16), each its own ctest test, so that a failure
// names the type it failed in and one type can be rerun alone (--gtest_filter='*_bfloat16').
#pragma once

#include "runtime/dtype.hpp"

#include <rapidcheck/gtest.h>

// The properties <suite>.<name>_float64, _float32, _bfloat16 and _float16, each running
// `check<T>()` for its type T. `check` names a function template (ulp_distance_case), so it
// cannot be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SHARDCHECK_PROP_PER_TYPE(suite, name, check)                           \
  RC_GTEST_PROP(suite, name##_float64, ()) { check<double>(); }                \
  RC_GTEST_PROP(suite, name##_float32, ()) { check<float>(); }                 \
  RC_GTEST_PROP(suite, name##_bfloat16, ()) { check<shardcheck::bfloat16>(); } \
  RC_GTEST_PROP(suite, name##_float16, ()) { check<shardcheck::float16>(); }
// NOLINTEND(bugprone-macro-parentheses)
