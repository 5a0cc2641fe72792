// The redistribute suite (redistribute_suite.cpp: its properties, on the generic engine,
// engine/family.hpp). Redistribution is not an op family of lib/ops (its code is lib/layout,
// with no spec and no high-precision reference of its own), so the suite is listed in
// SHARDCHECK_SUITES beside the op families (the top-level CMakeLists.txt).
#pragma once

namespace shardcheck::check {

// Registers the suite, the library's implementation ("shardcheck"), the mutant catalog and the
// correct alternative "via-replicate".
void register_redistribute_suite();

}  // namespace shardcheck::check
