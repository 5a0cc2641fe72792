// The exceptions of the runtime. Every message names the rank (where there is one), the group,
// the shapes or calls involved, and what to do about it. Tests pin the identifying parts.
//
//   Error               base of everything shardcheck throws
//   UsageError          a call's own arguments are wrong (sizes, root, counts that do not tile)
//   CollectiveMismatch  the ranks of a group called different things at the same step
//   DeadlockError       no rank can make progress (a rank returned early, groups crossed, ...)
//   TimeoutError        a rank waited longer than RunOptions::timeout
//   PeerAborted         this rank stopped waiting because another rank failed first
//   RankFailure         what run() throws: the first rank's primary failure, with its rank
#pragma once

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardcheck {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class UsageError : public Error {
 public:
  using Error::Error;
};

class CollectiveMismatch : public Error {
 public:
  using Error::Error;
};

class DeadlockError : public Error {
 public:
  using Error::Error;
};

class TimeoutError : public Error {
 public:
  using Error::Error;
};

class PeerAborted : public Error {
 public:
  using Error::Error;
};

// One rank's exception as run() collected it.
struct RankError {
  int rank;
  std::exception_ptr error;
  std::string what;  // error's what(), or "unknown exception"
};

// Thrown by run() after every rank has stopped. rank() and cause() are the primary failure: the
// lowest rank whose exception is not PeerAborted (a rank that only stopped because another one
// failed). all() holds every rank's exception, secondary ones included.
class RankFailure : public Error {
 public:
  RankFailure(const std::string& message, int rank, std::exception_ptr cause,
              std::vector<RankError> all)
      : Error(message), rank_(rank), cause_(std::move(cause)), all_(std::move(all)) {}

  int rank() const noexcept { return rank_; }
  const std::exception_ptr& cause() const noexcept { return cause_; }
  const std::vector<RankError>& all() const noexcept { return all_; }

  // Rethrows the primary cause with its own type (for `catch (const CollectiveMismatch&)`).
  [[noreturn]] void rethrow_cause() const { std::rethrow_exception(cause_); }

 private:
  int rank_;
  std::exception_ptr cause_;
  std::vector<RankError> all_;
};

// A captured exception's what(), or "unknown exception (...)" for one not derived from
// std::exception: how launchers print a rank's failure. @pre e is not null.
std::string describe_exception(const std::exception_ptr& e);

// Throws the RankFailure a launcher reports after every rank stopped: errors[r] is rank r's
// exception (null when it returned normally). The primary failure is the lowest rank whose
// exception is not PeerAborted; the message names it and the ranks that only stopped because of
// it. Shared by the OpenMP launcher (launcher.cpp) and the MPI one (mpi/mpi_launcher.cpp).
// @pre some errors[r] is not null.
[[noreturn]] void throw_rank_failure(const std::vector<std::exception_ptr>& errors);

// Whether the captured exception `e` (a RankError's error, RankFailure::cause()) is an E or
// derives from it. @pre e is not null.
template <class E>
bool holds(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace shardcheck
