#include "runtime/mpi/mpi_launcher.hpp"

#include "runtime/errors.hpp"
#include "runtime/launcher.hpp"
#include "runtime/mpi/mpi_communicator.hpp"
#include "runtime/mpi/mpi_world.hpp"

#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <exception>
#include <numeric>
#include <string>

namespace shardcheck::mpi {
namespace {

ErrorClass class_of(const std::exception_ptr& e) {
  if (holds<UsageError>(e)) return ErrorClass::usage;
  if (holds<CollectiveMismatch>(e)) return ErrorClass::mismatch;
  if (holds<DeadlockError>(e)) return ErrorClass::deadlock;
  if (holds<TimeoutError>(e)) return ErrorClass::timeout;
  if (holds<PeerAborted>(e)) return ErrorClass::peer_aborted;
  return ErrorClass::other;
}

std::exception_ptr rebuild(ErrorClass cls, const std::string& what) {
  switch (cls) {
    case ErrorClass::usage: return std::make_exception_ptr(UsageError(what));
    case ErrorClass::mismatch: return std::make_exception_ptr(CollectiveMismatch(what));
    case ErrorClass::deadlock: return std::make_exception_ptr(DeadlockError(what));
    case ErrorClass::timeout: return std::make_exception_ptr(TimeoutError(what));
    case ErrorClass::peer_aborted: return std::make_exception_ptr(PeerAborted(what));
    case ErrorClass::other: break;
  }
  return std::make_exception_ptr(Error(what));
}

}  // namespace

Session::Session(int* argc, char*** argv) {
  int provided = 0;
  check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
}

Session::~Session() { MPI_Finalize(); }

std::chrono::milliseconds default_timeout() {
  const char* env = std::getenv("SHARDCHECK_MPI_TIMEOUT");
  if (env == nullptr || *env == '\0') return RunOptions::default_timeout();
  char* end = nullptr;
  const double s = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(s > 0) || s > 1e6) {
    throw UsageError("SHARDCHECK_MPI_TIMEOUT='" + std::string(env) +
                     "' is not a positive number of seconds; set it to e.g. 60 or unset it");
  }
  return std::chrono::milliseconds(std::llround(s * 1000));
}

RunResult run(int world_size, const std::function<void(Communicator&)>& fn,
              std::chrono::milliseconds timeout) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) {
    throw UsageError("mpi::run: MPI is not initialized; create an mpi::Session in main() first");
  }
  int processes = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  if (world_size < 1 || world_size > processes) {
    throw UsageError("mpi::run: world size " + std::to_string(world_size) +
                     " is out of range for " + std::to_string(processes) +
                     " MPI processes; use 1 to " + std::to_string(processes) +
                     " ranks, or start more processes (mpirun -np)");
  }
  World world(world_size, timeout);
  RunResult result;
  result.rank = world.rank();
  result.ran = world.rank() < world_size;
  std::exception_ptr mine;
  if (result.ran) {
    try {
      std::vector<int> all(static_cast<std::size_t>(world_size));
      std::iota(all.begin(), all.end(), 0);
      // The world is the first group over all ranks, as in the OpenMP backend.
      const int index = world.next_group_index(all);
      MpiCommunicator comm(world, all, world.rank(), index);
      fn(comm);
      world.announce_finished();
    } catch (...) {
      mine = std::current_exception();
      world.announce_failed(class_of(mine), describe_exception(mine));
    }
  } else {
    world.announce_finished();
  }
  const auto outcomes = world.collect_outcomes();
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(world_size));
  bool failed = false;
  for (int r = 0; r < world_size; ++r) {
    const auto& o = outcomes[static_cast<std::size_t>(r)];
    if (!o.failed) continue;
    failed = true;
    errors[static_cast<std::size_t>(r)] = r == world.rank() ? mine : rebuild(o.cls, o.what);
  }
  if (failed) throw_rank_failure(errors);
  result.ledger = std::move(world.ledger());
  return result;
}

}  // namespace shardcheck::mpi
