#include "runtime/mpi/mpi_world.hpp"

#include "runtime/errors.hpp"
#include "runtime/format_list.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>

namespace shardcheck::mpi {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int notice_tag = 1;
// How long a rank that returned or failed may still have a message in flight to a waiter (its
// sends had completed locally, the data may still be on the wire; notices travel on another
// communicator, so they may overtake it) before the waiter gives up on it.
constexpr std::chrono::milliseconds notice_grace{200};
// How long after a failure the launcher waits for the ranks that have not reported, beyond the
// timeout (their own waits end within it), before MPI_Abort.
constexpr std::chrono::milliseconds abort_margin{5000};

// Polling back-off: busy for the first microseconds, then yield, then sleep up to 1 ms.
void back_off(int& rounds) {
  ++rounds;
  if (rounds < 64) return;
  if (rounds < 1024) {
    std::this_thread::yield();
    return;
  }
  const int us = std::min(1000, 10 * (rounds - 1023));
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

}  // namespace

void check_mpi(int rc, std::string_view call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(std::string(call) + " failed: " + std::string(text, static_cast<std::size_t>(len)));
}

int mpi_count(std::uint64_t bytes, std::string_view call) {
  if (bytes > static_cast<std::uint64_t>(INT_MAX)) {
    throw Error(std::string(call) + ": " + std::to_string(bytes) +
                " bytes exceed MPI's int count (INT_MAX); split the buffer into smaller calls");
  }
  return static_cast<int>(bytes);
}

World::World(int size, std::chrono::milliseconds timeout) : size_(size), timeout_(timeout) {
  MPI_Comm_size(MPI_COMM_WORLD, &processes_);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &control_), "MPI_Comm_dup");
  // Errors are reported by return code and turned into exceptions (check_mpi).
  MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &base_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(base_, MPI_ERRORS_RETURN);
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &p2p_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(p2p_, MPI_ERRORS_RETURN);
  const auto n = static_cast<std::size_t>(processes_);
  status_.assign(n, Status::unknown);
  outcomes_.assign(n, {});
  finished_at_.assign(n, {});
}

World::~World() {
  // Give the notices this rank sent a moment to leave; a buffer MPI may still read is leaked on
  // purpose rather than freed under it.
  const auto until = Clock::now() + std::chrono::seconds(1);
  int done = 0;
  int rounds = 0;
  while (!notice_requests_.empty() && Clock::now() < until) {
    MPI_Testall(static_cast<int>(notice_requests_.size()), notice_requests_.data(), &done,
                MPI_STATUSES_IGNORE);
    if (done != 0) break;
    back_off(rounds);
  }
  if (done == 0 && !notice_requests_.empty()) {
    for (auto& r : notice_requests_) {
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    }
    static std::vector<std::vector<char>> leaked;
    for (auto& b : notice_buffers_) leaked.push_back(std::move(b));
  }
  MPI_Comm_free(&p2p_);
  MPI_Comm_free(&base_);
  MPI_Comm_free(&control_);
}

void World::announce(Status status, ErrorClass cls, const std::string& what) {
  // Layout: status byte, error class (int32), message.
  std::vector<char> buf(1 + sizeof(std::int32_t) + what.size());
  buf[0] = static_cast<char>(status);
  const auto c = static_cast<std::int32_t>(cls);
  std::memcpy(buf.data() + 1, &c, sizeof c);
  std::memcpy(buf.data() + 1 + sizeof c, what.data(), what.size());
  for (int r = 0; r < processes_; ++r) {
    MPI_Request req = MPI_REQUEST_NULL;
    check_mpi(MPI_Isend(buf.data(), mpi_count(buf.size(), "MPI_Isend"), MPI_CHAR, r, notice_tag,
                        control_, &req),
              "MPI_Isend (notice)");
    notice_requests_.push_back(req);
  }
  notice_buffers_.push_back(std::move(buf));
}

void World::announce_finished() { announce(Status::finished, ErrorClass::other, {}); }

void World::announce_failed(ErrorClass cls, const std::string& what) {
  announce(Status::failed, cls, what);
}

void World::poll_notices() {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, notice_tag, control_, &flag, &st), "MPI_Iprobe");
    if (flag == 0) return;
    int len = 0;
    MPI_Get_count(&st, MPI_CHAR, &len);
    std::vector<char> buf(static_cast<std::size_t>(len));
    check_mpi(
        MPI_Recv(buf.data(), len, MPI_CHAR, st.MPI_SOURCE, notice_tag, control_, MPI_STATUS_IGNORE),
        "MPI_Recv (notice)");
    const auto src = static_cast<std::size_t>(st.MPI_SOURCE);
    std::int32_t cls = 0;
    std::memcpy(&cls, buf.data() + 1, sizeof cls);
    status_[src] = static_cast<Status>(buf[0]);
    outcomes_[src] = {status_[src] == Status::failed, static_cast<ErrorClass>(cls),
                      std::string(buf.begin() + 1 + sizeof cls, buf.end())};
    finished_at_[src] = Clock::now();
    if (status_[src] == Status::failed && first_failed_ < 0) {
      first_failed_ = st.MPI_SOURCE;
      failed_at_ = finished_at_[src];
    }
  }
}

