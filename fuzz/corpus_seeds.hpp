// What the corpus programs share: the generator they draw seeds with, and reading a checked-in
// seed for --check.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
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

}  // namespace shardcheck::fuzz
