// Generators and helpers shared by the runtime's property suites: world sizes and groups
// (ordered subsets, groups of groups), element values with the bit patterns RapidCheck's own
// generators never produce (NaN with payloads, signalling NaN, +-Inf, -0.0, subnormals,
// log-uniform magnitudes, integer extremes), per-rank counts with zeros, and a runner that
// executes a body on the members of a generated group.
//
// Every generator here draws on the main thread (RapidCheck throws otherwise); bodies passed
// to run_on_group() only read the pre-generated inputs and write their own rank's slot.
// Distributions are fixed with gen::resize so that they do not depend on RapidCheck's size
// ramp: every case can hit P = 16 or a NaN.
#pragma once

#include "collective_model.hpp"
#include "model_bridge.hpp"
#include "runtime/communicator.hpp"
#include "runtime/launcher.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace shardcheck {
// RapidCheck prints generated values with showValue (found by ADL); without these a failing
// case would show "<???>" for the runtime's enums.
inline void showValue(DType t, std::ostream& os) { os << name(t); }
inline void showValue(ReduceOp op, std::ostream& os) { os << name(op); }
inline void showValue(Algorithm a, std::ostream& os) { os << name(a); }
inline void showValue(Collective c, std::ostream& os) { os << name(c); }
}  // namespace shardcheck

namespace shardcheck::props {

// ---------------------------------------------------------------- bridge to the model

using model::to_model;

// ---------------------------------------------------------------- scalars

// Uniform in [lo, hi] whatever RapidCheck's current size (shrinks towards lo).
template <class I>
rc::Gen<I> uniform(I lo, I hi) {
  return rc::gen::resize(100, rc::gen::inRange<I>(lo, static_cast<I>(hi + 1)));
}

// P = 1..16, mostly 3..8 (the interesting ring sizes), 9..16 for more ranks than cores.
inline rc::Gen<int> genWorldSize(int max_world = 16) {
  using rc::gen::weightedOneOf;
  const int hi = std::max(1, max_world);
  return weightedOneOf<int>({{1, rc::gen::just(1)},
                             {2, rc::gen::just(std::min(2, hi))},
                             {8, uniform(std::min(3, hi), std::min(8, hi))},
                             {3, uniform(std::min(9, hi), hi)}});
}

inline rc::Gen<DType> genDType() {
  return rc::gen::elementOf(std::vector<DType>(std::begin(all_dtypes), std::end(all_dtypes)));
}

// f(tag) for a generated element type (visit_dtype's tag), its name tagged when tag_dtype.
template <class F>
void for_generated_dtype(F&& f, bool tag_dtype) {
  const DType dtype = *genDType();
  if (tag_dtype) RC_TAG(name(dtype));
  visit_dtype(dtype, [&](auto tag) { f(tag); });
}

// Per-rank buffers (collective_model.hpp), indexed by the group rank (rank_of).
template <class T>
using Bufs = model::Bufs<T>;

inline std::size_t rank_of(const Communicator& g) { return static_cast<std::size_t>(g.rank()); }

inline rc::Gen<ReduceOp> genReduceOp(DType t) {
  if (is_floating(t)) {
    return rc::gen::elementOf(
        std::vector<ReduceOp>(std::begin(all_reduce_ops), std::end(all_reduce_ops)));
  }
  return rc::gen::element(ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::product);
}

inline rc::Gen<Algorithm> genAlgorithm() {
  return rc::gen::element(Algorithm::ring, Algorithm::sequential);
}

// A per-rank element count: zero often (empty ranks are the usual edge), small mostly.
inline rc::Gen<std::size_t> genCount(std::size_t max = 24) {
  return rc::gen::weightedOneOf<std::size_t>(
      {{2, rc::gen::just(std::size_t{0})},
       {4, uniform<std::size_t>(1, std::min<std::size_t>(4, max))},
       {4, uniform<std::size_t>(0, max)}});
}

inline rc::Gen<std::vector<std::size_t>> genCounts(int p, std::size_t max = 24) {
  return rc::gen::container<std::vector<std::size_t>>(static_cast<std::size_t>(p), genCount(max));
}

// A buffer length for all_reduce / broadcast / reduce: 0, fewer than p (empty chunks), or more.
inline rc::Gen<std::size_t> genLength(int p) {
  const auto up = static_cast<std::size_t>(p);
  return rc::gen::weightedOneOf<std::size_t>({{1, rc::gen::just(std::size_t{0})},
                                              {3, uniform<std::size_t>(1, up)},
                                              {6, uniform<std::size_t>(0, 4 * up + 7)}});
}

// ---------------------------------------------------------------- groups

// Which ranks take part: the world, an ordered subset of it (comm.group), or an ordered subset
// of such a subset (group of group).
struct Topology {
  int world = 1;
  std::vector<int> level1;  // world-communicator ranks of the group, in its order; empty: world
  std::vector<int> level2;  // level1-group ranks of a group of that group; empty: none

