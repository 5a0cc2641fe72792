// The shardcheck command line, as a function, so a user's own program (which registers its own
// implementations) can offer the same commands. tools/shardcheck/main.cpp is the stock program.
//
//   shardcheck list
//   shardcheck check [SUITE...] [--impl NAME] [--property NAME] [--cases N] [--seed S]
//                    [--max-world P] [--dtype LIST] [--report DIR] [--no-shrink]
//   shardcheck mutants [SUITE...] [--cases N] [--seed S] [--max-world P] [--dtype LIST]
//                      [--report DIR]
//
// Exit status: 0 when everything passed (check) or every mutant was killed (mutants); 1 when a
// property failed or a mutant survived; 2 for a usage error (unknown suite, bad option value,
// impossible configuration), reported on one line.
#pragma once

#include <iosfwd>

namespace shardcheck::cli {

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace shardcheck::cli
