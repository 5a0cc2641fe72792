// The model suite's mutant catalog: training steps with one seam wrong, each a realistic bug
// with its name and story, each the library's step (lib/ops/model/model_step.hpp) with one step
// replaced. The suite must kill every one (the tests and `shardcheck mutants model`).
#pragma once

#include "engine/family.hpp"
#include "suites/model/model_impl.hpp"

#include <span>

namespace shardcheck::check {

// Every model mutant, registered by the suite as "mutant:<name>".
std::span<const Mutant<ModelImplementation>> model_mutants();

}  // namespace shardcheck::check
