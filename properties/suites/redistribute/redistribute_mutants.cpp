// The redistribute mutant catalog. Each mutant is PlannedMutant<Bug>: the library's planner and
// its step executor (lib/layout/redistribute.hpp's public plan_redistribute and execute_step),
// with Bug's one change: an edit of the plan, or its own execution of one kind of step.
#include "suites/redistribute/redistribute_mutants.hpp"

#include "runtime/errors.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

namespace shardcheck::check {
namespace {

using Kind = RedistributeStep::Kind;

// The defaults of a bug: no edit of the plan, every step executed by the library, impossible
// transitions refused as the planner refuses them.
struct NoBug {
  static void edit(RedistributePlan& /*plan*/) {}
  template <class T>
  static std::optional<Tensor<T>> step(const MeshGroups& /*groups*/, Communicator& /*g*/,
                                       const RedistributeStep& /*s*/, const Tensor<T>& /*x*/) {
    return std::nullopt;
  }
  static constexpr bool relabels_partial_op_change = false;
};

template <class Bug>
struct PlannedMutant {
  template <class T>
  Tensor<T> redistribute(const MeshGroups& groups, const Tensor<T>& local, const Shape& global,
                         const std::vector<Placement>& from,
                         const std::vector<Placement>& to) const {
    RedistributePlan plan;
    try {
      plan = plan_redistribute(global, dtype_of<T>, groups.mesh(), from, to, groups.coordinates());
    } catch (const UsageError&) {
      if constexpr (!Bug::relabels_partial_op_change) throw;
      for (std::size_t i = 0; i < from.size(); ++i) {
        if (from[i].is_shard() && to[i].is_partial()) throw;
      }
      return local;  // P(a) -> P(b) "converted" by relabelling
    }
    Bug::edit(plan);
    Tensor<T> x = local;
    for (const auto& s : plan.steps) {
      Communicator& g = groups.along(s.mesh_dim);
      std::optional<Tensor<T>> y = Bug::template step<T>(groups, g, s, x);
      x = y ? std::move(*y) : execute_step(g, s, std::move(x));
    }
    return x;
  }
};

// Piece `index` of `x` cut along the step's target dimension by `policy` into p parts.
template <class T>
Tensor<T> slice_piece(const Tensor<T>& x, const RedistributeStep& s, const SplitPolicy& policy,
                      int index, int p) {
  // Cut what the rank holds (x), not what the plan says it holds (s.before): after an earlier
  // wrong slice of the same mutant the two differ, and reading x as s.before ran out of bounds
  // (a 10,000-case run at seed 5150001 crashed here).
  const std::size_t d = s.to.dim();
  const Shape& have = x.shape();
  const auto cut = split(policy, have[d], p)[static_cast<std::size_t>(index)];
  Shape off(have.size(), 0);
  off[d] = cut.offset;
  Shape block = have;
  block[d] = cut.size;
  Tensor<T> y(block);
  shardcheck::detail::copy_block(x.data(), have, off, y.data(), block, Shape(block.size(), 0),
                                 block);
  return y;
}

bool is_reduction(const RedistributeStep& s) {
  return s.kind == Kind::all_reduce || s.kind == Kind::reduce_scatter;
}

struct UnevenGatherKeepsPadding : NoBug {
  template <class T>
  static std::optional<Tensor<T>> step(const MeshGroups& /*groups*/, Communicator& g,
                                       const RedistributeStep& s, const Tensor<T>& x) {
    if (s.kind != Kind::all_gather) return std::nullopt;
    const std::size_t most = *std::max_element(s.counts.begin(), s.counts.end());
    auto send = shardcheck::detail::to_d_major(x, s.from.dim());
    send.resize(most, T(0));
    std::vector<T> recv(most * static_cast<std::size_t>(g.size()));
    g.all_gather(std::span<const T>(send), std::span<T>(recv));
    recv.resize(numel(s.after));
    return shardcheck::detail::from_d_major(std::span<const T>(recv), s.after, s.from.dim());
  }
};

struct GatheredSizeAsLocalTimesP : NoBug {
  static void edit(RedistributePlan& plan) {
    for (auto& s : plan.steps) {
      if (s.kind != Kind::all_gather) continue;
      // Every rank believes all pieces have its own count.
      const std::size_t mine = numel(s.before);
      for (auto& c : s.counts) c = mine;
    }
  }
};

struct NestedShardsGatheredOuterFirst : NoBug {
  static void edit(RedistributePlan& plan) {
    // Reverse the leading run of all_gathers (the library gathers innermost first); shapes and
    // counts stay as planned for the right order.
    std::size_t n = 0;
    while (n < plan.steps.size() && plan.steps[n].kind == Kind::all_gather) ++n;
    std::reverse(plan.steps.begin(), plan.steps.begin() + static_cast<std::ptrdiff_t>(n));
  }
};

struct PartialOpChangeIsANoOp : NoBug {
  static constexpr bool relabels_partial_op_change = true;
};

// Partial(avg) steps reduced with sum: the division by the group size forgotten.
struct AvgReducedAsSum : NoBug {
  static void edit(RedistributePlan& plan) {
    for (auto& s : plan.steps) {
      if (s.from.is_partial() && s.from.reduce_op() == ReduceOp::avg) {
        s.from = Placement::partial(ReduceOp::sum);
      }
    }
  }
};

struct ReplicateToPartialSumKeepsValueEverywhere : NoBug {
  static void edit(RedistributePlan& plan) {
    std::erase_if(plan.steps, [](const auto& s) { return s.kind == Kind::keep_on_first; });
  }
};

struct GatherAlongWrongDimension : NoBug {
  template <class T>
  static std::optional<Tensor<T>> step(const MeshGroups& /*groups*/, Communicator& g,
                                       const RedistributeStep& s, const Tensor<T>& x) {
    if (s.kind != Kind::all_gather || s.before.size() < 2) return std::nullopt;
    const std::size_t d = s.from.dim();
    const std::size_t wrong = (d + 1) % s.before.size();
    // The data are packed along the wrong axis, then unpacked as if along d.
    const auto send = shardcheck::detail::to_d_major(x, wrong);
    std::vector<T> recv(numel(s.after));
    g.all_gather(std::span<const T>(send), std::span<T>(recv), s.counts);
    return shardcheck::detail::from_d_major(std::span<const T>(recv), s.after, d);
  }
};

struct SliceByWorldRank : NoBug {
  template <class T>
  static std::optional<Tensor<T>> step(const MeshGroups& groups, Communicator& g,
                                       const RedistributeStep& s, const Tensor<T>& x) {
    if (s.kind != Kind::local_slice) return std::nullopt;
    return slice_piece(x, s, s.to.policy(), groups.world().rank() % g.size(), g.size());
  }
};

struct SplitPolicyIgnored : NoBug {
  template <class T>
  static std::optional<Tensor<T>> step(const MeshGroups& /*groups*/, Communicator& g,
                                       const RedistributeStep& s, const Tensor<T>& x) {
    if (s.kind != Kind::local_slice) return std::nullopt;
    return slice_piece(x, s, SplitPolicy::chunk(), g.rank(), g.size());
  }
};

// Every term rounded to bfloat16 before the reduction (in bfloat16 itself, the identity).
struct ReductionInBfloat16 : NoBug {
  template <class T>
  static std::optional<Tensor<T>> step(const MeshGroups& /*groups*/, Communicator& g,
                                       const RedistributeStep& s, const Tensor<T>& x) {
    if (!is_reduction(s)) return std::nullopt;
    Tensor<T> y = x;
    for (auto& v : y.values()) {
      v = static_cast<T>(static_cast<float>(bfloat16(static_cast<float>(v))));
    }
    return execute_step(g, s, std::move(y));
  }
};

// v rounded to nearest (ties to even) with `bits` significant bits, through double (exact for
// every T: each has at most 53 bits; the result has fewer than T, so it converts back exactly
// unless it lies in T's subnormal range).
template <class T>
T round_to_bits(T v, int bits) {
  const auto d = static_cast<double>(v);
  if (d == 0 || !std::isfinite(d)) return v;
  int e = 0;
  (void)std::frexp(d, &e);  // |d| in [2^(e-1), 2^e)
  return static_cast<T>(std::ldexp(std::nearbyint(std::ldexp(d, bits - e)), e - bits));
}

struct ReductionLosesTwoBits : NoBug {
  template <class T>
  static std::optional<Tensor<T>> step(const MeshGroups& /*groups*/, Communicator& g,
                                       const RedistributeStep& s, const Tensor<T>& x) {
    if (!is_reduction(s)) return std::nullopt;
    Tensor<T> y = execute_step(g, s, x);
    for (auto& v : y.values()) v = round_to_bits(v, std::numeric_limits<T>::digits - 2);
    return y;
  }
};

template <class Bug>
constexpr auto& make =
    make_mutant<RedistributeImplementation, RedistributeAdapter<PlannedMutant<Bug>>>;

// The catalog: each bug's name (as "mutant:<name>") and its story. Every one claims the
// library's plan (deterministic: the ledger and refusal properties apply), since each is that
// plan with one thing changed.
constexpr Mutant<RedistributeImplementation> catalog[] = {
    {"uneven-gather-keeps-padding",
     "pads every piece to the largest before an equal-count all_gather (as NCCL needs) and "
     "forgets to drop the padding: the gathered rows are shifted and the last ones lost",
     &make<UnevenGatherKeepsPadding>},
    {"gathered-size-as-local-times-p",
     "infers every rank's piece of an all_gather as its own size (global = local x P): right "
     "for even splits only",
     &make<GatheredSizeAsLocalTimesP>},
    {"nested-shards-gathered-outer-first",
     "undoes nested shards of one tensor dimension outermost first, so the inner pieces are "
     "concatenated as if the outer cut came last",
     &make<NestedShardsGatheredOuterFirst>},
    {"partial-op-change-is-a-no-op",
     "accepts P(sum) -> P(avg) (or any other change of reduce op) and only relabels the "
     "pieces, which changes the tensor they stand for",
     &make<PartialOpChangeIsANoOp>},
    {"avg-reduced-as-sum",
     "reduces Partial(avg) with sum (the 1/P forgotten): P(avg) -> R and P(avg) -> S come out "
     "P times too large",
     &make<AvgReducedAsSum>},
    {"replicate-to-partial-sum-keeps-value-everywhere",
     "R -> P(sum) leaves the value on every rank, so the sum is P times the tensor",
     &make<ReplicateToPartialSumKeepsValueEverywhere>},
    {"gather-along-wrong-dimension",
     "concatenates the all_gather's pieces along the next tensor dimension instead of the "
     "sharded one",
     &make<GatherAlongWrongDimension>},
    {"slice-by-world-rank",
     "R -> S slices by the world rank (mod the group size) instead of the rank's coordinate on "
     "that mesh dimension: right on a 1-D mesh, wrong on a sub-mesh",
     &make<SliceByWorldRank>},
    {"split-policy-ignored",
     "R -> S cuts by torch.chunk whatever the target's split policy: balanced and explicit "
     "splits come out with the wrong sizes in the wrong places",
     &make<SplitPolicyIgnored>},
    {"reduction-in-bfloat16",
     "rounds every term to bfloat16 before all_reduce / reduce_scatter (a lower precision than "
     "the element type, as a communication-compression bug would): exact for small integers, "
     "wrong by up to 2^-9 relative for real values (and the identity in bfloat16 itself)",
     &make<ReductionInBfloat16>},
    {"reduction-loses-two-bits",
     "every reduced element comes out rounded to two bits fewer than the element type (an "
     "accumulator or wire format 2 bits short): within 4 units of the last place, so only a "
     "bound tighter than that catches it",
     &make<ReductionLosesTwoBits>},
};

}  // namespace

std::span<const Mutant<RedistributeImplementation>> redistribute_mutants() { return catalog; }

}  // namespace shardcheck::check
