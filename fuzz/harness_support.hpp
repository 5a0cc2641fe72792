// What the harnesses share: reporting a violation, printing a value, and default libFuzzer flags.
//
// add_default_flags: what a harness's LLVMFuzzerInitialize may do before libFuzzer reads its
// command line (fuzz/README.md, "Speed"): libFuzzer calls LLVMFuzzerInitialize(&argc, &argv) first
// and parses the flags afterwards, in order, a later flag overriding an earlier one. So flags
// inserted right after argv[0] are defaults that any flag given on the command line (by
// scripts/fuzz, the nightly campaign or a person) still overrides.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace shardcheck::fuzz {

// Prints "==== shardcheck <harness> fuzz: property violated ====", the problem (its listing,
// ending in a newline) and the violation, then aborts, so libFuzzer keeps the input.
[[noreturn]] inline void report_violation(const char* harness, const std::string& problem,
                                          const std::string& what) {
  std::fprintf(stderr, "\n==== shardcheck %s fuzz: property violated ====\n%sviolation: %s\n",
               harness, problem.c_str(), what.c_str());
  std::fflush(stderr);
  std::abort();
}

// A value as the violations print it: "%.17g (%a)".
inline std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g (%a)", v, v);
  return buf;
}

// Inserts `flags` after argv[0]. Skipped when the program is not driven by libFuzzer's own
// main: AFL++'s driver (afl-fuzz sets __AFL_SHM_ID) reads its arguments differently.
// The new argv lives until exit (libFuzzer keeps pointers into it).
inline void add_default_flags(int* argc, char*** argv, std::initializer_list<const char*> flags) {
  if (argc == nullptr || argv == nullptr || *argc < 1 || std::getenv("__AFL_SHM_ID") != nullptr)
    return;
  static std::vector<char*> args;
  args.assign(*argv, *argv + *argc);
  // Keep an argv[] libFuzzer's child processes (-fork, -jobs) get again: they call this too, and
  // a repeated default is harmless (the later copy or the user's flag wins).
  args.insert(args.begin() + 1, flags.size(), nullptr);
  std::size_t i = 1;
  for (const char* f : flags) args[i++] = const_cast<char*>(f);  // libFuzzer never writes argv
  args.push_back(nullptr);
  *argc = static_cast<int>(args.size()) - 1;
  *argv = args.data();
}

}  // namespace shardcheck::fuzz
