// The shared state of one run() of the OpenMP-thread backend: every rank's status, the ledgers,
// the registry of groups, and the one way any rank waits.
//
// Waiting. Every wait in the backend is "until this atomic word changes from the value I saw".
// A waiter spins briefly (only when there are no more ranks than cores), then yields, then
// sleeps on a condition variable. A rank that changes a word others may wait on calls notify().
// Because all waits have this one form, the world can tell a deadlock exactly: when every rank
// that has not returned is asleep and no sleeper's word has changed, nobody can make progress.
// Then every sleeper throws DeadlockError with a table of what each rank waits on. A rank that
// returned early or called a collective on a different group is found this way at once, with
// no timeout. RunOptions::timeout remains for ranks that never wait (stuck computing).
#pragma once

#include "runtime/ledger.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::omp {

// What a waiting rank is waiting for; lives on the waiter's stack while it waits.
struct WaitSite {
  std::string_view what;   // "all_reduce", "send", ...
  std::uint64_t step = 0;  // the group's collective step
  const std::vector<int>* group = nullptr;
  int peer = -1;  // send/recv: the other side's group rank
  int tag = 0;

  std::string describe() const;  // "all_reduce (step 3) on group [0,1,2]"
};

struct GroupState;

class World {
 public:
  World(int size, std::chrono::milliseconds timeout);

  int size() const noexcept { return size_; }
  Ledger& ledger(int world_rank) { return ledgers_[static_cast<std::size_t>(world_rank)]; }
  std::vector<Ledger> take_ledgers() { return std::move(ledgers_); }

  // Blocks rank `world_rank` until `word` no longer holds `seen`.
  // @throws PeerAborted when another rank failed, DeadlockError when no rank can make progress,
  //         TimeoutError past the run's timeout.
  // With `interruptible` false the wait ignores failures, deadlocks and the timeout: only for
  // waits that every peer is already committed to end (the closing barrier of a collective
  // whose opening barrier completed), where unwinding would free buffers peers still read.
  void wait_change(int world_rank, const std::atomic<std::uint64_t>& word, std::uint64_t seen,
                   const WaitSite& site, bool interruptible = true);

  // Throws what a rank sees when the run is failing: PeerAborted or DeadlockError. For a rank
  // that finds a collective abandoned by a peer.
  [[noreturn]] void throw_fatal(int world_rank, const WaitSite& site);

  // Wakes sleepers; call after changing any word a rank may wait on.
  void notify();

  // Status changes reported by run().
  void rank_failed(int world_rank);
  void rank_finished(int world_rank);

  // How many groups with these members `world_rank` created before: the k-th creation on
  // every member maps to the same shared state. Touches only that rank's own counters.
  int next_group_index(int world_rank, const std::vector<int>& members) {
    return group_counts_[static_cast<std::size_t>(world_rank)][members]++;
  }

  // The shared state of the `index`-th group with these members (world ranks, group order).
  std::shared_ptr<GroupState> group_state(const std::vector<int>& members, int index);

 private:
  enum class Status : std::uint8_t { running, sleeping, finished, failed };
  struct RankStatus {
    Status status = Status::running;
    const std::atomic<std::uint64_t>* word = nullptr;  // while sleeping
    std::uint64_t seen = 0;
    const WaitSite* site = nullptr;
  };
  enum class Fatal : std::uint8_t { none, peer_failed, deadlock, timeout };

  [[noreturn]] void throw_fatal_locked(int world_rank, const WaitSite& site);
  void check_deadlock_locked();
  std::string status_table_locked() const;
  void sleep_until_change(int world_rank, const std::atomic<std::uint64_t>& word,
                          std::uint64_t seen, const WaitSite& site,
                          std::chrono::steady_clock::time_point deadline, bool interruptible);
  [[noreturn]] void time_out_locked(int world_rank, const WaitSite& site);

  const int size_;
  const std::chrono::milliseconds timeout_;
  const bool oversubscribed_;
  std::vector<Ledger> ledgers_;

  std::atomic<bool> aborted_{false};
  std::atomic<int> sleepers_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<RankStatus> status_;  // guarded by mu_
  Fatal fatal_ = Fatal::none;       // guarded by mu_
  std::string fatal_message_;       // guarded by mu_
  int failed_rank_ = -1;            // guarded by mu_

  std::vector<std::map<std::vector<int>, int>> group_counts_;  // per rank, touched by it alone
  std::mutex groups_mu_;
  std::map<std::pair<std::vector<int>, int>, std::shared_ptr<GroupState>> groups_;
};

}  // namespace shardcheck::omp