  // The group's members as world ranks, in group order.
  std::vector<int> members() const {
    std::vector<int> m = level1;
    if (m.empty()) {
      for (int w = 0; w < world; ++w) m.push_back(w);
    }
    if (level2.empty()) return m;
    std::vector<int> nested;
    for (int k : level2) nested.push_back(m[static_cast<std::size_t>(k)]);
    return nested;
  }
  int size() const { return static_cast<int>(members().size()); }

  friend std::ostream& operator<<(std::ostream& os, const Topology& t) {
    os << "world " << t.world << " group " << format_group(t.members());
    if (!t.level2.empty()) os << " (group of group " << format_group(t.level1) << ")";
    return os;
  }
};

// An ordered subset of [0, n) with k elements: a partial Fisher-Yates shuffle, which shrinks
// towards 0, 1, ..., k-1.
inline rc::Gen<std::vector<int>> genOrderedSubset(int n, int k) {
  return rc::gen::exec([n, k] {
    std::vector<int> v(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
    for (int i = 0; i < k; ++i) {
      const int j = *uniform(i, n - 1);
      std::swap(v[static_cast<std::size_t>(i)], v[static_cast<std::size_t>(j)]);
    }
    v.resize(static_cast<std::size_t>(k));
    return v;
  });
}

inline rc::Gen<Topology> genTopology(int max_world = 16) {
  return rc::gen::exec([max_world] {
    Topology t;
    t.world = *genWorldSize(max_world);
    const int kind = t.world == 1 ? 0 : *rc::gen::weightedElement<int>({{5, 0}, {3, 1}, {2, 2}});
    if (kind >= 1) {
      // Mostly large sub-groups (P > 2 common), any size possible.
      const int k1 = *rc::gen::weightedOneOf<int>(
          {{1, uniform(1, t.world)}, {2, uniform(std::max(1, t.world / 2), t.world)}});
      t.level1 = *genOrderedSubset(t.world, k1);
      if (kind == 2) t.level2 = *genOrderedSubset(k1, *uniform(1, k1));
    }
    return t;
  });
}

inline std::string p_bucket(int p) {
  if (p <= 2) return "P=" + std::to_string(p);
  return p <= 8 ? "P=3..8" : "P=9..16";
}

// ---------------------------------------------------------------- element values

// The IEEE layout of a floating element type: its bits as an unsigned integer U, the widths of
// its exponent and of its mantissa (without the implicit bit).
template <Element T>
struct Layout {
  using U = std::conditional_t<sizeof(T) == 8, std::uint64_t,
                               std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint16_t>>;
  static constexpr int man = std::numeric_limits<T>::digits - 1;
  static constexpr int exp = static_cast<int>(8 * sizeof(T)) - man - 1;
};
static_assert(Layout<double>::exp == 11 && Layout<double>::man == 52);
static_assert(Layout<float>::exp == 8 && Layout<float>::man == 23);
static_assert(Layout<bfloat16>::exp == 8 && Layout<bfloat16>::man == 7);
static_assert(Layout<float16>::exp == 5 && Layout<float16>::man == 10);

// What a case's values look like. `tame` keeps sums finite so rounding differences show;
// `wide` spans the whole range; `special` is dense in NaN/Inf/-0/subnormals/extremes; `few`
// draws from a handful of values so that ranks often hold equal values, +0 against -0 and
// NaN against NaN (the tie and NaN-propagation rules of max/min only show then).
enum class Values { tame, wide, special, few };

inline rc::Gen<Values> genValues() {
  return rc::gen::weightedElement<Values>(
      {{4, Values::tame}, {3, Values::wide}, {2, Values::special}, {2, Values::few}});
}

inline const char* values_name(Values v) {
  switch (v) {
    case Values::tame: return "tame";
    case Values::wide: return "wide";
    case Values::special: return "special";
    case Values::few: return "few";
  }
  return "?";
}

inline void showValue(Values v, std::ostream& os) { os << values_name(v); }

// The NaN this machine's arithmetic produces (Inf - Inf), computed at run time so that neither
// the compiler's constant folding nor the target's convention is assumed.
template <Element T>
T hardware_nan() {
  if constexpr (sizeof(T) == 2) {
    volatile float inf = std::numeric_limits<float>::infinity();
    return T(inf - inf);
  } else {
    volatile T inf = std::numeric_limits<T>::infinity();
    return inf - inf;  // NOLINT(misc-redundant-expression): Inf - Inf is the point, see above
  }
}

template <Element T>
T from_layout_bits(std::uint64_t sign, std::uint64_t exp, std::uint64_t man) {
  using L = Layout<T>;
  const std::uint64_t b = (sign << (L::exp + L::man)) | (exp << L::man) | man;
  return model::from_bits<T>(static_cast<typename L::U>(b));
}

// One floating value of the given kind.
//   0 small integer, 1 log-uniform within 2^-10..2^10, 2 log-uniform over the whole range
//   (subnormals included), 3 raw bits, 4 a special value, 5 one of a few collision-prone values.
// `canonical_nan` restricts NaN to the one the hardware itself produces (hardware_nan): results
// then cannot depend on which NaN operand an addition propagates.
template <Element T>
rc::Gen<T> genFloatOfKind(int kind, bool canonical_nan) {
  using L = Layout<T>;
  constexpr std::uint64_t exp_max = (std::uint64_t{1} << L::exp) - 1;  // Inf/NaN exponent
  constexpr std::uint64_t man_max = (std::uint64_t{1} << L::man) - 1;
  constexpr std::uint64_t bias = exp_max / 2;
  constexpr std::uint64_t quiet = std::uint64_t{1} << (L::man - 1);
  if (kind == 5) {
    const T nan_a = canonical_nan ? hardware_nan<T>() : from_layout_bits<T>(0, exp_max, quiet | 1);
    const T nan_b = canonical_nan ? hardware_nan<T>() : from_layout_bits<T>(1, exp_max, quiet | 2);
    const T snan = canonical_nan ? hardware_nan<T>() : from_layout_bits<T>(0, exp_max, 3);
    // Zeros weigh most: +0 against -0 is the only tie whose operands differ in bits.
    return rc::gen::weightedElement<T>({{3, from_layout_bits<T>(0, 0, 0)},
                                        {3, from_layout_bits<T>(1, 0, 0)},
                                        {1, from_layout_bits<T>(0, bias, 0)},
                                        {1, from_layout_bits<T>(1, bias, 0)},
                                        {1, from_layout_bits<T>(0, exp_max, 0)},
                                        {1, from_layout_bits<T>(1, exp_max, 0)},
                                        {1, nan_a},
                                        {1, nan_b},
                                        {1, snan}});
  }
  return rc::gen::exec([=]() -> T {
    const std::uint64_t sign = *uniform<std::uint64_t>(0, 1);
    switch (kind) {
      case 0: return T(static_cast<float>(*uniform(-8, 8)));
      case 1:
        return from_layout_bits<T>(
            sign,
            *uniform<std::uint64_t>(bias - std::min<std::uint64_t>(10, bias - 1),
                                    bias + 10 < exp_max ? bias + 10 : exp_max - 1),
            *uniform<std::uint64_t>(0, man_max));
      case 2:
        return from_layout_bits<T>(sign, *uniform<std::uint64_t>(0, exp_max - 1),
                                   *uniform<std::uint64_t>(0, man_max));
      case 3:
        if (canonical_nan)
          return from_layout_bits<T>(sign, *uniform<std::uint64_t>(0, exp_max - 1),
                                     *uniform<std::uint64_t>(0, man_max));
        return from_layout_bits<T>(sign, *uniform<std::uint64_t>(0, exp_max),
                                   *uniform<std::uint64_t>(0, man_max));
      default: break;
    }
    switch (*uniform(0, 9)) {
      case 0: return from_layout_bits<T>(sign, 0, 0);        // +-0
      case 1: return from_layout_bits<T>(sign, exp_max, 0);  // +-Inf
      case 2:                                                // quiet NaN
        if (canonical_nan) return hardware_nan<T>();
        return from_layout_bits<T>(sign, exp_max, quiet | *uniform<std::uint64_t>(0, quiet - 1));
      case 3:  // signalling NaN
        if (canonical_nan) return hardware_nan<T>();
        return from_layout_bits<T>(sign, exp_max, *uniform<std::uint64_t>(1, quiet - 1));
      case 4: return from_layout_bits<T>(sign, 0, 1);  // min subnormal
      case 5:
        return from_layout_bits<T>(sign, 0, *uniform<std::uint64_t>(1, man_max));  // subnormal
      case 6: return from_layout_bits<T>(sign, 1, 0);                              // min normal
      case 7: return from_layout_bits<T>(sign, exp_max - 1, man_max);              // max finite
      case 8: return from_layout_bits<T>(sign, bias, 0);                           // +-1
      default:
        return from_layout_bits<T>(sign, bias + *uniform<std::uint64_t>(0, 3),
                                   man_max);  // rounding edge
    }
  });
}

template <Element T>
rc::Gen<T> genIntOfKind(int kind) {
  using Lim = std::numeric_limits<T>;
  switch (kind) {
    case 5: return rc::gen::element<T>(0, 1, -1, Lim::min(), Lim::max());
    case 0: return uniform<T>(-8, 8);
    case 1: return uniform<T>(-100000, 100000);
    case 2:
    case 3: return uniform<T>(Lim::min(), static_cast<T>(Lim::max() - 1));
    default:
      return rc::gen::element<T>(0, 1, -1, Lim::min(), Lim::max(), static_cast<T>(Lim::min() + 1),
                                 static_cast<T>(Lim::max() - 1));
  }
}

// One element under a case's value mix.
template <Element T>
rc::Gen<T> genElement(Values mix, bool canonical_nan = false) {
  // Weights of the kinds 0..5 (small int, moderate, log-uniform full, raw bits, special, few).
  constexpr std::size_t w[4][6] = {
      {3, 7, 0, 0, 0, 0}, {1, 4, 3, 1, 1, 0}, {2, 4, 0, 0, 4, 0}, {0, 0, 0, 0, 0, 1}};
  const auto& wm = w[static_cast<int>(mix)];
  return rc::gen::exec([=] {
    const int kind = *rc::gen::weightedElement<int>(
        {{wm[0], 0}, {wm[1], 1}, {wm[2], 2}, {wm[3], 3}, {wm[4], 4}, {wm[5], 5}});
    if constexpr (std::is_integral_v<T>) return *genIntOfKind<T>(kind);
    else return *genFloatOfKind<T>(kind, canonical_nan);
  });
}

template <Element T>
rc::Gen<std::vector<T>> genBuffer(std::size_t n, Values mix, bool canonical_nan = false) {
  return rc::gen::container<std::vector<T>>(n, genElement<T>(mix, canonical_nan));
}

// One buffer per rank, rank k's of sizes[k] elements.
template <Element T>
rc::Gen<model::Bufs<T>> genBuffers(const std::vector<std::size_t>& sizes, Values mix) {
  return rc::gen::exec([=] {
    model::Bufs<T> b;
    for (std::size_t n : sizes) b.push_back(*genBuffer<T>(n, mix));
    return b;
  });
}

// A recognizable filler for outputs that must be overwritten or must stay untouched.
template <Element T>
T sentinel() {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(0x5A5A5A5A);
  else return model::from_bits<T>(static_cast<typename Layout<T>::U>(0x5A5A5A5A5A5A5A5Aull));
}

// ---------------------------------------------------------------- comparison

template <Element T>
std::string show_element(T x) {
  std::ostringstream os;
  os << "0x" << std::hex << static_cast<std::uint64_t>(model::bits_of(x)) << std::dec << " (";
  os.precision(17);
  if constexpr (std::is_integral_v<T>) os << x;
  else if constexpr (sizeof(T) == 2) os << static_cast<float>(x);
  else os << x;
  os << ")";
  return os.str();
}

using model::Match;
using model::same;

// Empty when equal; otherwise where and how `actual` differs from `expected`.
template <Element T>
std::string first_difference(const std::vector<T>& expected, const std::vector<T>& actual,
                             Match m = Match::bits) {
  if (expected.size() != actual.size()) {
    return "size " + std::to_string(actual.size()) + ", expected " +
           std::to_string(expected.size());
  }
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (!same(expected[i], actual[i], m)) {
      return "element " + std::to_string(i) + " is " + show_element(actual[i]) + ", expected " +
             show_element(expected[i]);
    }
  }
  return {};
}

inline Match match_for(ReduceOp op, DType t) {
  if (!is_floating(t)) return Match::bits;
  const bool arithmetic = op == ReduceOp::sum || op == ReduceOp::avg || op == ReduceOp::product;
  return arithmetic ? Match::nan_payload_free : Match::nan_quiet_bit_free;
}

// RC_ASSERTs every rank's buffer against the model's; `what` names the buffer in the message.
template <Element T>
void assert_ranks_equal(const model::Bufs<T>& expected, const model::Bufs<T>& actual, Match m,
                        const std::string& what) {
  RC_ASSERT(expected.size() == actual.size());
  for (std::size_t r = 0; r < expected.size(); ++r) {
    const std::string diff = first_difference(expected[r], actual[r], m);
    // NOLINTNEXTLINE(performance-inefficient-string-concatenation): once, RC_FAIL throws
    if (!diff.empty()) RC_FAIL(what + " on group rank " + std::to_string(r) + ": " + diff);
  }
}

// ---------------------------------------------------------------- running on a group

// What a member saw of its group communicator, checked against the topology afterwards.
struct GroupSeen {
  bool ran = false;
  int rank = -1;
  int size = -1;
  int world_rank = -1;
  std::vector<int> members;
};

struct GroupRun {
  RunResult result;
  std::vector<GroupSeen> seen;  // by world rank
};

// Runs body(group_comm) on the members of t's group (others return at once) and records what
// each member saw of its communicator.
template <class Body>
GroupRun run_on_group(const Topology& t, Body&& body, const RunOptions& options = {}) {
  std::vector<GroupSeen> seen(static_cast<std::size_t>(t.world));
  auto contains = [](const std::vector<int>& v, int x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  RunResult result = run(
      t.world,
      [&](Communicator& world) {
        Communicator* g = &world;
        std::unique_ptr<Communicator> g1, g2;
        if (!t.level1.empty()) {
          if (!contains(t.level1, world.rank())) return;
          g1 = world.group(t.level1);
          g = g1.get();
        }
        if (!t.level2.empty()) {
          if (!contains(t.level2, g->rank())) return;
          g2 = g->group(t.level2);
          g = g2.get();
        }
        seen[static_cast<std::size_t>(world.rank())] = {true, g->rank(), g->size(), g->world_rank(),
                                                        g->members()};
        body(*g);
      },
      options);
  return {std::move(result), std::move(seen)};
}

// Each member's communicator has the generated rank, size and membership.
inline void assert_group_seen(const Topology& t, const std::vector<GroupSeen>& seen) {
  const auto members = t.members();
  for (int w = 0; w < t.world; ++w) {
    const auto& s = seen[static_cast<std::size_t>(w)];
    const auto it = std::find(members.begin(), members.end(), w);
    RC_ASSERT(s.ran == (it != members.end()));
    if (!s.ran) continue;
    RC_ASSERT(s.rank == static_cast<int>(it - members.begin()));
    RC_ASSERT(s.size == static_cast<int>(members.size()));
    RC_ASSERT(s.world_rank == w);
    RC_ASSERT(s.members == members);
  }
}

}  // namespace shardcheck::props
