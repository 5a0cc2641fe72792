// The vocab suite's mutant catalog: deliberately wrong vocabulary-parallel embeddings and
// cross-entropies, each a realistic bug with its name and story. The suite must kill every one.
#pragma once

namespace shardcheck::check {

// Registers every vocab mutant in VocabRegistry as "mutant:<name>".
void register_vocab_mutants();

}  // namespace shardcheck::check
