// Backend equivalence under mpirun: generated collective programs (the collectives fuzz
// harness's decoder, fuzz/collectives_program.hpp, fed bytes from a seeded generator) run on the
// OpenMP backend (run(), inside every process) and on the MPI backend (mpi::run(), one rank per
// process); every rank's buffers after every call must be the same bytes, and its ledger the
// same entries. Only matched programs (no deviation) of at most as many ranks as processes run
// here; misuse is mpi_misuse_test.cpp's.
//
// Usage: mpirun -np 4 mpi_equivalence_test [programs] [seed]   (defaults 300 and 17)
// Exit status 0 when every program agreed on every rank; rank 0 prints "N passed, M failed".
#include "program_exec.hpp"

#include "runtime/launcher.hpp"
#include "runtime/mpi/mpi_launcher.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
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

}  // namespace

int main(int argc, char** argv) {
  mpi::Session session(&argc, &argv);
  int me = 0, procs = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &procs);
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
