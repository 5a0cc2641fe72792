// Generators of structure: world sizes, mesh shapes, tp, cp, group counts, algorithms, split
// policies, layouts. Drawn UNSCALED, so every configuration has a fixed probability from the
// first case on, and shrinking toward the simplest choice.
//
// Why not RapidCheck's own: gen::inRange scales its range with the size parameter, which is
// the case index modulo 100 at the default 100 cases (tp = 4 first became drawable at case 85,
// world size 8 at case 94: a GQA bug wrong only at tp = 4, g = 2 survived 100 cases at two of
// three seeds); gen::element / weightedElement are unscaled but never shrink (a counterexample
// keeps tp = 8 however simple the failure is). These draw uniformly (or by weight) whatever the
// size and shrink toward the first choice (the lowest value).
//
// Sizes of tensors and values stay scaled (genDim, genTensor): small cases first is right for
// them; structure is not a size.
//
// sweepOf() draws by the case index instead, for a list every one of whose choices must appear
// in the first cases.
//
// sample_cases() draws a case generator's first n cases as a 100-case RapidCheck run does (size
// = case index), for the configuration-coverage tests of every suite.
#pragma once

#include <rapidcheck.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::gen {

// Uniform in [lo, hi] (inclusive) whatever the size; shrinks toward lo.
template <class I>
rc::Gen<I> structure(I lo, I hi) {
  return [=](const rc::Random& random, int /*size*/) {
    if (hi < lo) {
      throw rc::GenerationFailure("structure: empty range [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "]");
    }
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    const I value = static_cast<I>(lo + static_cast<I>(rc::Random(random).next() % span));
    return rc::shrinkable::shrinkRecur(value, [lo](I x) { return rc::shrink::towards<I>(x, lo); });
  };
}

// One of `choices`, uniformly whatever the size; shrinks toward choices[0] (put the simplest
// first).
template <class T>
rc::Gen<T> structureOf(std::vector<T> choices) {
  if (choices.empty()) throw rc::GenerationFailure("structureOf: no choices");
  const std::size_t last = choices.size() - 1;
  return rc::gen::map(structure<std::size_t>(0, last),
                      [choices = std::move(choices)](std::size_t i) { return choices[i]; });
}

template <class T>
rc::Gen<T> structureOf(std::initializer_list<T> choices) {
  return structureOf(std::vector<T>(choices));
}

// One of `choices` with the given weights, whatever the size; shrinks toward choices[0].
template <class T>
rc::Gen<T> weightedStructure(std::vector<std::pair<std::size_t, T>> choices) {
  std::vector<std::size_t> index;  // a choice's index repeated by its weight
  for (std::size_t i = 0; i < choices.size(); ++i)
    for (std::size_t w = 0; w < choices[i].first; ++w) index.push_back(i);
  if (index.empty()) throw rc::GenerationFailure("weightedStructure: no weight");
  const std::size_t last = index.size() - 1;
  return [=](const rc::Random& random, int size) {
    const auto slot = structure<std::size_t>(0, last)(random, size);
    // Shrinking the slot toward 0 walks toward the first choice.
    return rc::shrinkable::map(slot, [=](std::size_t s) { return choices[index[s]].second; });
  };
}

// choices[size % n]: a sweep. In a run of 100 cases case i draws at size i, so the first n cases
// draw every choice once, at every seed (a random draw of one of 12 choices leaves one out of the
// first 30 cases at some seed more often than not: the coupon collector needs ~37 draws). Use it
// for the one structural choice whose every value a suite promises early (the attention layer's
// (tp, g) list); everything else in the case stays random. Shrinks toward choices[0].
template <class T>
rc::Gen<T> sweepOf(std::vector<T> choices) {
  if (choices.empty()) throw rc::GenerationFailure("sweepOf: no choices");
  return [choices = std::move(choices)](const rc::Random& /*random*/, int size) {
    const auto i = static_cast<std::size_t>(size < 0 ? 0 : size) % choices.size();
    return rc::shrinkable::map(
        rc::shrinkable::shrinkRecur(
            i, [](std::size_t x) { return rc::shrink::towards<std::size_t>(x, 0); }),
        [choices](std::size_t k) { return choices[k]; });
  };
}

// A boolean, true with probability `percent`/100 whatever the size; shrinks toward false.
inline rc::Gen<bool> chance(int percent) {
  return rc::gen::map(structure<int>(0, 99), [percent](int v) { return v >= 100 - percent; });
}

// The first n cases of `gen` at one seed, drawn as a RapidCheck run of 100 cases draws them
// (case i at size i; each case its own split of the seed's random stream). Sizes past 100 wrap,
// as they do in a run of more cases.
template <class T>
std::vector<T> sample_cases(const rc::Gen<T>& gen, std::uint64_t seed, int n) {
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(n < 0 ? 0 : n));
  rc::Random random(seed);
  for (int i = 0; i < n; ++i) out.push_back(gen(random.split(), i % 100).value());
  return out;
}

// Which of the `wanted` labels never appear in the first n cases of some seed in [0, seeds):
// label(case) names every configuration the case covers. Empty when coverage is complete.
template <class T, class Label>
std::map<std::string, std::vector<std::uint64_t>> missing_configurations(
    const rc::Gen<T>& gen, const std::vector<std::string>& wanted, Label label, int seeds = 10,
    int n = 30) {
  std::map<std::string, std::vector<std::uint64_t>> missing;
  for (int s = 0; s < seeds; ++s) {
    const auto seed = static_cast<std::uint64_t>(s) * 0x9E3779B97F4A7C15ULL + 1;
    std::map<std::string, bool> seen;
    for (const auto& c : sample_cases(gen, seed, n))
      for (const auto& l : label(c)) seen[l] = true;
    for (const auto& w : wanted)
      if (!seen.count(w)) missing[w].push_back(seed);
  }
  return missing;
}

// missing_configurations' result as lines for a test's failure message:
// "  tp=8: missing at 3 of 10 seeds".
inline std::string missing_text(const std::map<std::string, std::vector<std::uint64_t>>& missing,
                                int seeds = 10) {
  std::string s;
  for (const auto& [label, at] : missing) {
    s += "  " + label + ": missing at " + std::to_string(at.size()) + " of " +
         std::to_string(seeds) + " seeds\n";
  }
  return s;
}

// The world-size labels "P=1" ... "P=max_world" a suite's label function gives its cases.
inline std::vector<std::string> world_labels(int max_world) {
  std::vector<std::string> out;
  for (int p = 1; p <= max_world; ++p) out.push_back("P=" + std::to_string(p));
  return out;
}

// Every world size up to max_world within the first n cases at each of 10 seeds: the labels
// missing somewhere (empty when coverage is complete).
template <class T, class Label>
std::map<std::string, std::vector<std::uint64_t>> missing_world_sizes(const rc::Gen<T>& gen,
                                                                      int max_world, Label label,
                                                                      int n = 60) {
  return missing_configurations(gen, world_labels(max_world), label, 10, n);
}

// At how many of 10 seeds the world size max_world + 1, which no case of `gen` can have, is
// missing: 10 when missing_configurations can fail (the coverage tests' own check).
template <class T, class Label>
std::size_t seeds_missing_impossible_world(const rc::Gen<T>& gen, int max_world, Label label) {
  const std::string impossible = "P=" + std::to_string(max_world + 1);
  const auto missing = missing_configurations(gen, {impossible}, label);
  const auto it = missing.find(impossible);
  return it == missing.end() ? 0 : it->second.size();
}

}  // namespace shardcheck::gen
