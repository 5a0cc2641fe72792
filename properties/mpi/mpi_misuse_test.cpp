// Misuse under mpirun: the cases of the OpenMP backend's misuse tests
// (properties/runtime/misuse_*_tests.cpp), each run with the same rank function on both
// backends, in every process: run() (OpenMP threads) and mpi::run() (one rank per process).
//
//   same: a mismatch, a bad argument or a thrown exception. Every rank of the MPI run must end
//         with the exception class and the very message of the OpenMP run's same rank, and
//         run() and mpi::run() must throw the same RankFailure message.
//   hang: a rank that never arrives (returned early, crossed groups, stuck computing, two
//         sends). The OpenMP backend, which sees every rank's state, often says DeadlockError
//         at once; the MPI backend must end in DeadlockError or TimeoutError too, naming the
//         rank(s) it waited for, every rank of the run failing, within the timeout plus a
//         margin. A hang would make mpirun exceed the ctest TIMEOUT: the test fails.
//
// Usage: mpirun -np 4 mpi_misuse_test. Rank 0 prints one line per case and "N passed, M failed".
// The programs of properties/runtime/misuse_*_tests.cpp, not on this target's include path.
#include "../runtime/misuse_programs.hpp"
#include "runtime/errors.hpp"
#include "runtime/launcher.hpp"
#include "runtime/mpi/mpi_launcher.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

using namespace shardcheck;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = 300ms;       // as properties/runtime/misuse_support.hpp
constexpr auto kSameTimeout = 3000ms;  // MPI runs of the "same" cases (below)
constexpr auto kMargin = 3s;           // recognised misuse, or a timeout, is reported within this

enum class Expect { same, hang };

struct Case {
  const char* name;
  int p;
  Expect expect;
  std::function<void(Communicator&)> fn;
  std::vector<std::string> mpi_mentions = {};  // hang: what the MPI message must name
};

// The rank functions shared with the OpenMP tests are misuse_programs.hpp's (named there);
// the mismatches and the group list only this test has are written here.
std::vector<Case> cases() {
  using namespace misuse_programs;
  return {
      // ---- properties/runtime/misuse_mismatch_tests.cpp ----
      {"different collectives", 3, Expect::same, different_collectives},
      {"different counts at step 1", 3, Expect::same, different_counts_at_step_1},
      {"different roots", 3, Expect::same, different_roots},
      {"different reduce ops", 4, Expect::same, different_reduce_ops},
      {"different element types", 2, Expect::same, different_element_types},
      {"different algorithms", 3, Expect::same, different_algorithms},
      {"a mismatch on a subgroup", 4, Expect::same, mismatch_on_a_subgroup},
      {"send and recv that disagree", 2, Expect::same, send_and_recv_that_disagree},
      {"all_to_all counts that disagree", 3, Expect::same,
       [](Communicator& c) {
         const Counts sc = {1, 1, 1};
         const Counts rc = c.rank() == 2 ? Counts{2, 1, 1} : Counts{1, 1, 1};
         std::vector<float> x(3), y(rc[0] + rc[1] + rc[2]);
         c.all_to_all(std::span<const float>(x), sc, std::span<float>(y), rc);
       }},
      {"ring_shift sizes that disagree", 3, Expect::same,
       [](Communicator& c) {
         std::vector<float> x(c.rank() == 0 ? 3 : 2), y(2);
         c.ring_shift(std::span<const float>(x), std::span<float>(y), 1);
       }},
      // ---- properties/runtime/misuse_argument_tests.cpp (the shared checks, call_checks.hpp) ----
      {"reduce: root recv too small", 2, Expect::same, reduce_root_recv_too_small},
      {"root out of range", 3, Expect::same, root_out_of_range},
      {"all_gather: recv does not hold every piece", 2, Expect::same,
       all_gather_recv_missing_a_piece},
      {"counts of the wrong length", 3, Expect::same, counts_of_the_wrong_length},
      {"avg on integers", 2, Expect::same, avg_on_integers},
      {"a group list naming a rank twice", 3, Expect::same,
       [](Communicator& c) {
         const std::vector<int> bad = {0, 0};
         if (c.rank() == 0) c.group(bad);
       }},
      {"sending to oneself", 1, Expect::same, sending_to_oneself},
      // ---- properties/runtime/misuse_hang_tests.cpp ----
      {"a rank that throws", 3, Expect::same, rank_1_throws},
      {"a rank that returns early",
       3,
       Expect::hang,
       rank_2_returns_early,
       {"rank 2", "returned", "barrier"}},
      {"two ranks sending to each other",
       2,
       Expect::hang,
       two_ranks_sending_to_each_other,
       {"send to rank"}},
      {"crossed groups", 3, Expect::hang, crossed_groups, {"crossed groups", "[1,2]", "[0,1,2]"}},
      {"a rank stuck computing",
       3,
       Expect::hang,
       rank_1_stuck_computing,
       {"300 ms", "barrier", "did not arrive: [1]"}},
      {"a late rank in an abandoned all_reduce",
       2,
       Expect::hang,
       late_rank_in_an_all_reduce,
       {"all_reduce", "[1]"}},
      {"a late receiver", 2, Expect::hang, late_receiver, {"send"}},
  };
}

struct Outcome {
  std::optional<RankFailure> failure;
  Clock::duration elapsed{};
};

