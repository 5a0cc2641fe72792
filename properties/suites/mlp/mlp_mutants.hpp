// The mlp suite's mutant catalog: deliberately wrong ParallelMLPs, each a realistic bug with its
// name and story. The suite must kill every one (the tests and `shardcheck mutants mlp`).
#pragma once

#include "engine/family.hpp"
#include "suites/mlp/mlp_impl.hpp"

#include <span>

namespace shardcheck::check {

// Every mlp mutant, registered by the suite as "mutant:<name>".
std::span<const Mutant<MlpImplementation>> mlp_mutants();

}  // namespace shardcheck::check
