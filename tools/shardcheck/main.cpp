// The stock shardcheck program: the builtin suites, the library's implementations and the
// mutant catalog. A user's program links shardcheck::main too and adds its own registrations.
// Started by mpirun (and built with the MPI backend), it runs the suites with each case's ranks
// on the MPI processes (engine/mpi_case_driver.hpp, docs/mpi.md).
#include "engine/suite.hpp"
#include "tools/shardcheck/cli.hpp"

#ifdef SHARDCHECK_HAVE_MPI
#include "engine/mpi_case_driver.hpp"
#endif

#include <iostream>

int main(int argc, char** argv) {
  shardcheck::check::register_builtin_suites();
#ifdef SHARDCHECK_HAVE_MPI
  if (shardcheck::check::launched_by_mpirun()) {
    return shardcheck::check::run_under_mpirun(&argc, &argv,
                                               [&](std::ostream& out, std::ostream& err) {
                                                 return shardcheck::cli::run(argc, argv, out, err);
                                               });
  }
#endif
  return shardcheck::cli::run(argc, argv, std::cout, std::cerr);
}
