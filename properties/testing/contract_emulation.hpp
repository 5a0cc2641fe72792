// A small emulation of lib/ops/linear/linear.hpp's arithmetic contract for ONE output element,
// written independently of lib/: the bound's soundness is checked against every arithmetic the
// contract allows, not against one implementation's choices.
//
//   each part: k_r products accumulated in A = acc_t<T> (float64 for float64, else float32) in
//              an order drawn from the case's seed: left to right; a random summation tree; a
//              random permutation with fused multiply-add; or 2..8 blocked fma accumulators
//              combined by a random tree
//   rounded once to T (static_cast: Eigen's round-to-nearest-even for bfloat16/float16)
//   the p partials (empty parts contribute +0, as an empty rank does) summed in T along a random
//   tree (ring and sequential reductions are two such trees), one rounding per step
//   the bias added once in T
#pragma once

#include "testing/reference_gen.hpp"

#include <cmath>
#include <cstddef>
#include <optional>
#include <type_traits>
#include <vector>

namespace shardcheck::props::ref {

template <class T>
using acc_of = std::conditional_t<std::is_same_v<T, double>, double, float>;

enum class SumOrder { in_order, random_tree, fma_permuted, fma_blocked };

inline const char* order_name(SumOrder o) {
  switch (o) {
    case SumOrder::in_order: return "in order";
    case SumOrder::random_tree: return "random tree";
    case SumOrder::fma_permuted: return "fma permuted";
    case SumOrder::fma_blocked: return "fma blocked";
  }
  return "?";
}

// One element's contraction: a·b over the axis (b empty: a plain sum, Operands::unit), the
// axis cut into parts, an optional bias, and the seed of every order the emulation draws.
template <class T>
struct DotCase {
  std::vector<T> a;
  std::vector<T> b;
  std::vector<std::size_t> parts;
  std::optional<T> bias;
  std::uint64_t order_seed = 0;
  SumOrder order = SumOrder::random_tree;
};

// Combines the values pairwise along a random binary tree: every tree and order is reachable.
template <class V, class Add>
V random_tree_sum(std::vector<V> v, SplitMix64& rng, Add add) {
  if (v.empty()) return V(0);
  while (v.size() > 1) {
    const std::size_t i = rng.below(v.size());
    std::size_t j = rng.below(v.size() - 1);
    if (j >= i) ++j;
    v[i] = add(v[i], v[j]);
    v[j] = v.back();
    v.pop_back();
  }
  return v[0];
}

template <class T>
acc_of<T> emulate_part(const DotCase<T>& c, std::size_t begin, std::size_t len, SplitMix64& rng) {
  using A = acc_of<T>;
  auto factor = [&](std::size_t i) { return c.b.empty() ? A(1) : static_cast<A>(c.b[i]); };
  auto add = [](A x, A y) { return A(x + y); };
  std::vector<std::size_t> perm(len);
  for (std::size_t n = 0; n < len; ++n) perm[n] = begin + n;
  for (std::size_t n = len; n > 1; --n) std::swap(perm[n - 1], perm[rng.below(n)]);
  switch (c.order) {
    case SumOrder::in_order: {
      A s(0);
      for (std::size_t i = begin; i < begin + len; ++i)
        s = A(s + A(static_cast<A>(c.a[i]) * factor(i)));
      return s;
    }
    case SumOrder::random_tree: {
      std::vector<A> prods;
      for (std::size_t i = begin; i < begin + len; ++i)
        prods.push_back(A(static_cast<A>(c.a[i]) * factor(i)));
      return random_tree_sum(std::move(prods), rng, add);
    }
    case SumOrder::fma_permuted: {
      A s(0);
      for (std::size_t i : perm) s = std::fma(static_cast<A>(c.a[i]), factor(i), s);
      return s;
    }
    case SumOrder::fma_blocked: {
      std::vector<A> acc(2 + rng.below(7), A(0));
      for (std::size_t n = 0; n < perm.size(); ++n) {
        A& s = acc[n % acc.size()];
        s = std::fma(static_cast<A>(c.a[perm[n]]), factor(perm[n]), s);
      }
      return random_tree_sum(std::move(acc), rng, add);
    }
  }
  return A(0);
}

// The contract's result for the element.
template <class T>
T emulate(const DotCase<T>& c) {
  SplitMix64 rng{c.order_seed};
  std::vector<T> partials;
  std::size_t begin = 0;
  for (std::size_t len : c.parts) {
    partials.push_back(static_cast<T>(emulate_part(c, begin, len, rng)));  // one rounding to T
    begin += len;
  }
  const T sum =
      random_tree_sum(std::move(partials), rng, [](T x, T y) { return static_cast<T>(x + y); });
  return c.bias ? static_cast<T>(sum + *c.bias) : sum;
}

}  // namespace shardcheck::props::ref
