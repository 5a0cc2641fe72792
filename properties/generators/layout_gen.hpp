// Generators of world sizes, dimensions and split policies: the shapes where sharding bugs
// live. Dimensions favour 1, primes and sizes smaller than the world (empty shards); split
// policies cover torch.chunk, balanced and explicit sizes with zeros. World sizes and the choice
// of policy are structure (structure.hpp): unscaled, shrinking toward the simplest.
#pragma once

#include "generators/structure.hpp"
#include "layout/split_policy.hpp"
#include "runtime/dtype.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace shardcheck::gen {

// A world size in [1, max_world], every value with a fixed probability from the first case on
// (structure.hpp: RapidCheck's inRange made P = 8 drawable only from case 94); shrinks toward 1.
inline rc::Gen<int> genWorld(int max_world) { return structure<int>(1, std::max(1, max_world)); }

// A dimension in [1, max]: 1, small primes, or anything up to max (scaled with the size: small
// tensors first). Every draw shrinks toward 1, the primes too (an unshrinkable prime list left
// 44% of counterexamples with a dimension above 4).
inline rc::Gen<std::size_t> genDim(std::size_t max) {
  std::vector<std::size_t> primes;
  for (std::size_t p : {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31}) {
    if (p <= max) primes.push_back(p);
  }
  const auto pick = rc::gen::weightedOneOf<std::size_t>({
      {1, rc::gen::just<std::size_t>(1)},
      {3, rc::gen::elementOf(primes)},
      {4, rc::gen::inRange<std::size_t>(1, max + 1)},
  });
  return [pick](const rc::Random& random, int size) {
    const std::size_t d = pick(random, size).value();
    return rc::shrinkable::shrinkRecur(
        d, [](std::size_t x) { return rc::shrink::towards<std::size_t>(x, 1); });
  };
}

// Explicit sizes for n over `parts` ranks: random cut points, so zeros (and everything on one
// rank) occur often.
inline rc::Gen<SplitPolicy> genExplicitSplit(std::size_t n, int parts) {
  return rc::gen::map(
      rc::gen::container<std::vector<std::size_t>>(static_cast<std::size_t>(parts - 1),
                                                   rc::gen::inRange<std::size_t>(0, n + 1)),
      [n, parts](std::vector<std::size_t> cuts) {
        cuts.push_back(0);
        cuts.push_back(n);
        std::sort(cuts.begin(), cuts.end());
        std::vector<std::size_t> sizes;
        sizes.reserve(static_cast<std::size_t>(parts));
        for (int k = 0; k < parts; ++k) {
          sizes.push_back(cuts[static_cast<std::size_t>(k) + 1] -
                          cuts[static_cast<std::size_t>(k)]);
        }
        return SplitPolicy::explicit_sizes(std::move(sizes));
      });
}

// Explicit sizes for n over `parts` ≥ 2 ranks in which one rank, drawn, gets nothing: the case
// where a rank's collectives have another layout than its peers' (a tensor-parallel rank with
// no heads made the attention layer's replicated dbo differ by 1 ulp, issue 16).
inline rc::Gen<SplitPolicy> genSplitWithEmptyPiece(std::size_t n, int parts) {
  if (parts < 2) return genExplicitSplit(n, parts);
  return rc::gen::apply(
      [](const SplitPolicy& rest, int empty) {
        auto sizes = rest.sizes();
        sizes.insert(sizes.begin() + empty, 0);
        return SplitPolicy::explicit_sizes(std::move(sizes));
      },
      genExplicitSplit(n, parts - 1), rc::gen::inRange(0, parts));
}

// Any policy for a dimension of n over `parts` ranks.
inline rc::Gen<SplitPolicy> genSplit(std::size_t n, int parts) {
  // The kind is structure (unscaled, shrinks toward chunk); explicit sizes shrink on their own.
  return rc::gen::mapcat(weightedStructure<int>({{3, 0}, {2, 1}, {3, 2}}), [n, parts](int kind) {
    if (kind == 0) return rc::gen::just(SplitPolicy::chunk());
    if (kind == 1) return rc::gen::just(SplitPolicy::balanced());
    return genExplicitSplit(n, parts);
  });
}

// One of `allowed`, unscaled; shrinks toward the first (float64 in RunConfig's default order,
// the type where a bug is furthest above the bound).
inline rc::Gen<DType> genFloatDType(const std::vector<DType>& allowed) {
  return structureOf(allowed);
}

// "chunk", "balanced" or "explicit" (the tag RC_CLASSIFY reports).
inline std::string policy_kind(const SplitPolicy& p) {
  switch (p.kind()) {
    case SplitPolicy::Kind::chunk: return "chunk";
    case SplitPolicy::Kind::balanced: return "balanced";
    case SplitPolicy::Kind::explicit_sizes: return "explicit";
  }
  return "?";
}

inline bool has_empty_piece(const SplitPolicy& p, std::size_t n, int parts) {
  for (const auto s : split_sizes(p, n, parts)) {
    if (s == 0) return true;
  }
  return false;
}

}  // namespace shardcheck::gen
