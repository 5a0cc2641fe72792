// run(): executes a function on P ranks and returns each rank's ledger.
//
// The OpenMP-thread backend: rank r is thread r of one `#pragma omp parallel` team of exactly
// P threads (P may exceed the cores; waiting ranks back off to sleep so the rank being waited
// for gets the core). Each rank receives its own world communicator.
//
// Failures: an exception on any rank is caught there (it never reaches OpenMP, where it would
// call std::terminate); the ranks still waiting are released with PeerAborted, and after
// every rank has stopped run() throws RankFailure naming the primary failure's rank.
//
// Generate every input before calling run(): RapidCheck generators throw when used from
// another thread, and RC_ASSERT belongs on the main thread after run() returns.
#pragma once

#include "runtime/communicator.hpp"
#include "runtime/ledger.hpp"

#include <chrono>
#include <functional>
#include <vector>

namespace shardcheck {

struct RunOptions {
  // How long one rank may wait in one call before every rank fails with TimeoutError.
  // Deadlocks (every live rank waiting, none able to proceed) are reported at once instead.
  // Default: 60 s, or the environment variable SHARDCHECK_TIMEOUT_MS when set.
  std::chrono::milliseconds timeout = default_timeout();

  static std::chrono::milliseconds default_timeout();
};

struct RunResult {
  std::vector<Ledger> ledgers;  // indexed by world rank
};

// The largest world run() accepts.
inline constexpr int max_world_size = 256;

// Runs fn(comm) on ranks 0..world_size-1 concurrently and waits for all of them.
// @pre 1 <= world_size <= max_world_size, and not called from inside run() or another OpenMP
//      parallel region (UsageError otherwise).
// @post every rank has returned; the ledgers hold every call each rank made.
// @throws RankFailure when any rank threw.
RunResult run(int world_size, const std::function<void(Communicator&)>& fn,
              const RunOptions& options = {});

}  // namespace shardcheck
