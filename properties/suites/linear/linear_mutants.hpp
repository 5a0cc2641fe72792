// The linear suite's mutant catalog: deliberately wrong implementations, each a realistic bug
// with its name and story. The suite must kill every one (tests/ and `shardcheck mutants`).
#pragma once

namespace shardcheck::check {

// Registers every linear mutant in LinearRegistry as "mutant:<name>".
void register_linear_mutants();

}  // namespace shardcheck::check
