#include "engine/mpi_case_driver.hpp"

#include "engine/rank_bytes.hpp"
#include "runtime/errors.hpp"
#include "runtime/mpi/mpi_launcher.hpp"
#include "runtime/mpi/mpi_world.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <ostream>
#include <streambuf>
#include <thread>

namespace shardcheck::check {

namespace {

// Waits for one nonblocking call, backing off from polling to sleeps of up to 1 ms, so that
// processes waiting for process 0 (which compares, and may take minutes on a large case) give
// the cores to it when mpirun oversubscribes them. No timeout: a process that stopped ends the
// job (mpirun kills the others), and one that left the lockstep is caught by same_case.
void wait_for(MPI_Request& req, const char* call) {
  auto pause = std::chrono::microseconds(0);
  for (;;) {
    int done = 0;
    mpi::check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), call);
    if (done != 0) return;
    if (pause.count() == 0) {
      pause = std::chrono::microseconds(1);
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
}

// Every process's `mine`, by process.
std::vector<std::vector<std::byte>> all_gather(MPI_Comm comm, int processes,
                                               const std::vector<std::byte>& mine) {
  const auto n = static_cast<std::size_t>(processes);
  std::vector<std::uint64_t> sizes(n);
  const std::uint64_t my_size = mine.size();
  MPI_Request req = MPI_REQUEST_NULL;
  mpi::check_mpi(
      MPI_Iallgather(&my_size, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, comm, &req),
      "MPI_Iallgather");
  wait_for(req, "MPI_Iallgather");
  std::vector<int> counts(n);
  std::vector<int> offsets(n);
  std::uint64_t total = 0;
  for (std::size_t p = 0; p < n; ++p) {
    counts[p] = mpi::mpi_count(sizes[p], "rank outputs");
    offsets[p] = mpi::mpi_count(total, "rank outputs");
    total += sizes[p];
  }
  std::vector<std::byte> all(total);
  mpi::check_mpi(MPI_Iallgatherv(mine.data(), mpi::mpi_count(mine.size(), "rank outputs"), MPI_BYTE,
                                 all.data(), counts.data(), offsets.data(), MPI_BYTE, comm, &req),
                 "MPI_Iallgatherv");
  wait_for(req, "MPI_Iallgatherv");
  std::vector<std::vector<std::byte>> out(n);
  for (std::size_t p = 0; p < n; ++p) {
    const auto* first = all.data() + offsets[p];
    out[p].assign(first, first + counts[p]);
  }
  return out;
}

// Discards what is written to it: the output of every process but process 0.
class NullBuffer : public std::streambuf {
 protected:
  int_type overflow(int_type c) override { return traits_type::not_eof(c); }
  std::streamsize xsputn(const char* /*s*/, std::streamsize n) override { return n; }
};

}  // namespace

MpiCaseDriver::MpiCaseDriver() {
  mpi::check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  mpi::check_mpi(MPI_Comm_size(comm_, &processes_), "MPI_Comm_size");
  mpi::check_mpi(MPI_Comm_rank(comm_, &process_), "MPI_Comm_rank");
}

MpiCaseDriver::~MpiCaseDriver() { MPI_Comm_free(&comm_); }

CaseDriver::Gathered MpiCaseDriver::run(
    int world, const std::function<std::vector<std::byte>(Communicator&)>& fn) const {
  std::vector<std::byte> outputs;
  auto result = mpi::run(world, [&](Communicator& comm) { outputs = fn(comm); });
  std::vector<std::byte> ledger;
  if (result.ran) ledger = to_bytes(result.ledger);
  auto all_outputs = all_gather(comm_, processes_, outputs);
  auto all_ledgers = all_gather(comm_, processes_, ledger);
  Gathered g;
  for (int r = 0; r < world; ++r) {
    const auto i = static_cast<std::size_t>(r);
    g.outputs.push_back(std::move(all_outputs[i]));
    g.ledgers.push_back(from_bytes<Ledger>(all_ledgers[i]));
  }
  return g;
}

std::string MpiCaseDriver::agree(const std::string& value) const {
  std::uint64_t size = value.size();
  MPI_Request req = MPI_REQUEST_NULL;
  mpi::check_mpi(MPI_Ibcast(&size, 1, MPI_UINT64_T, 0, comm_, &req), "MPI_Ibcast");
  wait_for(req, "MPI_Ibcast");
  std::string out = process_ == 0 ? value : std::string(size, '\0');
  mpi::check_mpi(
      MPI_Ibcast(out.data(), mpi::mpi_count(size, "an agreed value"), MPI_CHAR, 0, comm_, &req),
      "MPI_Ibcast");
  wait_for(req, "MPI_Ibcast");
  return out;
}

void MpiCaseDriver::abandon(const std::string& why) const {
  std::cerr << "shardcheck: process " << process_ << " of " << processes_ << ": " << why
            << "\nshardcheck: ending the MPI job (MPI_Abort)" << std::endl;
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();  // MPI_Abort does not return
}

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

int run_under_mpirun(int* argc, char*** argv,
                     const std::function<int(std::ostream& out, std::ostream& err)>& command) {
  const mpi::Session session(argc, argv);
  int status = 0;
  {
    const MpiCaseDriver driver;
    set_case_driver(&driver);
    NullBuffer nothing;
    std::ostream quiet(&nothing);
    const bool speaks = driver.checker();
    try {
      status = command(speaks ? std::cout : quiet, speaks ? std::cerr : quiet);
    } catch (const std::exception& e) {
      driver.abandon(std::string("stopped: ") + e.what());
    }
    set_case_driver(nullptr);
  }
  return status;
}

}  // namespace shardcheck::check