void World::abandon(std::span<MPI_Request> reqs, bool collective, const std::exception_ptr& error) {
  for (auto& r : reqs) {
    if (r == MPI_REQUEST_NULL || collective) continue;
    MPI_Cancel(&r);
    MPI_Request_free(&r);
  }
  std::rethrow_exception(error);
}

void World::wait(std::span<MPI_Request> reqs, std::span<const Peer> peers, const Site& site,
                 bool collective, bool peers_only) {
  const auto deadline = Clock::now() + timeout_;
  int rounds = 0;
  for (;;) {
    // MPI_Testsome sets each completed request to MPI_REQUEST_NULL (MPI_Testall would leave
    // them all as they are until every one is done), so the pending ones name the missing.
    std::vector<int> indices(reqs.size());
    int completed = 0;
    check_mpi(MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &completed, indices.data(),
                           MPI_STATUSES_IGNORE),
              "MPI_Testsome");
    if (completed == MPI_UNDEFINED) return;  // no active request left
    poll_notices();
    const auto now = Clock::now();
    // A peer's message may still be in flight when its notice arrives (another communicator):
    // give it the grace period before calling the peer gone.
    bool peer_failed = false;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      const auto k = static_cast<std::size_t>(peers[i].rank);
      peer_failed = peer_failed || (reqs[i] != MPI_REQUEST_NULL && peers[i].receive &&
                                    status_[k] == Status::failed);
    }
    if (first_failed_ >= 0 && now - failed_at_ > notice_grace && (!peers_only || peer_failed)) {
      // The OpenMP backend's wording (omp/world.cpp), so both backends say the same.
      const bool timed_out =
          outcomes_[static_cast<std::size_t>(first_failed_)].cls == ErrorClass::timeout;
      abandon(
          reqs, collective,
          std::make_exception_ptr(PeerAborted(
              "rank " + std::to_string(rank_) + " stopped waiting in " + site.describe() + ": " +
              (timed_out
                   ? std::string("another rank timed out (see its TimeoutError)")
                   : "rank " + std::to_string(first_failed_) + " failed first (see its error)"))));
    }
    // The peers whose messages have not arrived.
    std::vector<int> missing;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      const int m = peers[i].rank;
      if (reqs[i] == MPI_REQUEST_NULL || !peers[i].receive) continue;
      if (std::find(missing.begin(), missing.end(), m) == missing.end()) missing.push_back(m);
      const auto k = static_cast<std::size_t>(m);
      if (status_[k] == Status::finished && now - finished_at_[k] > notice_grace) {
        abandon(reqs, collective,
                std::make_exception_ptr(DeadlockError(
                    "deadlock: rank " + std::to_string(rank_) + " waits in " + site.describe() +
                    " for rank " + std::to_string(m) +
                    ", which returned from its function without making that call. Every "
                    "rank of a group must make the same calls in the same order.")));
      }
    }
    if (now > deadline) {
      std::sort(missing.begin(), missing.end());
      abandon(reqs, collective,
              std::make_exception_ptr(TimeoutError(
                  "timeout: rank " + std::to_string(rank_) + " waited more than " +
                  std::to_string(timeout_.count()) + " ms in " + site.describe() +
                  ".\nRanks that did not arrive: " + format_list(missing) +
                  " (world ranks). A rank is still computing, waits on another group, or never "
                  "makes this call; raise SHARDCHECK_MPI_TIMEOUT if it is only slow.")));
    }
    back_off(rounds);
  }
}

std::vector<World::Outcome> World::collect_outcomes() {
  int rounds = 0;
  for (;;) {
    poll_notices();
    // Without a failure this waits as long as the slowest rank computes, as run() does; after
    // one, a rank that has not reported within the timeout and a margin is stuck for good.
    const auto deadline = failed_at_ + timeout_ + abort_margin;
    std::vector<int> missing;
    for (int r = 0; r < processes_; ++r) {
      if (status_[static_cast<std::size_t>(r)] == Status::unknown) missing.push_back(r);
    }
    if (missing.empty()) return outcomes_;
    if (first_failed_ >= 0 && Clock::now() > deadline) {
      std::fprintf(stderr,
                   "shardcheck mpi: rank %d: ranks %s neither finished nor failed within %lld ms "
                   "of rank %d's failure (stuck computing?); calling MPI_Abort\n",
                   rank_, format_list(missing).c_str(),
                   static_cast<long long>((timeout_ + abort_margin).count()), first_failed_);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    back_off(rounds);
  }
}

}  // namespace shardcheck::mpi
