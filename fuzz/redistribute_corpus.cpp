// Writes the seed corpus of redistribute_fuzz (one named input per transition and mesh feature,
// in redistribute_input.hpp's layout) and checks it:
//   redistribute_corpus <dir>            writes the seeds (fuzz/corpus/redistribute)
//   redistribute_corpus --check <dir>    fails when a seed no longer decodes to its target
#include "corpus_seeds.hpp"
#include "redistribute_input.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace {

using Bytes = std::vector<std::uint8_t>;

struct Target {
  std::string name;
  Bytes bytes;
  std::string want;  // the decoded problem, as describe() prints it
};

// Placement bytes (placement_of): shard chunk of dim d, shard balanced, R, P(sum), P(max).
std::uint8_t S(int d) { return static_cast<std::uint8_t>(8 * d); }
std::uint8_t Sb(int d) { return static_cast<std::uint8_t>(8 * d + 2); }
constexpr std::uint8_t R = 4, Psum = 6, Pmax = 7;

// mesh sizes (1 or 2 of them), tensor dims (1 or 2), then (from, to) per mesh dimension, then
// value bytes.
Bytes problem(std::vector<int> mesh, std::vector<int> dims, Bytes placements) {
  Bytes b{static_cast<std::uint8_t>(mesh.size() - 1),
          static_cast<std::uint8_t>(mesh[0] - 1),
          static_cast<std::uint8_t>(mesh.size() > 1 ? mesh[1] - 1 : 0),
          static_cast<std::uint8_t>(dims.size() - 1),
          static_cast<std::uint8_t>(dims[0]),
          static_cast<std::uint8_t>(dims.size() > 1 ? dims[1] : 0)};
  b.insert(b.end(), placements.begin(), placements.end());
  for (int k = 0; k < 64; ++k) b.push_back(static_cast<std::uint8_t>(k * 37 + 11));
  return b;
}

std::vector<Target> targets() {
  return {
      {"s0-to-r-uneven", problem({3}, {5, 2}, {S(0), R}),
       "mesh (a=3), global [5, 2], [S(0)] -> [R]\n"},
      {"r-to-s1", problem({2}, {3, 5}, {R, S(1)}), "mesh (a=2), global [3, 5], [R] -> [S(1)]\n"},
      {"psum-to-r", problem({3}, {4}, {Psum, R}), "mesh (a=3), global [4], [P(sum)] -> [R]\n"},
      {"psum-to-s0-reduce-scatter", problem({4}, {6}, {Psum, Sb(0)}),
       "mesh (a=4), global [6], [P(sum)] -> [S(0)[balanced]]\n"},
      {"pmax-to-r", problem({2}, {3}, {Pmax, R}), "mesh (a=2), global [3], [P(max)] -> [R]\n"},
      {"r-to-psum-keep-on-first", problem({3}, {2}, {R, Psum}),
       "mesh (a=3), global [2], [R] -> [P(sum)]\n"},
      {"s0-to-s1-all-to-all", problem({2}, {3, 5}, {S(0), S(1)}),
       "mesh (a=2), global [3, 5], [S(0)] -> [S(1)]\n"},
      {"empty-dimension", problem({3}, {0, 4}, {S(0), R}),
       "mesh (a=3), global [0, 4], [S(0)] -> [R]\n"},
      {"mesh-2x2-nested-shards", problem({2, 2}, {5, 3}, {S(0), R, S(0), S(1)}),
       "mesh (a=2, b=2), global [5, 3], [S(0), S(0)] -> [R, S(1)]\n"},
      {"mesh-2x3-partial-and-shard", problem({2, 3}, {4, 4}, {Psum, R, S(1), S(1)}),
       "mesh (a=2, b=3), global [4, 4], [P(sum), S(1)] -> [R, S(1)]\n"},
      {"mesh-4x2-world-8", problem({4, 2}, {6, 2}, {S(0), R, R, S(1)}),
       "mesh (a=4, b=2), global [6, 2], [S(0), R] -> [R, S(1)]\n"},
      {"mesh-size-one-dimension", problem({1, 3}, {4}, {S(0), R, S(0), R}),
       "mesh (a=1, b=3), global [4], [S(0), S(0)] -> [R, R]\n"},
      // The nightly's first find was the harness's: replicas of a Partial piece were given
      // different offsets (the identity is the smallest transition that shows it).
      {"regression-identity-partial-max-replicas-share-offsets",
       problem({2, 2}, {1, 1}, {R, R, Pmax, Pmax}),
       "mesh (a=2, b=2), global [1, 1], [R, P(max)] -> [R, P(max)]\n"},
      {"mesh-2x2-replicated-partial-sum-to-shard", problem({2, 2}, {3, 2}, {R, R, Psum, S(0)}),
       "mesh (a=2, b=2), global [3, 2], [R, P(sum)] -> [R, S(0)]\n"},
      {"refused-s-to-p", problem({2}, {4}, {S(0), Psum}),
       "mesh (a=2), global [4], [S(0)] -> [P(sum)]\n"},
      {"refused-psum-to-pmax", problem({2}, {4}, {Psum, Pmax}),
       "mesh (a=2), global [4], [P(sum)] -> [P(max)]\n"},
      {"refused-shard-past-rank", problem({2}, {4}, {S(1), R}),
       "mesh (a=2), global [4], [S(1)] -> [R]\n"},
  };
}

std::string miss(const Target& t, const Bytes& b) {
  const std::string got =
      shardcheck::fuzz::describe(shardcheck::fuzz::decode_redistribute_input(b));
  return got == t.want ? "" : "decodes to " + got;
}

}  // namespace

int main(int argc, char** argv) {
  const shardcheck::fuzz::TargetCorpus<Target> corpus{
      targets, [](const Target& t) { return t.bytes; }, miss,
      [](const Target& t) { return t.want.substr(0, t.want.size() - 1); }};
  return corpus.main(argc, argv);
}
