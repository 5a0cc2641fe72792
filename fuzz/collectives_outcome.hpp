// What run() must do with a decoded program, predicted from the program alone.
//
// Why a simulation rather than a table per deviation: a rank that returns early, or makes a
// call on another of its groups, shifts every later call it makes, and whether that ends in a
// mismatch, a deadlock or (early return with nothing left to do) success depends on the rest
// of the program. The simulation plays the contract of communicator.hpp on abstract ranks:
//   - the k-th collective a rank makes on a group meets the k-th collective of every other
//     member there; it completes when all members have arrived and agree, and is a
//     CollectiveMismatch when all have arrived and disagree;
//   - the k-th send from s to d on a group meets the k-th recv from s on d there (rendezvous:
//     send returns once received); disagreeing dtype, count or tag is a CollectiveMismatch;
//   - when no rank can move and some rank has not returned, it is a DeadlockError.
// Posts only ever accumulate, so the outcome does not depend on the order the simulation
// visits ranks (as the real run must not depend on thread timing). A throw (Deviation::throws,
// usage_local, usage_all, usage_group) stops the run with that exception whatever else happens.
#pragma once

#include "collectives_program.hpp"

#include <exception>
#include <string>
#include <vector>

namespace shardcheck::fuzz {

enum class Expect : std::uint8_t { success, mismatch, deadlock, usage, injected };
std::string_view name(Expect e) noexcept;

struct Prediction {
  Expect expect = Expect::success;
  // The world ranks that must hold the primary exception's type: for a mismatch, the
  // participants of the first disagreeing step; for usage/injected the throwing ranks.
  std::vector<int> ranks;
  std::string why;  // which step disagrees, or who waits on what
};

Prediction predict(const Program& prog);

// The exception type of an exception_ptr, as the prediction names them (name(Expect)):
// "CollectiveMismatch", "DeadlockError", "UsageError", "InjectedFault", and also "TimeoutError",
// "PeerAborted", "RankFailure", "std::exception: <what>" or "unknown exception".
std::string exception_type(const std::exception_ptr& e);

}  // namespace shardcheck::fuzz
