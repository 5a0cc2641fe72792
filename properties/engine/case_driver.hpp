// How the check engine runs a case's ranks: in this process, one OpenMP thread per rank (the
// default: no driver set), or one process per rank under mpirun (mpi/mpi_case_driver.hpp, which
// `mpirun -np P shardcheck check ...` sets; docs/mpi.md, "Suites under mpirun").
//
// Lockstep. Under mpirun every process runs the same command, so RapidCheck draws the same
// cases in the same order on every process (generation is a function of the seed) and shrinks
// them in the same order, as long as every case ends the same way on every process. The engine
// makes sure it does, through the driver:
//   - a case's ranks run once, rank r on process r (run() below); every rank's outputs and
//     ledger are then gathered to every process, so each process holds what the OpenMP launcher
//     would have returned (rank_family.hpp: run_on_ranks);
//   - only the checker (process 0) compares them with the reference (RankFamily::check_case);
//   - the checker's outcome of every case (passed; failed, with its message; discarded) is
//     broadcast and every process ends the case with it, and so are the checker's decisions
//     that depend on the clock (RunParams::deadline) (runner.cpp);
//   - before each case's run the processes compare the case's description with the checker's
//     (same_case), and a process whose own outcome of a case is neither a pass nor the
//     checker's outcome has left the lockstep too: either ends the job with the reason
//     (CaseDriver::abandon) instead of waiting in a collective that never matches.
#pragma once

#include "runtime/communicator.hpp"
#include "runtime/ledger.hpp"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace shardcheck::check {

class CaseDriver {
 public:
  virtual ~CaseDriver() = default;
  CaseDriver() = default;
  CaseDriver(const CaseDriver&) = delete;
  CaseDriver& operator=(const CaseDriver&) = delete;
  CaseDriver(CaseDriver&&) = delete;
  CaseDriver& operator=(CaseDriver&&) = delete;

  // The processes of the run: the largest world a case can run on.
  virtual int processes() const = 0;
  // This process's index; process 0 is the checker, which compares and reports.
  virtual int process() const = 0;
  bool checker() const { return process() == 0; }

  // Every rank's outputs (as rank_bytes.hpp's bytes) and ledger, by rank, on every process.
  struct Gathered {
    std::vector<std::vector<std::byte>> outputs;
    std::vector<Ledger> ledgers;
  };
  // Runs fn(comm) on ranks 0..world-1, rank r on process r (processes past world sit it out);
  // fn returns its rank's outputs as bytes.
  // @pre world <= processes(); every process calls it at the same point with the same world.
  // @throws RankFailure on every process when any rank threw (the same message on each).
  virtual Gathered run(int world,
                       const std::function<std::vector<std::byte>(Communicator&)>& fn) const = 0;
  // The checker's `value`, on every process.
  virtual std::string agree(const std::string& value) const = 0;
  // Ends every process of the run after printing `why` with this process's index: the last
  // resort for a process that left the lockstep, which the others would wait for forever.
  [[noreturn]] virtual void abandon(const std::string& why) const = 0;
};

// The driver cases run through; nullptr (the default): OpenMP threads in this process.
const CaseDriver* case_driver() noexcept;
// Sets it (nullptr restores the default); the caller keeps `d` alive while it is set.
void set_case_driver(const CaseDriver* d) noexcept;

// Lockstep's case check: does nothing without a driver; with one, compares this process's
// `description` of the case about to run with the checker's, and abandons the run (naming this
// process and both descriptions) when they differ.
void same_case(const std::string& description);

}  // namespace shardcheck::check
