// The cases of table-driven usage-error tests, shared by the ops' unit tests
// (ops_test_util.hpp runs them) and the runtime's misuse tests: a call expected to throw
// UsageError and the parts its message must hold, or a function on p ranks one of which throws.
#pragma once

#include "runtime/communicator.hpp"

#include <functional>
#include <string>
#include <vector>

namespace shardcheck::test {

// A call expected to throw UsageError and the parts its message must hold ...
struct UsageCase {
  const char* name;
  std::function<void()> call;
  std::vector<std::string> parts;
};

// ... and a function on p ranks, one of which (`rank`, the run's primary failure) throws it.
// Owned strings: an initializer_list member would dangle once the case is copied.
struct RankUsageCase {
  const char* name;
  int p;
  std::function<void(Communicator&)> call;
  int rank;
  std::vector<std::string> parts;
};

}  // namespace shardcheck::test
