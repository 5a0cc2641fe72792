// What the corpus programs share: the generator they draw seeds with, writing a seed file and
// reading a checked-in one for --check, and their command line.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardcheck::fuzz {

// splitmix64: the corpus programs' only source of randomness, so the same seeds come out on
// every machine.
struct SplitMix64 {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
};

// The bytes of the seed file f, or nothing (and "missing seed <f>" on stderr) when it is absent.
inline std::optional<std::vector<std::uint8_t>> read_seed(const std::filesystem::path& f) {
  if (!std::filesystem::exists(f)) {
    std::fprintf(stderr, "missing seed %s\n", f.c_str());
    return std::nullopt;
  }
  std::ifstream in(f, std::ios::binary);
  return std::vector<std::uint8_t>{std::istreambuf_iterator<char>(in),
                                   std::istreambuf_iterator<char>()};
}

// Writes `bytes` as the seed file f (replacing it).
inline void write_seed(const std::filesystem::path& f, const std::vector<std::uint8_t>& bytes) {
  std::ofstream(f, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// A --check loop: reads the seed dir/names[i] for every i and asks miss(i, bytes) how it fails
// its target ("" when it meets it); prints each failure and the count. 0 when every seed is
// present and meets its target, else 1.
inline int check_seeds(
    const std::filesystem::path& dir, const std::vector<std::string>& names,
    const std::function<std::string(std::size_t, const std::vector<std::uint8_t>&)>& miss) {
  int bad = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto bytes = read_seed(dir / names[i]);
    const std::string m = bytes ? miss(i, *bytes) : "is missing";
    if (!m.empty()) {
      std::fprintf(stderr, "seed %s no longer meets its target: it %s\n", names[i].c_str(),
                   m.c_str());
      ++bad;
    }
  }
  std::printf("%zu seeds checked, %d bad\n", names.size(), bad);
  return bad == 0 ? 0 : 1;
}

// A corpus program's main: `<program> <dir>` returns write(dir) (write the seeds into dir),
// `<program> --check <dir>` returns check(dir) (0 when every checked-in seed still meets its
// target); anything else prints the usage on stderr and returns 2.
inline int corpus_main(int argc, char** argv, int (*write)(const std::filesystem::path&),
                       int (*check)(const std::filesystem::path&)) {
  if (argc == 3 && std::string_view(argv[1]) == "--check") return check(argv[2]);
  if (argc == 2 && argv[1][0] != '-') return write(argv[1]);
  std::fprintf(stderr,
               "usage: %s <corpus dir>            write the seeds\n"
               "       %s --check <corpus dir>    check that the seeds meet their targets\n",
               argv[0], argv[0]);
  return 2;
}

}  // namespace shardcheck::fuzz
