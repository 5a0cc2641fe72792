// Properties of the split policies (layout/split_policy.hpp): the @post of split() checked
// literally for generated N and P, each policy's sizes against an independent statement of
// its rule, and the errors for explicit sizes that do not tile N.
//
//   chunk     torch.chunk as DTensor's Shard(dim) uses it: piece k holds elements
//             [min(k*c, N), min((k+1)*c, N)) with c = ceil(N/P), so trailing pieces are smaller
//             or empty (N=5, P=4: 2,2,1,0; N=6, P=4: 2,2,2,0).
//   balanced  N/P each, the first N mod P one more (N=5, P=4: 2,1,1,1).
//   explicit  the given sizes.
#include "layout/split_policy.hpp"
#include "runtime/errors.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <numeric>
#include <ostream>
#include <string>

namespace shardcheck {

// How RapidCheck prints a generated policy in a counterexample (found by ADL).
inline void showValue(const SplitPolicy& p, std::ostream& os) { os << p.to_string(); }

namespace {

// Fixed distributions, independent of RapidCheck's size ramp.
template <class G>
auto flat(G g) {
  return rc::gen::resize(100, std::move(g));
}

rc::Gen<std::size_t> genN() {
  return rc::gen::weightedOneOf<std::size_t>({{1, rc::gen::just(std::size_t{0})},
                                              {6, flat(rc::gen::inRange<std::size_t>(1, 40))},
                                              {2, flat(rc::gen::inRange<std::size_t>(40, 5000))}});
}

rc::Gen<int> genParts() {
  return rc::gen::weightedOneOf<int>({{1, rc::gen::just(1)},
                                      {6, flat(rc::gen::inRange(2, 17))},
                                      {1, flat(rc::gen::inRange(17, 300))}});
}

rc::Gen<SplitPolicy> genPolicyFor(std::size_t n, int parts) {
  return rc::gen::exec([n, parts] {
    switch (*flat(rc::gen::inRange(0, 3))) {
      case 0: return SplitPolicy::chunk();
      case 1: return SplitPolicy::balanced();
      default: break;
    }
    // Explicit sizes that tile n: p - 1 cut points in [0, n], sorted.
    std::vector<std::size_t> cuts = *rc::gen::container<std::vector<std::size_t>>(
        static_cast<std::size_t>(parts - 1), flat(rc::gen::inRange<std::size_t>(0, n + 1)));
    cuts.push_back(0);
    cuts.push_back(n);
    std::sort(cuts.begin(), cuts.end());
    std::vector<std::size_t> sizes;
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) sizes.push_back(cuts[k + 1] - cuts[k]);
    return SplitPolicy::explicit_sizes(sizes);
  });
}

// What the policy's rule says piece k's size is, written without reference to split().
std::size_t rule_size(const SplitPolicy& policy, std::size_t n, std::size_t p, std::size_t k) {
  switch (policy.kind()) {
    case SplitPolicy::Kind::chunk: {
      const std::size_t c = n / p + (n % p != 0 ? 1 : 0);
      const std::size_t begin = std::min(k * c, n), end = std::min((k + 1) * c, n);
      return end - begin;
    }
    case SplitPolicy::Kind::balanced: return n / p + (k < n % p ? 1 : 0);
    case SplitPolicy::Kind::explicit_sizes: return policy.sizes()[k];
  }
  return 0;
}

RC_GTEST_PROP(split, pieces_tile_the_dimension_in_rank_order_by_the_policys_rule, ()) {
  const std::size_t n = *genN();
  const int parts = *genParts();
  const auto policy = *genPolicyFor(n, parts);
  RC_TAG(policy.kind() == SplitPolicy::Kind::explicit_sizes ? "explicit" : policy.to_string());
  RC_CLASSIFY(n < static_cast<std::size_t>(parts), "N < P");
  const auto pieces = split(policy, n, parts);
  const auto sizes = split_sizes(policy, n, parts);
  RC_ASSERT(pieces.size() == static_cast<std::size_t>(parts));
  RC_ASSERT(sizes.size() == pieces.size());
  std::size_t offset = 0;
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    RC_ASSERT(pieces[k].offset == offset);
    RC_ASSERT(pieces[k].size == sizes[k]);
    RC_ASSERT(pieces[k].size == rule_size(policy, n, pieces.size(), k));
    offset += pieces[k].size;
  }
  RC_ASSERT(offset == n);
}

