#include "runtime/omp/world.hpp"

#include "runtime/errors.hpp"
#include "runtime/omp/group_state.hpp"

#include <sstream>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace shardcheck::omp {
namespace {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Spinning only pays when every rank has a core; beyond that it steals the core of the rank
// being waited for (docs/runtime.md, "Waiting"; measured in docs/benchmarks.md). Yielding
// lasts this long before a waiter goes to sleep.
constexpr int spin_iterations = 2000;
constexpr auto yield_phase = std::chrono::microseconds(200);
// A sleeper wakes at least this often to look at its deadline.
constexpr auto sleep_slice = std::chrono::milliseconds(20);

// The cores this process may run on: its affinity mask (taskset, cgroup cpusets, a batch
// scheduler's binding), which std::thread::hardware_concurrency() ignores: it counts the
// machine's. A world pinned to one core of a 2-core machine is oversubscribed at 2 ranks.
unsigned usable_cores() noexcept {
#if defined(__linux__)
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) {
    const int n = CPU_COUNT(&mask);
    if (n > 0) return static_cast<unsigned>(n);
  }
#endif
  return std::max(1U, std::thread::hardware_concurrency());
}

}  // namespace

std::string WaitSite::describe() const {
  std::ostringstream os;
  os << what;
  if (peer >= 0) {
    os << (what == "send" ? " to" : " from") << " rank " << peer << " (tag " << tag << ')';
  } else {
    os << " (step " << step << ')';
  }
  if (group != nullptr) os << " on group " << format_group(*group);
  return os.str();
}

World::World(int size, std::chrono::milliseconds timeout)
    : size_(size),
      timeout_(timeout),
      oversubscribed_(static_cast<unsigned>(size) > usable_cores()),
      ledgers_(static_cast<std::size_t>(size)),
      status_(static_cast<std::size_t>(size)),
      group_counts_(static_cast<std::size_t>(size)) {}

void World::notify() {
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    // Taking the mutex orders this notify after a sleeper's "register, re-check" step.
    const std::lock_guard lock(mu_);
    cv_.notify_all();
  }
}

