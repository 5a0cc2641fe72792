// What the command line's tests share: running the program in-process, capturing its output.
#pragma once

#include "engine/suite.hpp"
#include "tools/shardcheck/cli.hpp"

#include <sstream>
#include <string>
#include <vector>

namespace shardcheck::cli::test_support {

struct Result {
  int status;
  std::string out, err;
};

// `shardcheck args...` with the builtin suites registered: its status, stdout and stderr.
inline Result run_cli(std::vector<std::string> args) {
  check::register_builtin_suites();
  args.insert(args.begin(), "shardcheck");
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int status = run(static_cast<int>(argv.size()), argv.data(), out, err);
  return {status, out.str(), err.str()};
}

// The words of s, split at white space.
inline std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

}  // namespace shardcheck::cli::test_support
