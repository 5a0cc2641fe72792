// The stock shardcheck program: the builtin suites, the library's implementations and the
// mutant catalog. A user's program links shardcheck::main too and adds its own registrations.
#include "engine/suite.hpp"
#include "tools/shardcheck/cli.hpp"

#include <iostream>

int main(int argc, char** argv) {
  shardcheck::check::register_builtin_suites();
  return shardcheck::cli::run(argc, argv, std::cout, std::cerr);
}
