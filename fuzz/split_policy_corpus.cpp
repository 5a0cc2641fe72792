// Writes the seed corpus of split_policy_fuzz, one named input per target (each a split problem
// in split_policy_input.hpp's layout), and checks it:
//   split_policy_corpus <dir>            writes the seeds (fuzz/corpus/split_policy)
//   split_policy_corpus --check <dir>    fails when a seed no longer decodes to its target
#include "corpus_seeds.hpp"
#include "split_policy_input.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace {

using shardcheck::SplitPolicy;
using shardcheck::fuzz::SplitInput;
using Bytes = std::vector<std::uint8_t>;

struct Target {
  std::string name;
  Bytes bytes;
  SplitInput want;
};

std::vector<Target> targets() {
  constexpr std::uint64_t max = std::numeric_limits<std::size_t>::max();
  const auto ex = [](std::vector<std::size_t> s) {
    return SplitPolicy::explicit_sizes(std::move(s));
  };
  return {
      {"chunk-5-over-4", {0, 4, 0, 5}, {SplitPolicy::chunk(), 5, 4}},
      {"balanced-5-over-4", {1, 4, 0, 5}, {SplitPolicy::balanced(), 5, 4}},
      {"chunk-0-over-3", {0, 3, 0, 0}, {SplitPolicy::chunk(), 0, 3}},
      {"balanced-1000-over-7", {1, 7, 1, 0xe8, 0x03}, {SplitPolicy::balanced(), 1000, 7}},
      {"chunk-one-part", {0, 1, 0, 9}, {SplitPolicy::chunk(), 9, 1}},
      {"chunk-127-parts", {0, 127, 0, 200}, {SplitPolicy::chunk(), 200, 127}},
      {"zero-parts", {0, 0, 0, 5}, {SplitPolicy::chunk(), 5, 0}},
      {"negative-parts", {1, 0xfe, 0, 5}, {SplitPolicy::balanced(), 5, -2}},
      {"explicit-2-1-0", {2, 3, 0, 3, 0x83, 0, 2, 0, 1, 2}, {ex({2, 1, 0}), 3, 3}},
      {"explicit-rest", {2, 2, 0, 7, 0x82, 0, 3, 2}, {ex({3, 4}), 7, 2}},
      {"explicit-wrong-count", {2, 3, 0, 4, 2, 0, 2, 2}, {ex({2, 2}), 4, 3}},
      {"explicit-wrong-sum", {2, 2, 0, 4, 0x82, 0, 1, 0, 1}, {ex({1, 1}), 4, 2}},
      {"regression-chunk-ceil-wraps-at-size-max", {0, 3, 3, 0}, {SplitPolicy::chunk(), max, 3}},
      {"balanced-near-size-max", {1, 5, 3, 1}, {SplitPolicy::balanced(), max - 1, 5}},
      {"chunk-huge-n",
       shardcheck::fuzz::cat({{0, 64, 2}, shardcheck::fuzz::le8(max - 100)}),
       {SplitPolicy::chunk(), max - 100, 64}},
      // Sizes whose sum wraps around size_t to n: SIZE_MAX + 2 = 1.
      {"regression-explicit-sum-wraps-to-n", {2, 2, 0, 1, 0x82, 3, 0, 0, 2}, {ex({max, 2}), 1, 2}},
  };
}

bool same(const SplitInput& a, const SplitInput& b) {
  return a.policy == b.policy && a.n == b.n && a.parts == b.parts;
}

std::string miss(const Target& t, const Bytes& b) {
  const SplitInput got = shardcheck::fuzz::decode_split_input(b);
  if (same(got, t.want)) return "";
  return "decodes to split(" + got.policy.to_string() + ", n=" + std::to_string(got.n) +
         ", parts=" + std::to_string(got.parts) + ")";
}

}  // namespace

int main(int argc, char** argv) {
  const shardcheck::fuzz::TargetCorpus<Target> corpus{
      targets, [](const Target& t) { return t.bytes; }, miss,
      [](const Target& t) {
        return "split(" + t.want.policy.to_string() + ", n=" + std::to_string(t.want.n) +
               ", parts=" + std::to_string(t.want.parts) + ")";
      }};
  return corpus.main(argc, argv);
}
