// The norm suite's mutant catalog: deliberately wrong implementations, each a realistic bug
// with its name and story. The suite must kill every one (tests/ and `shardcheck mutants`).
#pragma once

namespace shardcheck::check {

// Registers every norm mutant in NormRegistry as "mutant:<name>".
void register_norm_mutants();

}  // namespace shardcheck::check
