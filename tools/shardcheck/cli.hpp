// The shardcheck command line, as a function, so a user's own program (which registers its own
// implementations) can offer the same commands. tools/shardcheck/main.cpp is the stock program;
// docs/cli.md describes every command.
//
//   shardcheck list
//   shardcheck check [SUITE...] [--impl NAME] [--property NAME] [--cases N] [--seed S]
//                    [--max-world P] [--dtype LIST] [--report DIR] [--no-shrink]
//   shardcheck mutants [SUITE...] [--cases N] [--seed S] [--max-world P] [--dtype LIST]
//                      [--report DIR]
//   shardcheck compare CASE... [--report DIR]
//   shardcheck budget [--seq S] [--batch B] [--hidden H] [--heads A] [--kv-heads G]
//                     [--layers L] [--vocab V] [--mesh LIST] [--bytes N] [--sp]
//                     [--recompute MODE] [--json]
//   shardcheck help [COMMAND]            also: shardcheck -h, shardcheck --help
//   shardcheck version                   also: shardcheck --version
//
// -h or --help anywhere among a command's arguments prints that command's help (its arguments,
// every option with what it takes and its default, examples) on `out` and runs nothing. The
// version printed, "shardcheck X.Y.Z", is the CMake project's (SHARDCHECK_VERSION).
//
// Exit status: 0 when everything passed (check, compare), every mutant was killed (mutants), or
// for list, budget, help and version; 1 when a property failed, a mutant survived or a compared
// tensor failed; 2 for a usage error (unknown command, option or suite, a missing or bad option
// value, an impossible configuration, a malformed or mismatched case file for compare),
// reported on `err` on one line that ends with where the help is, e.g.
// "shardcheck: error: --cases needs a value (N) (see shardcheck check --help)"; 3 for an
// internal error (a bug in shardcheck or in a registered implementation, not in the arguments).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace shardcheck::cli {

// Runs the command argv[1..argc) names; argv[0] is the program. Writes results and help to out,
// errors to err, and returns the exit status above. Throws nothing.
int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// One command and the options it takes, as typed ("--cases").
struct CommandOptions {
  std::string command;
  std::vector<std::string> options;
};

// Every command, from the table that run() parses with and prints the help from (so a test can
// check that each option's help is printed).
std::vector<CommandOptions> command_options();

}  // namespace shardcheck::cli
