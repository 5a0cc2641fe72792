// libFuzzer harness for the rank runtime's collectives.
//
// Each input decodes (collectives_program.hpp) into a world of 1..8 ranks, up to three nested
// or overlapping groups, and up to eight collective or point-to-point calls with raw-bit
// element values; half of the inputs carry one deviation (a rank calls something else,
// returns early, throws, passes bad arguments, or uses another group). The harness predicts
// from the program alone what run() must do (collectives_outcome.hpp) and checks it:
//   matched programs  run() returns; every rank's results equal the sequential model bitwise,
//                     send buffers are untouched, ledgers match the documented formulas;
//   deviations        run() throws RankFailure whose primary cause is the predicted type
//                     (CollectiveMismatch, DeadlockError, UsageError, or the injected
//                     exception) on the predicted ranks, within the timeout (no hang);
//                     a mismatch is raised on every rank of the disagreeing step and its
//                     message names the step.
// Any violation prints the program, the prediction and what happened, then aborts, so
// libFuzzer saves the input. SHARDCHECK_FUZZ_VERBOSE=1 prints every program as it runs.
#include "collectives_check.hpp"
#include "collectives_exec.hpp"
#include "collectives_outcome.hpp"
#include "collectives_program.hpp"

#include "harness_support.hpp"
#include "runtime/errors.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace shardcheck::fuzz {
namespace {

// Far above a correct run (milliseconds) and far below libFuzzer's own -timeout: a run that
// reaches it is a hang the runtime failed to diagnose as a deadlock.
constexpr std::chrono::milliseconds run_timeout{2000};

bool verbose() {
  static const bool v = [] {
    const char* e = std::getenv("SHARDCHECK_FUZZ_VERBOSE");
    return e != nullptr && *e != '\0' && *e != '0';
  }();
  return v;
}

[[noreturn]] void violation(const Program& prog, const Prediction& pred, const std::string& what) {
  std::fprintf(stderr,
               "\n==== shardcheck collectives fuzz: property violated ====\n%s"
               "predicted: %s%s%s\n"
               "violation: %s\n",
               describe(prog).c_str(), std::string(name(pred.expect)).c_str(),
               pred.why.empty() ? "" : " -- ", pred.why.c_str(), what.c_str());
  std::fflush(stderr);
  std::abort();
}

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void check_failure(const Program& prog, const Prediction& pred, const RankFailure& f) {
  const std::string expected(name(pred.expect));
  const std::string cause = exception_type(f.cause());
  if (cause != expected) {
    violation(prog, pred,
              "run() failed with " + cause + " on rank " + std::to_string(f.rank()) +
                  ", expected " + expected + ":\n" + f.what());
  }
  if (!contains(pred.ranks, f.rank())) {
    violation(prog, pred,
              "the primary failure is on world rank " + std::to_string(f.rank()) +
                  ", not one of the predicted ranks:\n" + f.what());
  }
  // Every other rank either stopped because of the primary failure, or failed the same way.
  for (const RankError& e : f.all()) {
    const std::string t = exception_type(e.error);
    if (t != expected && t != "PeerAborted") {
      violation(prog, pred,
                // NOLINTNEXTLINE(performance-inefficient-string-concatenation): once, then abort
                "world rank " + std::to_string(e.rank) + " failed with " + t + " besides the " +
                    expected + " on rank " + std::to_string(f.rank()) + ": " + e.what);
    }
  }
  if (pred.expect == Expect::mismatch) {
    // Every rank of the disagreeing step is told, and the message names the step.
    for (int w : pred.ranks) {
      bool told = false;
      for (const RankError& e : f.all()) told |= e.rank == w && exception_type(e.error) == expected;
      if (!told) {
        violation(prog, pred,
                  "world rank " + std::to_string(w) +
                      " took part in the disagreeing step but got no CollectiveMismatch:\n" +
                      f.what());
      }
    }
    // A collective's step, or a point-to-point message's sequence number on its link.
    const bool p2p = pred.why.rfind("message", 0) == 0;
    const char* word = p2p ? "message" : "step";
    if (std::string(f.what()).find(word) == std::string::npos) {
      violation(prog, pred,
                std::string("the mismatch message does not name the ") + word + ":\n" + f.what());
    }
  }
}

}  // namespace
}  // namespace shardcheck::fuzz

// Speed (fuzz/README.md, "Speed"; measured there: about 4x together):
//  - libomp's idle threads spin for KMP_BLOCKTIME (200 ms) after every parallel region, taking
//    the cores the next input's ranks need; with 0 they sleep at once. kmp_set_blocktime sets it
//    for the teams this thread forks (every run() forks from libFuzzer's thread).
//  - libFuzzer's entropic scheduler updates a frequency per feature per execution, and an input
//    here touches some 25,000 features (eight rank threads through the whole runtime): that
//    bookkeeping took half the time, so -entropic=0 is this harness's default (a -entropic flag
//    on the command line overrides it).
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  shardcheck::fuzz::add_default_flags(argc, argv, {"-entropic=0"});
  kmp_set_blocktime(0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardcheck;
  using namespace shardcheck::fuzz;
  const Program prog = decode({data, size});
  const Prediction pred = predict(prog);
  if (verbose()) {
    std::fprintf(stderr, "---- program\n%spredicted: %s %s\n", describe(prog).c_str(),
                 std::string(name(pred.expect)).c_str(), pred.why.c_str());
  }
  const Execution ex = execute(prog, run_timeout);
  if (verbose()) std::fprintf(stderr, "run() took %.3f ms\n", ex.seconds * 1e3);

  if (ex.failure) {
    try {
      std::rethrow_exception(ex.failure);
    } catch (const RankFailure& f) {
      if (pred.expect == Expect::success) {
        violation(prog, pred,
                  std::string("run() threw although the program is matched:\n") + f.what());
      }
      check_failure(prog, pred, f);
    } catch (...) {
      violation(prog, pred,
                "run() threw " + exception_type(ex.failure) + " instead of RankFailure");
    }
    return 0;
  }
  if (pred.expect != Expect::success) {
    violation(prog, pred,
              "run() returned normally; expected RankFailure caused by " +
                  std::string(name(pred.expect)));
  }
  if (const std::string e = check_outputs(prog, ex); !e.empty()) violation(prog, pred, e);
  if (const std::string e = check_ledgers(prog, ex); !e.empty()) violation(prog, pred, e);
  return 0;
}
