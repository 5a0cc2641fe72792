// Backend equivalence under mpirun: generated collective programs (the collectives fuzz
// harness's decoder, fuzz/collectives_program.hpp, fed bytes from a seeded generator) run on the
// OpenMP backend (run(), inside every process) and on the MPI backend (mpi::run(), one rank per
// process); every rank's buffers after every call must be the same bytes, and its ledger the
// same entries. Only matched programs (no deviation) of at most as many ranks as processes run
// here; misuse is mpi_misuse_test.cpp's.
//
// Usage: mpirun -np 4 mpi_equivalence_test [programs] [seed]   (defaults 300 and 17)
// Exit status 0 when every program agreed on every rank; rank 0 prints "N passed, M failed".
//
// Corpus mode: mpirun -np 4 mpi_equivalence_test --corpus DIR replays every file of the
// collectives fuzz harness's corpus (fuzz/corpus/collectives/) on both backends, decoded as the
// harness decodes it. A program of more ranks than processes is skipped (and counted). A matched
// program must give the same buffers and ledgers as above. A program with a deviation must end
// under MPI as the harness predicts (fuzz/collectives_outcome.hpp: predict) and as the OpenMP
// backend ends it: success, or a RankFailure whose primary cause has the predicted class, on the
// same primary rank. The one documented difference (docs/mpi.md, "Misuse"): a hang the OpenMP
// backend reports as DeadlockError may end in TimeoutError under MPI. Each run has a 2 s timeout.
// Exit status 0 when every program ended so on every process, 1 otherwise, 2 for an empty or
// missing DIR.
#include "collectives_exec.hpp"
#include "collectives_outcome.hpp"
#include "program_exec.hpp"

#include "runtime/errors.hpp"
#include "runtime/launcher.hpp"
#include "runtime/mpi/mpi_launcher.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

using namespace shardcheck;

namespace {

// One program's verdict on this process: empty when it agreed.
std::string compare_one(const fuzz::Program& prog, int me) {
  const auto p = prog.world;
  std::vector<mpi_testing::RankBytes> omp_bytes(static_cast<std::size_t>(p));
  const auto omp = run(p, [&](Communicator& c) {
    omp_bytes[static_cast<std::size_t>(c.world_rank())] = mpi_testing::execute_rank(prog, c);
  });
  mpi_testing::RankBytes mpi_bytes;
  const auto mpi =
      mpi::run(p, [&](Communicator& c) { mpi_bytes = mpi_testing::execute_rank(prog, c); });
  if (!mpi.ran) return {};
  const auto& want = omp_bytes[static_cast<std::size_t>(me)];
  if (want.size() != mpi_bytes.size()) return "different number of calls";
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i] != mpi_bytes[i]) return "buffers of call " + std::to_string(i) + " differ";
  }
  const auto lw = mpi_testing::ledger_text(omp.ledgers[static_cast<std::size_t>(me)]);
  const auto lm = mpi_testing::ledger_text(mpi.ledger);
  if (lw != lm) return "ledgers differ:\nOpenMP:\n" + lw + "MPI:\n" + lm;
  return {};
}

// How a run ended: "success", or the class of RankFailure's primary cause (named as
// fuzz::name(Expect) names them) and its rank.
struct Ending {
  std::string cls;
  int rank = -1;
};

// fuzz::exception_type, where an exception the MPI backend rebuilt as Error (it keeps the
// classes of errors.hpp only) counts as the fuzz program's InjectedFault by its message.
std::string class_of(const std::exception_ptr& e) {
  const std::string t = fuzz::exception_type(e);
  return t.find("injected by the fuzz program") != std::string::npos ? "InjectedFault" : t;
}

template <class Launch>
Ending ending_of(Launch&& launch) {
  try {
    launch();
    return {"success"};
  } catch (const RankFailure& f) {
    return {class_of(f.cause()), f.rank()};
  } catch (const std::exception& e) {
    return {std::string("not a RankFailure: ") + e.what()};
  }
}

std::string text(const Ending& e) {
  return e.cls + (e.rank >= 0 ? " on rank " + std::to_string(e.rank) : "");
}

