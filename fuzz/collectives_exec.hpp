// Runs a decoded program on the library's ranks and keeps what each rank's buffers held.
//
// Every buffer is allocated on the main thread before run() with exactly the elements the
// call should touch, so AddressSanitizer reports any write past a buffer; receive buffers
// start as a sentinel pattern, so a rank that is never written shows up in the comparison.
#pragma once

#include "collectives_program.hpp"

#include "runtime/launcher.hpp"

#include <chrono>
#include <exception>
#include <optional>
#include <vector>

namespace shardcheck::fuzz {

// One rank's buffers for one action. `a` is the send buffer (or the in-place buffer, or the
// broadcast buffer), `b` the receive buffer. The result lives in a or b at out_offset.
struct RankBuffers {
  std::vector<std::byte> a, b;
  std::vector<std::byte> a_before;  // a as filled, when a is a send buffer that must not change
  bool a_is_send = false;
  bool has_out = false;
  bool out_in_a = false;
  std::size_t out_offset = 0, out_count = 0;  // elements
  // What the communicator said about itself when the action ran.
  int seen_rank = -1, seen_size = -1;
  std::vector<int> seen_members;
  bool executed = false;

  std::span<const std::byte> output(DType t) const;
};

struct Execution {
  std::vector<std::vector<RankBuffers>> bufs;  // [world rank][action index]
  std::optional<RunResult> result;             // when run() returned
  std::exception_ptr failure;                  // what run() threw otherwise
  double seconds = 0;
};

// The sentinel byte receive buffers start with.
inline constexpr std::byte sentinel{0xA5};

Execution execute(const Program& prog, std::chrono::milliseconds timeout);

// What execute() does for one rank, for another launcher (the MPI backend's corpus replay,
// properties/mpi/mpi_equivalence_test.cpp): world rank w's buffers, prepared; and its actions run
// on its world communicator (deviations included: a stop returns, a raise throws InjectedFault).
std::vector<RankBuffers> prepare_rank(const Program& prog, int w);
void run_rank(const Program& prog, Communicator& world, std::vector<RankBuffers>& bufs);

}  // namespace shardcheck::fuzz
