// The check engine under mpirun: the case driver (case_driver.hpp) whose ranks are MPI processes,
// and the program wrapper that sets it. Built with the MPI backend (SHARDCHECK_HAVE_MPI,
// docs/mpi.md); `shardcheck` uses it when mpirun started it:
//
//   mpirun --oversubscribe -np 4 shardcheck check linear --seed 7
//
// gives the verdicts of `shardcheck check linear --seed 7 --max-world 4` on the OpenMP backend,
// with rank r of every case on process r (docs/mpi.md, "Suites under mpirun").
#pragma once

#include "engine/case_driver.hpp"

#include <mpi.h>

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace shardcheck::check {

class MpiCaseDriver final : public CaseDriver {
 public:
  // @pre MPI is initialized (mpi::Session). Duplicates MPI_COMM_WORLD for the engine's own
  // messages (the gathered outputs, the agreed outcomes), collectively.
  MpiCaseDriver();
  ~MpiCaseDriver() override;
  MpiCaseDriver(const MpiCaseDriver&) = delete;
  MpiCaseDriver& operator=(const MpiCaseDriver&) = delete;
  MpiCaseDriver(MpiCaseDriver&&) = delete;
  MpiCaseDriver& operator=(MpiCaseDriver&&) = delete;

  int processes() const override { return processes_; }
  int process() const override { return process_; }
  // mpi::run (runtime/mpi/mpi_launcher.hpp), then every rank's bytes and ledger gathered to
  // every process (MPI_Allgatherv). @throws RankFailure on every process when a rank threw.
  Gathered run(int world,
               const std::function<std::vector<std::byte>(Communicator&)>& fn) const override;
  // MPI_Bcast from process 0 of the length, then of the bytes.
  std::string agree(const std::string& value) const override;
  // Prints "shardcheck: process p of n: why" on std::cerr, then MPI_Abort.
  [[noreturn]] void abandon(const std::string& why) const override;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int processes_ = 1;
  int process_ = 0;
};

// Whether an MPI launcher started this program: Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE,
// PMIx launchers PMIX_RANK, MPICH's Hydra PMI_SIZE.
bool launched_by_mpirun();

// main() under mpirun: MPI_Init, an MpiCaseDriver set for the engine, then command(out, err) on
// every process: process 0 prints to std::cout and std::cerr, the others print nothing. Returns
// command's exit status (the same on every process, since the cases end the same way on each).
// An exception escaping command (a process that left the lockstep) is printed with the process
// and ends the job with MPI_Abort, the last resort: the other processes would wait for it forever.
int run_under_mpirun(int* argc, char*** argv,
                     const std::function<int(std::ostream& out, std::ostream& err)>& command);

}  // namespace shardcheck::check