// One deviating program's verdict on this process: empty when it ended as predicted on both
// backends alike.
std::string replay_deviation(const fuzz::Program& prog, int me) {
  constexpr std::chrono::milliseconds timeout{2000};
  const auto want = std::string(fuzz::name(fuzz::predict(prog).expect));
  const Ending omp = ending_of([&] {
    const auto ex = fuzz::execute(prog, timeout);
    if (ex.failure) std::rethrow_exception(ex.failure);
  });
  std::vector<fuzz::RankBuffers> bufs;
  if (me < prog.world) bufs = fuzz::prepare_rank(prog, me);
  const Ending mpi = ending_of([&] {
    mpi::run(
        prog.world, [&](Communicator& c) { fuzz::run_rank(prog, c, bufs); }, timeout);
  });
  const bool hang = want == "DeadlockError" && mpi.cls == "TimeoutError";
  if (mpi.cls != want && !hang) {
    return "predicted " + want + "; MPI ended with " + text(mpi) + ", OpenMP with " + text(omp);
  }
  if (omp.cls != want) return "predicted " + want + "; OpenMP ended with " + text(omp);
  if (!hang && mpi.rank != omp.rank) {
    return "MPI ended with " + text(mpi) + ", OpenMP with " + text(omp);
  }
  return {};
}

int replay_corpus(const std::string& dir, int me, int procs) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) files.push_back(f.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    if (me == 0) std::fprintf(stderr, "mpi corpus: no files in '%s'\n", dir.c_str());
    return 2;
  }
  int matched = 0, deviations = 0, skipped = 0, failed = 0;
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                          std::istreambuf_iterator<char>());
    const auto prog = fuzz::decode(bytes);
    if (prog.world > procs) {
      ++skipped;
      continue;
    }
    const bool matched_program = prog.deviation == fuzz::Deviation::none;
    std::string verdict;
    try {
      verdict = matched_program ? compare_one(prog, me) : replay_deviation(prog, me);
    } catch (const std::exception& e) {
      verdict = std::string("threw: ") + e.what();
    }
    const int bad = verdict.empty() ? 0 : 1;
    if (bad != 0) {
      std::fprintf(stderr, "rank %d: %s: %s\n%s\n", me, path.filename().c_str(), verdict.c_str(),
                   fuzz::describe(prog).c_str());
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any != 0) {
      ++failed;
    } else {
      ++(matched_program ? matched : deviations);
    }
  }
  if (me == 0) {
    std::printf(
        "mpi corpus: %zu files of %s on %d processes: %d matched programs agreed, %d deviations "
        "ended as predicted on both backends, %d skipped (more ranks than processes), %d failed\n",
        files.size(), dir.c_str(), procs, matched, deviations, skipped, failed);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  mpi::Session session(&argc, &argv);
  int me = 0, procs = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &procs);
  if (argc > 2 && std::string(argv[1]) == "--corpus") return replay_corpus(argv[2], me, procs);
  const int programs = argc > 1 ? std::atoi(argv[1]) : 300;
  const unsigned long long seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 17;
  // Every process draws the same bytes: the same programs in the same order.
  std::mt19937_64 gen(seed);
  int passed = 0, failed = 0, tried = 0;
  while (tried < programs) {
    std::vector<std::uint8_t> bytes(96 + gen() % 160);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(gen());
    bytes[0] = static_cast<std::uint8_t>(bytes[0] % procs);  // P - 1: at most the processes
    const auto prog = fuzz::decode(bytes);
    if (prog.deviation != fuzz::Deviation::none || prog.world > procs) continue;
    ++tried;
    std::string verdict;
    try {
      verdict = compare_one(prog, me);
    } catch (const std::exception& e) {
      verdict = std::string("threw: ") + e.what();
    }
    int bad = verdict.empty() ? 0 : 1;
    if (bad != 0) {
      std::fprintf(stderr, "rank %d: program %d (seed %llu) disagrees: %s\n%s\n", me, tried - 1,
                   seed, verdict.c_str(), fuzz::describe(prog).c_str());
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    (any != 0 ? failed : passed) += 1;
  }
  if (me == 0) {
    std::printf("mpi equivalence: %d programs on %d processes, seed %llu\n%d passed, %d failed\n",
                programs, procs, seed, passed, failed);
  }
  return failed == 0 ? 0 : 1;
}
