// The per-process state of one mpi::run() (mpi_launcher.hpp): this process's rank, its ledger,
// the run's control communicator, what this process has heard about the other ranks, and the
// one way the MPI backend waits.
//
// Notices. When a rank's function returns or throws, the launcher sends a notice to every
// process of the run on the control communicator (a duplicate of MPI_COMM_WORLD made for this
// run): "finished", or "failed" with the exception's class and message. Every wait of the
// backend polls for notices, so a rank waiting on a peer that failed stops at once with
// PeerAborted, and one waiting on a peer that returned early (whose message therefore never
// comes) stops with DeadlockError, instead of waiting for the timeout.
//
// Waiting. Every wait is "until these nonblocking MPI requests complete" (wait()), polled with
// MPI_Testsome, backing off from busy polling to short sleeps so that oversubscribed processes
// (more ranks than cores) give the core to the rank being waited for. Past the run's timeout the
// waiter throws TimeoutError naming the ranks whose messages did not arrive.
#pragma once

#include "runtime/ledger.hpp"
#include "runtime/omp/world.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shardcheck::mpi {

// What a waiting rank waits for, for messages: "all_reduce (step 3) on group [0,1,2]". The
// OpenMP backend's own (omp/world.hpp), so that both backends word their errors alike.
using Site = omp::WaitSite;

// The class of a rank's exception as a failed notice carries it, so that every process can
// rebuild it with its type (errors.hpp) for RankFailure.
enum class ErrorClass : std::int32_t {
  other,
  usage,
  mismatch,
  deadlock,
  timeout,
  peer_aborted,
};

class World {
 public:
  // @pre MPI is initialized; every process of MPI_COMM_WORLD constructs its World at the same
  // point (the control communicator is duplicated collectively). `size` is the run's world
  // (processes at ranks >= size only take part in the closing exchange of notices).
  World(int size, std::chrono::milliseconds timeout);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;
  World(World&&) = delete;
  World& operator=(World&&) = delete;

  int size() const noexcept { return size_; }
  int processes() const noexcept { return processes_; }
  int rank() const noexcept { return rank_; }  // this process's rank in MPI_COMM_WORLD
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  Ledger& ledger() noexcept { return ledger_; }
  MPI_Comm control() const noexcept { return control_; }
  // The communicator the run's groups are created from (MPI_Comm_create_group).
  MPI_Comm base() const noexcept { return base_; }
  // Point-to-point messages of every group, addressed by world rank: a message needs only its
  // two ends, so a group's send/recv never waits for the group's communicator to exist.
  MPI_Comm p2p() const noexcept { return p2p_; }

  // One request's other end: its world rank, and whether the request receives from it (only
  // receives tell whether a peer arrived; timeouts name the peers of pending receives).
  struct Peer {
    int rank;
    bool receive;
  };
  // Waits until every request completes. peers[i]: the other end of reqs[i].
  // On failure the pending requests are cancelled (receives) or released (sends) before the
  // throw; the send buffers of the caller must outlive the call (the backend's own buffers).
  // @throws PeerAborted once any rank of the run has failed (after a grace period for messages
  //         still in flight), DeadlockError when a rank that reqs receive from has returned and
  //         its message still has not come after that grace period,
  //         TimeoutError past timeout(), naming the ranks whose requests are pending.
  // With `peers_only`, a failure elsewhere in the run is ignored: only a failed peer of a
  // pending receive (or the timeout) ends the wait.
  // Nonblocking collectives cannot be cancelled: with `collective` the pending requests are left
  // as they are (the communicator is then broken and never reused).
  void wait(std::span<MPI_Request> reqs, std::span<const Peer> peers, const Site& site,
            bool collective = false, bool peers_only = false);

  // How many groups with these members (world ranks, group order) this rank created before.
  int next_group_index(const std::vector<int>& members) { return group_counts_[members]++; }

  // The launcher's side of the notices: this rank's own outcome, sent to every process, and
  // the collection of every process's outcome. Without failures it waits for the slowest rank
  // as run() does; once a rank failed, a rank that has not reported within timeout() and a
  // margin is stuck: it prints which ranks and calls MPI_Abort, the last resort.
  void announce_finished();
  void announce_failed(ErrorClass cls, const std::string& what);
  struct Outcome {
    bool failed = false;
    ErrorClass cls = ErrorClass::other;
    std::string what;
  };
  std::vector<Outcome> collect_outcomes();

 private:
  enum class Status : std::uint8_t { unknown, finished, failed };
  void announce(Status status, ErrorClass cls, const std::string& what);
  void poll_notices();
  [[noreturn]] static void abandon(std::span<MPI_Request> reqs, bool collective,
                                   const std::exception_ptr& error);

  const int size_;
  const std::chrono::milliseconds timeout_;
  int processes_ = 0;
  int rank_ = 0;
  MPI_Comm control_ = MPI_COMM_NULL;
  MPI_Comm base_ = MPI_COMM_NULL;
  MPI_Comm p2p_ = MPI_COMM_NULL;
  Ledger ledger_;
  std::vector<Status> status_;
  std::vector<Outcome> outcomes_;
  std::vector<std::chrono::steady_clock::time_point> finished_at_;
  int first_failed_ = -1;
  std::chrono::steady_clock::time_point failed_at_{};  // when first_failed_'s notice came
  std::map<std::vector<int>, int> group_counts_;
  // Send buffers of notices, kept until the run ends (MPI reads them asynchronously).
  std::vector<std::vector<char>> notice_buffers_;
  std::vector<MPI_Request> notice_requests_;
};

// Throws Error naming the MPI call and the MPI error string when rc is not MPI_SUCCESS.
void check_mpi(int rc, std::string_view call);

// Bytes as the int count MPI takes. @throws Error past INT_MAX (MPI-3 counts are int).
int mpi_count(std::uint64_t bytes, std::string_view call);

}  // namespace shardcheck::mpi
