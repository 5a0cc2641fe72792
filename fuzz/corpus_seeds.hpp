// What the corpus programs share: the generator they draw seeds with, the byte helpers they build
// seeds with, writing a seed file and reading a checked-in one for --check, and their command
// line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
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

// v as 8 bytes, the least significant first.
inline std::vector<std::uint8_t> le8(std::uint64_t v) {
  std::vector<std::uint8_t> b(8);
  for (std::size_t k = 0; k < b.size(); ++k) b[k] = static_cast<std::uint8_t>(v >> (8 * k));
  return b;
}

// The parts one after the other.
inline std::vector<std::uint8_t> cat(std::initializer_list<std::vector<std::uint8_t>> parts) {
  std::vector<std::uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

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
  if (check && argc == 3 && std::string_view(argv[1]) == "--check") return check(argv[2]);
  if (write && argc == 2 && argv[1][0] != '-') return write(argv[1]);
  std::fprintf(stderr,
               "usage: %s <corpus dir>            write the seeds\n"
               "       %s --check <corpus dir>    check that the seeds meet their targets\n",
               argv[0], argv[0]);
  return 2;
}

// miss() of a target of a reader that refuses bad input by throwing E: read() reads the seed and
// says how what it read misses the target ("" when it meets it); a refusal meets the target when
// the target expects one, `error` being the text its message must contain ("" for a target that
// must be read). "" when the seed meets the target, else how it misses.
template <class E, class Read>
std::string refusal_miss(const std::string& error, const Read& read) {
  try {
    return read();
  } catch (const E& e) {
    if (error.empty() || std::string(e.what()).find(error) == std::string::npos) {
      return std::string("is refused: ") + e.what();
    }
  }
  return "";
}

// A corpus of named targets (T has a `name`): bytes(t) is its seed, miss(t, bytes) says how
// bytes fail t ("" when they meet it), label(t) is the one line the writer prints. The writer
// checks every target against its own bytes before writing it, so a wrong target is reported
// at once, not by the next --check.
template <class T>
struct TargetCorpus {
  std::function<std::vector<T>()> targets;
  std::function<std::vector<std::uint8_t>(const T&)> bytes;
  std::function<std::string(const T&, const std::vector<std::uint8_t>&)> miss;
  std::function<std::string(const T&)> label;

  int check(const std::filesystem::path& dir) const {
    const std::vector<T> ts = targets();
    std::vector<std::string> names;
    names.reserve(ts.size());
    for (const T& t : ts) names.push_back(t.name);
    return check_seeds(dir, names, [&](std::size_t i, const std::vector<std::uint8_t>& b) {
      return miss(ts[i], b);
    });
  }

  int write(const std::filesystem::path& dir) const {
    std::filesystem::create_directories(dir);
    int bad_targets = 0;
    for (const T& t : targets()) {
      const std::vector<std::uint8_t> b = bytes(t);
      if (const std::string m = miss(t, b); !m.empty()) {
        std::fprintf(stderr, "target %s is wrong: it %s\n", t.name.c_str(), m.c_str());
        ++bad_targets;
      }
      write_seed(dir / t.name, b);
      std::printf("%-36s %4zu bytes  %s\n", t.name.c_str(), b.size(), label(t).c_str());
    }
    return bad_targets == 0 ? 0 : 1;
  }

  // corpus_main for this corpus.
  int main(int argc, char** argv) const {
    if (argc == 3 && std::string_view(argv[1]) == "--check") return check(argv[2]);
    if (argc == 2 && argv[1][0] != '-') return write(argv[1]);
    return corpus_main(argc, argv, nullptr, nullptr);
  }
};

}  // namespace shardcheck::fuzz
