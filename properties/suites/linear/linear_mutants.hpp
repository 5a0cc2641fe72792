// The linear suite's mutant catalog: deliberately wrong implementations, each a realistic bug
// with its name and story. The suite must kill every one (the tests and `shardcheck mutants`).
#pragma once

#include "engine/family.hpp"
#include "suites/linear/linear_impl.hpp"

#include <span>

namespace shardcheck::check {

// Every linear mutant, registered by the suite as "mutant:<name>".
std::span<const Mutant<LinearImplementation>> linear_mutants();

}  // namespace shardcheck::check
