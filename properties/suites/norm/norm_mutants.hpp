// The norm suite's mutant catalog: deliberately wrong implementations, each a realistic bug
// with its name and story. The suite must kill every one (the tests and `shardcheck mutants`).
#pragma once

#include "engine/family.hpp"
#include "suites/norm/norm_impl.hpp"

#include <span>

namespace shardcheck::check {

// Every norm mutant, registered by the suite as "mutant:<name>".
std::span<const Mutant<NormImplementation>> norm_mutants();

}  // namespace shardcheck::check
