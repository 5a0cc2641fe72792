// The vocab suite's mutant catalog: deliberately wrong implementations, each a realistic bug
// with its name and story. The suite must kill every one (the tests and `shardcheck mutants`).
#pragma once

#include "engine/family.hpp"
#include "suites/vocab/vocab_impl.hpp"

#include <span>

namespace shardcheck::check {

// Every vocab mutant, registered by the suite as "mutant:<name>".
std::span<const Mutant<VocabImplementation>> vocab_mutants();

}  // namespace shardcheck::check