void World::wait_change(int world_rank, const std::atomic<std::uint64_t>& word, std::uint64_t seen,
                        const WaitSite& site, bool interruptible) {
  if (word.load(std::memory_order_acquire) != seen) return;
  if (!oversubscribed_) {
    for (int i = 0; i < spin_iterations; ++i) {
      cpu_relax();
      if (word.load(std::memory_order_acquire) != seen) return;
      if (interruptible && aborted_.load(std::memory_order_relaxed)) throw_fatal(world_rank, site);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout_;
  for (unsigned i = 0;; ++i) {
    std::this_thread::yield();
    if (word.load(std::memory_order_acquire) != seen) return;
    if (interruptible && aborted_.load(std::memory_order_relaxed)) throw_fatal(world_rank, site);
    if (i % 16 == 15 && std::chrono::steady_clock::now() - start > yield_phase) break;
  }
  sleep_until_change(world_rank, word, seen, site, deadline, interruptible);
}

void World::sleep_until_change(int world_rank, const std::atomic<std::uint64_t>& word,
                               std::uint64_t seen, const WaitSite& site,
                               std::chrono::steady_clock::time_point deadline, bool interruptible) {
  std::unique_lock lock(mu_);
  auto& me = status_[static_cast<std::size_t>(world_rank)];
  me = {Status::sleeping, &word, seen, &site};
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  struct Unregister {
    World& w;
    RankStatus& me;
    Unregister(World& world, RankStatus& status) : w(world), me(status) {}
    Unregister(const Unregister&) = delete;
    Unregister& operator=(const Unregister&) = delete;
    Unregister(Unregister&&) = delete;
    Unregister& operator=(Unregister&&) = delete;
    ~Unregister() {
      w.sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      me = {};
    }
  } unregister{*this, me};

  check_deadlock_locked();
  while (word.load(std::memory_order_seq_cst) == seen) {
    // Both throws leave with the lock held: the Unregister guard runs before `lock` unlocks.
    if (interruptible) {
      if (fatal_ != Fatal::none) throw_fatal_locked(world_rank, site);
      if (std::chrono::steady_clock::now() >= deadline) time_out_locked(world_rank, site);
    }
    cv_.wait_for(lock, sleep_slice);
  }
}

void World::check_deadlock_locked() {
  if (fatal_ != Fatal::none) return;
  bool any_waiting = false;
  for (const auto& s : status_) {
    if (s.status == Status::running) return;
    if (s.status == Status::sleeping) {
      if (s.word->load(std::memory_order_seq_cst) != s.seen) return;  // about to wake
      any_waiting = true;
    }
  }
  if (!any_waiting) return;
  fatal_ = Fatal::deadlock;
  fatal_message_ =
      "deadlock: every rank that has not returned is waiting, and none can proceed.\n" +
      status_table_locked() +
      "Every member of a group must make the same sequence of collective calls on it: look for "
      "a rank that returned early, skipped a call, called on a different group, or two ranks "
      "that send to each other at once (use ring_shift for exchanges).";
  aborted_.store(true, std::memory_order_seq_cst);
  cv_.notify_all();
}

std::string World::status_table_locked() const {
  std::string s;
  for (int r = 0; r < size_; ++r) {
    const auto& st = status_[static_cast<std::size_t>(r)];
    s += "  rank " + std::to_string(r) + ": ";
    switch (st.status) {
      case Status::running: s += "running (not waiting)"; break;
      case Status::sleeping: s += "waits in " + st.site->describe(); break;
      case Status::finished: s += "returned from its function"; break;
      case Status::failed: s += "threw an exception"; break;
    }
    s += '\n';
  }
  return s;
}

void World::throw_fatal(int world_rank, const WaitSite& site) {
  const std::lock_guard lock(mu_);
  throw_fatal_locked(world_rank, site);
}

void World::throw_fatal_locked(int world_rank, const WaitSite& site) {
  const std::string where =
      "rank " + std::to_string(world_rank) + " stopped waiting in " + site.describe() + ": ";
  switch (fatal_) {
    case Fatal::deadlock: throw DeadlockError(fatal_message_);
    case Fatal::timeout: throw PeerAborted(where + "another rank timed out (see its TimeoutError)");
    case Fatal::peer_failed:
    case Fatal::none: break;
  }
  throw PeerAborted(where + "rank " + std::to_string(failed_rank_) +
                    " failed first (see its error)");
}

void World::time_out_locked(int world_rank, const WaitSite& site) {
  std::string message = "timeout: rank " + std::to_string(world_rank) + " waited more than " +
                        std::to_string(timeout_.count()) + " ms in " + site.describe() + ".\n" +
                        status_table_locked() +
                        "A rank that is still running never reached the call; raise "
                        "RunOptions::timeout (or SHARDCHECK_TIMEOUT_MS) if it is only slow.";
  if (fatal_ == Fatal::none) {
    fatal_ = Fatal::timeout;
    fatal_message_ = message;
    aborted_.store(true, std::memory_order_seq_cst);
    cv_.notify_all();
  }
  throw TimeoutError(message);
}

void World::rank_failed(int world_rank) {
  const std::lock_guard lock(mu_);
  status_[static_cast<std::size_t>(world_rank)] = {Status::failed, nullptr, 0, nullptr};
  if (fatal_ == Fatal::none) {
    fatal_ = Fatal::peer_failed;
    failed_rank_ = world_rank;
  }
  aborted_.store(true, std::memory_order_seq_cst);
  cv_.notify_all();
}

void World::rank_finished(int world_rank) {
  const std::lock_guard lock(mu_);
  status_[static_cast<std::size_t>(world_rank)] = {Status::finished, nullptr, 0, nullptr};
  check_deadlock_locked();
}

std::shared_ptr<GroupState> World::group_state(const std::vector<int>& members, int index) {
  const std::lock_guard lock(groups_mu_);
  auto& slot = groups_[{members, index}];
  if (!slot) slot = std::make_shared<GroupState>(members);
  return slot;
}

}  // namespace shardcheck::omp
