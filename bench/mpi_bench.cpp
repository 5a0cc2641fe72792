// The MPI backend beside the OpenMP backend and beside Open MPI's own calls, in one run
// (docs/mpi.md, "Benchmarks"): float32 sum all_reduce (ring) bus bandwidth at three sizes, and
// barrier latency, for p = the number of processes.
//
//   mpi backend  Communicator::all_reduce / barrier of mpi::run() (lib/runtime/mpi/)
//   MPI_*        MPI_Allreduce / MPI_Barrier on MPI_COMM_WORLD (Open MPI's own algorithm and
//                reduction order)
//   omp backend  run() with p threads in process 0 alone (the others wait, sleeping, on an
//                MPI_Ibarrier polled every millisecond, so they do not take its cores)
//
// t = the slowest rank's seconds per call over `reps` calls after 2 warm-up calls; busbw =
// wire::bus_bytes(all_reduce, p, S) / t (nccl-tests' bus bandwidth, wire_bytes.hpp).
//
// Usage: mpirun -np 4 mpi_bench [reps]   (default 20). Not a ctest: figures, not checks.
#include "runtime/launcher.hpp"
#include "runtime/mpi/mpi_launcher.hpp"
#include "runtime/wire_bytes.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <span>
#include <thread>
#include <vector>

using namespace shardcheck;

namespace {

using Clock = std::chrono::steady_clock;

// Seconds per call of `call`, timed on this rank after a barrier `sync`.
double per_call(int reps, const std::function<void()>& sync, const std::function<void()>& call) {
  call();
  call();
  sync();
  const auto start = Clock::now();
  for (int i = 0; i < reps; ++i) call();
  return std::chrono::duration<double>(Clock::now() - start).count() / reps;
}

// The slowest process's value (every process gets it).
double slowest(double t) {
  double m = 0;
  MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

// Waits for every process without busy polling (Open MPI's blocking calls spin).
void sleepy_barrier() {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  int done = 0;
  while (done == 0) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// The OpenMP backend's seconds per call, measured in process 0 and sent to all.
double omp_time(int p, int reps, bool barrier_only, std::size_t n, int me) {
  double t = 0;
  if (me == 0) {
    std::vector<double> times(static_cast<std::size_t>(p));
    run(p, [&](Communicator& c) {
      std::vector<float> x(n, 1.0f);
      times[static_cast<std::size_t>(c.rank())] = per_call(
          reps, [&] { c.barrier(); },
          [&] {
            if (barrier_only) c.barrier();
            else c.all_reduce(std::span<float>(x), ReduceOp::sum);
          });
    });
    for (const double v : times) t = std::max(t, v);
  }
  sleepy_barrier();
  MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return t;
}

double backend_time(int p, int reps, bool barrier_only, std::size_t n) {
  double t = 0;
  mpi::run(p, [&](Communicator& c) {
    std::vector<float> x(n, 1.0f);
    t = per_call(
        reps, [&] { c.barrier(); },
        [&] {
          if (barrier_only) c.barrier();
          else c.all_reduce(std::span<float>(x), ReduceOp::sum);
        });
  });
  return slowest(t);
}

double raw_time(int reps, bool barrier_only, std::size_t n) {
  std::vector<float> x(n, 1.0f), y(n);
  const double t = per_call(
      reps, [] { MPI_Barrier(MPI_COMM_WORLD); },
      [&] {
        if (barrier_only) {
          MPI_Barrier(MPI_COMM_WORLD);
        } else {
          MPI_Allreduce(x.data(), y.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD);
        }
      });
  return slowest(t);
}

}  // namespace

int main(int argc, char** argv) {
  mpi::Session session(&argc, &argv);
  int me = 0, p = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  if (me == 0) {
    std::printf("p=%d, %d calls per figure; busbw in GB/s, barrier in us\n", p, reps);
    std::printf("%-22s %12s %12s %12s %10s %10s\n", "call", "mpi backend", "MPI_*", "omp backend",
                "mpi/MPI_*", "mpi/omp");
  }
  for (const std::size_t bytes :
       {std::size_t{64} << 10, std::size_t{1} << 20, std::size_t{8} << 20}) {
    const std::size_t n = bytes / sizeof(float);
    const double bus = wire::bus_bytes(Collective::all_reduce, p, static_cast<double>(bytes));
    const double a = bus / backend_time(p, reps, false, n) / 1e9;
    const double b = bus / raw_time(reps, false, n) / 1e9;
    const double c = bus / omp_time(p, reps, false, n, me) / 1e9;
    if (me == 0) {
      std::printf("all_reduce %7zu KiB   %12.3f %12.3f %12.3f %10.2f %10.2f\n", bytes >> 10, a, b,
                  c, a / b, a / c);
    }
  }
  const double a = backend_time(p, reps * 10, true, 0) * 1e6;
  const double b = raw_time(reps * 10, true, 0) * 1e6;
  const double c = omp_time(p, reps * 10, true, 0, me) * 1e6;
  if (me == 0) {
    std::printf("%-22s %12.1f %12.1f %12.1f %10.2f %10.2f\n", "barrier", a, b, c, a / b, a / c);
  }
  return 0;
}
