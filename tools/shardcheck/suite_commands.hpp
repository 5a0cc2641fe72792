// The commands that read the suite registry (engine/suite.hpp): list, check and mutants, each as
// its table (command_line.hpp) with the state its options set.
//
//   shardcheck list
//   shardcheck check [SUITE...] [--impl NAME] [--property NAME] [--cases N] [--seed S]
//                    [--max-world P] [--dtype LIST] [--report DIR] [--no-shrink]
//   shardcheck mutants [SUITE...] [--cases N] [--seed S] [--max-world P] [--dtype LIST]
//                      [--report DIR]
#pragma once

#include "tools/shardcheck/command_line.hpp"

namespace shardcheck::cli {

// Every suite, property, implementation and mutant, with its description. Exit status 0.
Command list_command();

// The properties of the given suites (default: all) against one implementation; one line per
// property, a failure's shrunk case and its replay command, "N passed, N failed". Exit status 0
// when every property passed, 1 when one failed. Checks the suites, the implementation, the
// property and the report directory before running anything.
// @throws UsageError for an unknown suite, implementation or property, or an unwritable --report.
Command check_command();

// Every mutant of the given suites (default: all) against their properties, each until one
// property kills it. Exit status 0 when every mutant was killed, 1 when one survived.
// @throws UsageError for an unknown suite or an unwritable --report.
Command mutants_command();

}  // namespace shardcheck::cli
