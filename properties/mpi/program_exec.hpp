// Runs a program of the collectives fuzz harness (fuzz/collectives_program.hpp: decode) on a
// Communicator of either backend, and what one rank ends with: every buffer of every call it
// made, in call order, and its ledger. The same function runs under run() (OpenMP) and
// mpi::run(), so the two outcomes compare byte for byte.
//
// Buffers: the send (or broadcast) buffer holds send_count(call, r, p) elements of the
// program's inputs (0x3C past them); the receive buffer recv_count(call, r, p) elements of the
// sentinel 0xA5, so an element no backend writes shows up as a difference as well. Calls are
// never in place here except all_reduce when the program says so.
#pragma once

#include "collectives_program.hpp"

#include "runtime/communicator.hpp"
#include "runtime/ledger.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace shardcheck::mpi_testing {

// What world rank w's buffers held after each of its actions (a then b, concatenated).
using RankBytes = std::vector<std::vector<std::byte>>;

// Executes world rank c.world_rank()'s actions of `prog` (matched programs: no deviation).
RankBytes execute_rank(const fuzz::Program& prog, Communicator& c);

// Every field of every entry, one line each: what "equal ledgers" means here.
std::string ledger_text(const Ledger& l);

}  // namespace shardcheck::mpi_testing