// chunk never leaves a gap: once a piece is smaller than ceil(N/P), every later one is empty
// except the first short one (torch.chunk returns fewer chunks; Shard pads with empties).
RC_GTEST_PROP(split, chunk_pieces_are_full_then_one_short_then_empty, ()) {
  const std::size_t n = *genN();
  const int parts = *genParts();
  const auto sizes = split_sizes(SplitPolicy::chunk(), n, parts);
  const std::size_t c = (n + sizes.size() - 1) / sizes.size();
  std::size_t k = 0;
  while (k < sizes.size() && sizes[k] == c && c != 0) ++k;
  if (k < sizes.size()) ++k;  // the short one (possibly empty)
  for (; k < sizes.size(); ++k) RC_ASSERT(sizes[k] == 0u);
}

TEST(split, published_examples) {
  using V = std::vector<std::size_t>;
  EXPECT_EQ(split_sizes(SplitPolicy::chunk(), 5, 4), (V{2, 2, 1, 0}));
  EXPECT_EQ(split_sizes(SplitPolicy::chunk(), 6, 4), (V{2, 2, 2, 0}));
  EXPECT_EQ(split_sizes(SplitPolicy::chunk(), 0, 3), (V{0, 0, 0}));
  EXPECT_EQ(split_sizes(SplitPolicy::chunk(), 2, 4), (V{1, 1, 0, 0}));
  EXPECT_EQ(split_sizes(SplitPolicy::balanced(), 5, 4), (V{2, 1, 1, 1}));
  EXPECT_EQ(split_sizes(SplitPolicy::balanced(), 2, 4), (V{1, 1, 0, 0}));
  EXPECT_EQ(split(SplitPolicy::explicit_sizes({2, 0, 3}), 5, 3),
            (std::vector<Piece>{{0, 2}, {2, 0}, {2, 3}}));
}

RC_GTEST_PROP(split, explicit_sizes_that_do_not_tile_are_a_usage_error_naming_n_p_and_sizes, ()) {
  const std::size_t n = *flat(rc::gen::inRange<std::size_t>(0, 50));
  const int parts = *flat(rc::gen::inRange(1, 9));
  const auto genSize = flat(rc::gen::inRange<std::size_t>(0, 20));
  // Half the cases give one size per rank (so only the sum is wrong).
  const auto sizes =
      *rc::gen::arbitrary<bool>()
          ? *rc::gen::container<std::vector<std::size_t>>(static_cast<std::size_t>(parts), genSize)
          : *rc::gen::container<std::vector<std::size_t>>(genSize);
  const bool tiles = sizes.size() == static_cast<std::size_t>(parts) &&
                     std::accumulate(sizes.begin(), sizes.end(), std::size_t{0}) == n;
  RC_PRE(!tiles);
  RC_CLASSIFY(sizes.size() == static_cast<std::size_t>(parts), "right count, wrong sum");
  try {
    split(SplitPolicy::explicit_sizes(sizes), n, parts);
    RC_FAIL("split accepted sizes that do not tile");
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    std::string list;
    for (std::size_t i = 0; i < sizes.size(); ++i)
      list += (i ? "," : "") + std::to_string(sizes[i]);
    RC_ASSERT(msg.find("[" + list + "]") != std::string::npos);
    RC_ASSERT(msg.find(std::to_string(n)) != std::string::npos);
    RC_ASSERT(msg.find(std::to_string(parts) + " ranks") != std::string::npos);
  }
}

TEST(split, zero_parts_is_a_usage_error) {
  EXPECT_THROW(split(SplitPolicy::chunk(), 4, 0), UsageError);
  EXPECT_THROW(split_sizes(SplitPolicy::balanced(), 4, -1), UsageError);
}

TEST(split, policies_print_and_compare_as_values) {
  EXPECT_EQ(SplitPolicy::chunk().to_string(), "chunk");
  EXPECT_EQ(SplitPolicy::balanced().to_string(), "balanced");
  EXPECT_EQ(SplitPolicy::explicit_sizes({2, 1, 0}).to_string(), "explicit[2,1,0]");
  EXPECT_EQ(SplitPolicy::explicit_sizes({}).to_string(), "explicit[]");
  EXPECT_EQ(SplitPolicy::chunk(), SplitPolicy::chunk());
  EXPECT_NE(SplitPolicy::chunk(), SplitPolicy::balanced());
  EXPECT_EQ(SplitPolicy::explicit_sizes({1, 2}), SplitPolicy::explicit_sizes({1, 2}));
  EXPECT_NE(SplitPolicy::explicit_sizes({1, 2}), SplitPolicy::explicit_sizes({2, 1}));
  EXPECT_NE(SplitPolicy::explicit_sizes({}), SplitPolicy::chunk());
}

}  // namespace
}  // namespace shardcheck
