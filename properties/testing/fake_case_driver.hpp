// A case driver (engine/case_driver.hpp) for tests without mpirun: this process plays process
// `me` of `procs`. run() runs the ranks on the OpenMP backend and passes every rank's outputs and
// ledger through rank_bytes.hpp's bytes, as the MPI driver does; agree() returns what the checker
// would send, checker_says(value) (default: the value itself, as when every process agrees);
// abandon() records the reason and throws Abandoned (the MPI driver ends the job instead).
// With fail_runs, run() throws instead, as if this process alone failed.
#pragma once

#include "engine/case_driver.hpp"
#include "engine/rank_bytes.hpp"
#include "runtime/errors.hpp"
#include "runtime/launcher.hpp"

#include <functional>
#include <string>
#include <vector>

namespace shardcheck::check::testing {

struct Abandoned {
  std::string why;
};

class FakeCaseDriver final : public CaseDriver {
 public:
  FakeCaseDriver(int procs, int me) : procs_(procs), me_(me) {}
  int processes() const override { return procs_; }
  int process() const override { return me_; }
  Gathered run(int world,
               const std::function<std::vector<std::byte>(Communicator&)>& fn) const override {
    if (fail_runs) throw Error("planted run failure");
    Gathered g;
    g.outputs.resize(static_cast<std::size_t>(world));
    auto r = shardcheck::run(world, [&](Communicator& comm) {
      g.outputs[static_cast<std::size_t>(comm.rank())] = fn(comm);
    });
    for (auto& l : r.ledgers) g.ledgers.push_back(from_bytes<Ledger>(to_bytes(l)));
    return g;
  }
  std::string agree(const std::string& value) const override { return checker_says(value); }
  [[noreturn]] void abandon(const std::string& why) const override {
    abandoned.push_back(why);
    throw Abandoned{why};
  }

  std::function<std::string(const std::string&)> checker_says = [](const std::string& v) {
    return v;
  };
  mutable std::vector<std::string> abandoned;
  bool fail_runs = false;  // run() throws Error("planted run failure")

 private:
  int procs_;
  int me_;
};

// Sets a driver for the scope of a test.
class ScopedCaseDriver {
 public:
  explicit ScopedCaseDriver(const CaseDriver& d) { set_case_driver(&d); }
  ~ScopedCaseDriver() { set_case_driver(nullptr); }
  ScopedCaseDriver(const ScopedCaseDriver&) = delete;
  ScopedCaseDriver& operator=(const ScopedCaseDriver&) = delete;
  ScopedCaseDriver(ScopedCaseDriver&&) = delete;
  ScopedCaseDriver& operator=(ScopedCaseDriver&&) = delete;
};

}  // namespace shardcheck::check::testing
