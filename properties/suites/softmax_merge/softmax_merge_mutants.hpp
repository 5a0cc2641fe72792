// The softmax_merge suite's mutant catalog: deliberately wrong implementations, each a realistic
// bug with its name and story. The suite must kill every one (the tests and `shardcheck mutants`).
#pragma once

#include "engine/family.hpp"
#include "suites/softmax_merge/softmax_merge_impl.hpp"

#include <span>

namespace shardcheck::check {

// Every softmax_merge mutant, registered by the suite as "mutant:<name>".
std::span<const Mutant<SoftmaxMergeImplementation>> softmax_merge_mutants();

}  // namespace shardcheck::check
