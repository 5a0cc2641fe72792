// The softmax_merge suite's mutant catalog: deliberately wrong merges, each a realistic bug with
// its name and story. The suite must kill every one (suite_tests and `shardcheck mutants`).
#pragma once

namespace shardcheck::check {

// Registers every softmax_merge mutant in SoftmaxMergeRegistry as "mutant:<name>".
void register_softmax_merge_mutants();

}  // namespace shardcheck::check
