// mpi::run(): the MPI backend's launcher, the counterpart of run() (launcher.hpp).
//
// Start the program under mpirun (docs/mpi.md); every process calls mpi::run() with the same
// world size at the same point of its program. Process r (its rank in MPI_COMM_WORLD) is world
// rank r and runs fn(comm) with its own world communicator; processes at ranks >= world_size
// sit the run out (a run may be smaller than the job, never larger).
//
// Failures: an exception on any rank is caught there and announced to every process (the
// ranks still waiting on it stop with PeerAborted; mpi_world.hpp). After every process has
// reported, every process throws the same RankFailure as run() would (errors.hpp:
// throw_rank_failure), with each rank's exception rebuilt with its class and message. A process
// that never reports (stuck computing past the timeout and beyond) makes the others print
// which rank it is and call MPI_Abort: the last resort, never a silent hang.
//
// Timeout: SHARDCHECK_MPI_TIMEOUT (seconds, decimals allowed) when set, else
// RunOptions::default_timeout() (SHARDCHECK_TIMEOUT_MS, 60 s).
#pragma once

#include "runtime/communicator.hpp"
#include "runtime/ledger.hpp"

#include <chrono>
#include <functional>

namespace shardcheck::mpi {

// MPI_Init in the constructor, MPI_Finalize in the destructor: one per program, in main().
class Session {
 public:
  Session(int* argc, char*** argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  Session(Session&&) = delete;
  Session& operator=(Session&&) = delete;
};

// How long one rank may wait in one call. @throws UsageError for a malformed variable.
std::chrono::milliseconds default_timeout();

struct RunResult {
  Ledger ledger;     // this process's rank's ledger (empty off the run)
  int rank = 0;      // this process's world rank
  bool ran = false;  // whether this process was a rank of the run
};

// Runs fn(comm) on world ranks 0..world_size-1, one per process, and waits for all of them.
// @pre MPI is initialized (Session); 1 <= world_size <= the number of processes (UsageError
//      on every process otherwise); every process calls it with the same world_size.
// @throws RankFailure on every process when any rank threw.
RunResult run(int world_size, const std::function<void(Communicator&)>& fn,
              std::chrono::milliseconds timeout = default_timeout());

}  // namespace shardcheck::mpi
