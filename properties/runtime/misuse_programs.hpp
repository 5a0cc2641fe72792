// The rank functions of the runtime's misuse cases: what every rank of a run does. The OpenMP
// backend's tests (properties/runtime/misuse_*_tests.cpp) check what run() raises for each; the
// MPI backend's test (properties/mpi/mpi_misuse_test.cpp) runs the very same function under run()
// and mpi::run() and compares the two, so it cannot drift from the case the OpenMP test pins.
// The world size and what each must raise are the tests'.
#pragma once

#include "runtime/communicator.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

namespace shardcheck::misuse_programs {

using namespace std::chrono_literals;
using Counts = std::vector<std::size_t>;

// ---- collective mismatches (misuse_mismatch_tests.cpp)

// 3 ranks: rank 2 calls all_gather where the others call all_reduce.
inline void different_collectives(Communicator& c) {
  std::vector<float> x(4), y(12);
  if (c.rank() == 2) c.all_gather(std::span<const float>(x), std::span<float>(y));
  else c.all_reduce(std::span<float>(x), ReduceOp::sum);
}

// 3 ranks: rank 1 reduces 5 elements where the others reduce 4.
inline void different_counts_at_step_1(Communicator& c) {
  c.barrier();  // the mismatch is at step 1
  std::vector<double> x(c.rank() == 1 ? 5 : 4);
  c.all_reduce(std::span<double>(x), ReduceOp::sum);
}

// 3 ranks: rank 2 names root 1, the others root 0.
inline void different_roots(Communicator& c) {
  std::vector<int> x(3);
  c.broadcast(std::span<int>(x), c.rank() == 2 ? 1 : 0);
}

// 4 ranks: rank 3 reduces with max, the others with sum.
inline void different_reduce_ops(Communicator& c) {
  std::vector<float> x(8);
  c.all_reduce(std::span<float>(x), c.rank() == 3 ? ReduceOp::max : ReduceOp::sum);
}

// 2 ranks: rank 0 reduces floats, rank 1 doubles.
inline void different_element_types(Communicator& c) {
  std::vector<float> x(8);
  std::vector<double> y(8);
  if (c.rank() == 0) c.all_reduce(std::span<float>(x), ReduceOp::sum);
  else c.all_reduce(std::span<double>(y), ReduceOp::sum);
}

// 3 ranks: rank 0 asks for the sequential algorithm, the others for the ring.
inline void different_algorithms(Communicator& c) {
  std::vector<float> x(8);
  c.all_reduce(std::span<float>(x), ReduceOp::sum,
               c.rank() == 0 ? Algorithm::sequential : Algorithm::ring);
}

// 4 ranks: on the group [2,0,1] (world rank 3 stays out), group rank 1 calls all_gather where
// the others call all_reduce.
inline void mismatch_on_a_subgroup(Communicator& c) {
  if (c.rank() == 3) return;
  const std::vector<int> ranks = {2, 0, 1};
  auto g = c.group(ranks);
  std::vector<float> x(4), y(12);
  if (g->rank() == 1) g->all_gather(std::span<const float>(x), std::span<float>(y));
  else g->all_reduce(std::span<float>(x), ReduceOp::sum);
}

// 2 ranks: rank 0 sends 4 elements, rank 1 receives 5.
inline void send_and_recv_that_disagree(Communicator& c) {
  std::vector<float> x(4), y(5);
  if (c.rank() == 0) c.send(std::span<const float>(x), 1, 3);
  else c.recv(std::span<float>(y), 0, 3);
}

// ---- bad arguments (misuse_argument_tests.cpp)

// 2 ranks: the root (rank 1) gives a recv of 3 for a send of 4.
inline void reduce_root_recv_too_small(Communicator& c) {
  std::vector<float> x(4), y(c.rank() == 1 ? 3 : 4);
  c.reduce(std::span<const float>(x), std::span<float>(y), ReduceOp::sum, 1);
}

// 3 ranks: broadcast from root 3.
inline void root_out_of_range(Communicator& c) {
  std::vector<float> x(4);
  c.broadcast(std::span<float>(x), 3);
}

// 2 ranks: counts [1, 2], and rank 0's recv holds 2 of the 3 elements.
inline void all_gather_recv_missing_a_piece(Communicator& c) {
  const Counts counts = {1, 2};
  std::vector<float> x(counts[static_cast<std::size_t>(c.rank())]), y(c.rank() == 0 ? 2 : 3);
  c.all_gather(std::span<const float>(x), std::span<float>(y), counts);
}

// 3 ranks: counts of 2 entries.
inline void counts_of_the_wrong_length(Communicator& c) {
  const Counts counts = {1, 1};
  std::vector<float> x(1), y(2);
  c.all_gather(std::span<const float>(x), std::span<float>(y), counts);
}

// 2 ranks: avg on int32.
inline void avg_on_integers(Communicator& c) {
  std::vector<std::int32_t> x(4);
  c.all_reduce(std::span<std::int32_t>(x), ReduceOp::avg);
}

// 1 rank: a send to rank 0 itself.
inline void sending_to_oneself(Communicator& c) {
  std::vector<float> x(1);
  c.send(std::span<const float>(x), 0);
}

// ---- ranks that never arrive (misuse_hang_tests.cpp)

// 3 ranks: rank 2 returns before the barrier.
inline void rank_2_returns_early(Communicator& c) {
  if (c.rank() == 2) return;
  c.barrier();
}

// 3 ranks: rank 1 throws "boom on rank 1" before the barrier.
inline void rank_1_throws(Communicator& c) {
  if (c.rank() == 1) throw std::runtime_error("boom on rank 1");
  c.barrier();
}

// 2 ranks: each sends to the other first.
inline void two_ranks_sending_to_each_other(Communicator& c) {
  std::vector<float> x(4), y(4);
  c.send(std::span<const float>(x), 1 - c.rank());
  c.recv(std::span<float>(y), 1 - c.rank());
}

// 3 ranks: rank 0 waits on the world; rank 1 on [1,2]; rank 2 on the world first, then [1,2].
inline void crossed_groups(Communicator& c) {
  if (c.rank() == 0) {
    c.barrier();
    return;
  }
  const std::vector<int> ranks = {1, 2};
  auto sub = c.group(ranks);
  if (c.rank() == 2) c.barrier();
  sub->barrier();
  if (c.rank() == 1) c.barrier();
}

// How long rank 1 of rank_1_stuck_computing computes: well past the tests' 300 ms timeout.
constexpr auto stuck_for = 1000ms;

// 3 ranks: rank 1 computes for stuck_for before the barrier.
inline void rank_1_stuck_computing(Communicator& c) {
  if (c.rank() == 1) std::this_thread::sleep_for(stuck_for);
  c.barrier();
}

// 2 ranks: rank 1 reaches the all_reduce 900 ms late, after rank 0 timed out.
inline void late_rank_in_an_all_reduce(Communicator& c) {
  if (c.rank() == 1) std::this_thread::sleep_for(900ms);
  std::vector<double> x(4096, 1.0);
  c.all_reduce(std::span<double>(x), ReduceOp::sum);
}

// 2 ranks: rank 1 posts its recv 900 ms late, after rank 0's send timed out.
inline void late_receiver(Communicator& c) {
  std::vector<double> x(4096, 1.0);
  if (c.rank() == 0) {
    c.send(std::span<const double>(x), 1);
  } else {
    std::this_thread::sleep_for(900ms);
    c.recv(std::span<double>(x), 0);
  }
}

}  // namespace shardcheck::misuse_programs