template <class Run>
Outcome outcome_of(Run&& run) {
  Outcome o;
  const auto start = Clock::now();
  try {
    run();
  } catch (const RankFailure& e) {
    o.failure = e;
  }
  o.elapsed = Clock::now() - start;
  return o;
}

std::string kind_of(const std::exception_ptr& e) {
  if (holds<UsageError>(e)) return "UsageError";
  if (holds<CollectiveMismatch>(e)) return "CollectiveMismatch";
  if (holds<DeadlockError>(e)) return "DeadlockError";
  if (holds<TimeoutError>(e)) return "TimeoutError";
  if (holds<PeerAborted>(e)) return "PeerAborted";
  return "other";
}

// Empty when the MPI outcome is what the case expects from the OpenMP one.
std::string judge(const Case& k, const Outcome& omp, const Outcome& mpi) {
  if (!omp.failure) return "the OpenMP run did not fail (the case is not misuse)";
  if (!mpi.failure) return "the MPI run returned normally";
  if (mpi.elapsed > kTimeout + kMargin + 1s) return "the MPI run took too long";
  const auto& o = *omp.failure;
  const auto& m = *mpi.failure;
  if (m.all().size() != o.all().size()) {
    return std::to_string(m.all().size()) + " MPI ranks failed, " + std::to_string(o.all().size()) +
           " OpenMP ranks";
  }
  if (k.expect == Expect::same) {
    if (std::string(m.what()) != o.what()) {
      return std::string("different RankFailure:\nOpenMP: ") + o.what() + "\nMPI:    " + m.what();
    }
    for (std::size_t i = 0; i < o.all().size(); ++i) {
      const auto& a = o.all()[i];
      const auto& b = m.all()[i];
      if (a.rank != b.rank || kind_of(a.error) != kind_of(b.error) || a.what != b.what) {
        return "rank " + std::to_string(a.rank) + " differs:\nOpenMP: " + kind_of(a.error) + ": " +
               a.what + "\nMPI:    rank " + std::to_string(b.rank) + " " + kind_of(b.error) + ": " +
               b.what;
      }
    }
    return {};
  }
  const auto cls = kind_of(m.cause());
  if (cls != "DeadlockError" && cls != "TimeoutError") {
    return "the MPI primary failure is " + cls + ": " + m.what();
  }
  const std::string text = m.what();
  for (const auto& part : k.mpi_mentions) {
    if (text.find(part) == std::string::npos) {
      std::string why = "the MPI message lacks \"" + part;
      why += "\": ";
      why += text;
      return why;
    }
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  mpi::Session session(&argc, &argv);
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int passed = 0, failed = 0;
  for (const auto& k : cases()) {
    RunOptions options;
    options.timeout = kTimeout;
    const auto omp = outcome_of([&] { run(k.p, k.fn, options); });
    // Recognised misuse never waits for the timeout; a longer one keeps a loaded machine (a
    // process not scheduled for 300 ms) from turning a mismatch into a TimeoutError.
    const auto timeout = k.expect == Expect::same ? kSameTimeout : kTimeout;
    const auto mpi = outcome_of([&] { mpi::run(k.p, k.fn, timeout); });
    const std::string verdict = judge(k, omp, mpi);
    int bad = verdict.empty() ? 0 : 1;
    if (bad != 0) std::fprintf(stderr, "rank %d: %s: %s\n", me, k.name, verdict.c_str());
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    (any != 0 ? failed : passed) += 1;
    if (me == 0) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(mpi.elapsed).count();
      std::printf("%s  %-45s MPI %5lld ms: %s\n", any != 0 ? "FAIL" : "ok  ", k.name,
                  static_cast<long long>(ms),
                  mpi.failure ? kind_of(mpi.failure->cause()).c_str() : "no error");
      std::fflush(stdout);
    }
  }
  // The launcher's own errors: a world larger than the job, and a malformed timeout variable.
  int procs = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &procs);
  const std::vector<std::pair<const char*, std::function<void()>>> usage = {
      {"a world larger than the job", [&] { mpi::run(procs + 1, [](Communicator&) {}); }},
      {"SHARDCHECK_MPI_TIMEOUT=soon",
       [] {
         setenv("SHARDCHECK_MPI_TIMEOUT", "soon", 1);
         const auto restore = [] { unsetenv("SHARDCHECK_MPI_TIMEOUT"); };
         try {
           mpi::default_timeout();
         } catch (...) {
           restore();
           throw;
         }
         restore();
       }},
  };
  const std::vector<std::string> says = {"start more processes (mpirun -np)",
                                         "not a positive number of seconds"};
  for (std::size_t i = 0; i < usage.size(); ++i) {
    std::string verdict = "no UsageError";
    try {
      usage[i].second();
    } catch (const UsageError& e) {
      const std::string text = e.what();
      verdict = text.find(says[i]) == std::string::npos ? "the message lacks the fix: " + text : "";
    }
    int bad = verdict.empty() ? 0 : 1;
    if (bad != 0) std::fprintf(stderr, "rank %d: %s: %s\n", me, usage[i].first, verdict.c_str());
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    (any != 0 ? failed : passed) += 1;
    if (me == 0) std::printf("%s  %-45s UsageError\n", any != 0 ? "FAIL" : "ok  ", usage[i].first);
  }
  if (me == 0) std::printf("mpi misuse: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
