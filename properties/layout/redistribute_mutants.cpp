#include "redistribute_impl.hpp"

#include "runtime/errors.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

namespace shardcheck::layout_test {
namespace {

using Kind = RedistributeStep::Kind;
// Replaces the library's execution of one step; nullopt: use the library's.
template <class T>
using StepOverrideOf = std::function<std::optional<Tensor<T>>(
    const MeshGroups&, Communicator&, const RedistributeStep&, const Tensor<T>&)>;
using StepOverride = StepOverrideOf<double>;
using PlanEdit = std::function<void(RedistributePlan&)>;

// clang-tidy 14 takes `description` for a const use: it misses the move into impl.description,
// a member of the dependent type BasicRedistributeImpl<T>.
template <class T>
// NOLINTNEXTLINE(performance-unnecessary-value-param): description is moved, see above
BasicRedistributeImpl<T> make_of(std::string name, std::string description, PlanEdit edit,
                                 StepOverrideOf<T> over = {},
                                 bool accept_partial_op_change = false) {
  BasicRedistributeImpl<T> impl;
  impl.name = "mutant:" + std::move(name);
  impl.description = std::move(description);
  impl.run = [edit = std::move(edit), over = std::move(over), accept_partial_op_change](
                 const MeshGroups& groups, const Tensor<T>& local, const Shape& global,
                 const std::vector<Placement>& from, const std::vector<Placement>& to) {
    RedistributePlan plan;
    try {
      plan = plan_redistribute(global, dtype_of<T>, groups.mesh(), from, to, groups.coordinates());
    } catch (const UsageError&) {
      if (!accept_partial_op_change) throw;
      bool only_op_change = true;
      for (std::size_t i = 0; i < from.size(); ++i) {
        if (from[i].is_shard() && to[i].is_partial()) only_op_change = false;
      }
      if (!only_op_change) throw;
      return local;  // P(a) -> P(b) "converted" by relabelling
    }
    if (edit) edit(plan);
    Tensor<T> x = local;
    for (const auto& step : plan.steps) {
      Communicator& g = groups.along(step.mesh_dim);
      std::optional<Tensor<T>> y;
      if (over) y = over(groups, g, step, x);
      x = y ? std::move(*y) : execute_step(g, step, std::move(x));
    }
    return x;
  };
  return impl;
}

RedistributeImpl make(std::string name, std::string description, PlanEdit edit,
                      StepOverride over = {}, bool accept_partial_op_change = false) {
  return make_of<double>(std::move(name), std::move(description), std::move(edit), std::move(over),
                         accept_partial_op_change);
}

// Partial(avg) steps reduced with sum: the division by the group size forgotten.
void forget_avg_division(RedistributePlan& plan) {
  for (auto& s : plan.steps) {
    if (s.from.is_partial() && s.from.reduce_op() == ReduceOp::avg) {
      s.from = Placement::partial(ReduceOp::sum);
    }
  }
}

bool is_reduction(const RedistributeStep& s) {
  return s.kind == Kind::all_reduce || s.kind == Kind::reduce_scatter;
}

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

// Piece `index` of `x` cut along the step's target dimension by `policy` into p parts.
Tensor<double> slice_piece(const Tensor<double>& x, const RedistributeStep& s,
                           const SplitPolicy& policy, int index, int p) {
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
  Tensor<double> y(block);
  detail::copy_block(x.data(), have, off, y.data(), block, Shape(block.size(), 0), block);
  return y;
}

}  // namespace

RedistributeImpl library_redistribute() { return library_redistribute_of<double>(); }

std::vector<RedistributeImpl> redistribute_mutants() {
  std::vector<RedistributeImpl> m;
  m.push_back(
      make("uneven-gather-keeps-padding",
           "pads every piece to the largest before an equal-count all_gather (as NCCL needs) and "
           "forgets to drop the padding: the gathered rows are shifted and the last ones lost",
           {},
           [](const MeshGroups&, Communicator& g, const RedistributeStep& s,
              const Tensor<double>& x) -> std::optional<Tensor<double>> {
             if (s.kind != Kind::all_gather) return std::nullopt;
             const std::size_t most = *std::max_element(s.counts.begin(), s.counts.end());
             auto send = detail::to_d_major(x, s.from.dim());
             send.resize(most, 0.0);
             std::vector<double> recv(most * static_cast<std::size_t>(g.size()));
             g.all_gather(std::span<const double>(send), std::span<double>(recv));
             recv.resize(numel(s.after));
             return detail::from_d_major(std::span<const double>(recv), s.after, s.from.dim());
           }));
  m.push_back(make("gathered-size-as-local-times-p",
                   "infers every rank's piece of an all_gather as its own size (global = local "
                   "x P): right for even splits only",
                   [](RedistributePlan& plan) {
                     for (auto& s : plan.steps) {
                       if (s.kind != Kind::all_gather) continue;
                       // Every rank believes all pieces have its own count.
                       const std::size_t mine = numel(s.before);
                       for (auto& c : s.counts) c = mine;
                     }
                   }));
  m.push_back(make("nested-shards-gathered-outer-first",
                   "undoes nested shards of one tensor dimension outermost first, so the inner "
                   "pieces are concatenated as if the outer cut came last",
                   [](RedistributePlan& plan) {
                     // Reverse the leading run of all_gathers (the library gathers innermost
                     // first); shapes and counts stay as planned for the right order.
                     std::size_t n = 0;
                     while (n < plan.steps.size() && plan.steps[n].kind == Kind::all_gather) ++n;
                     std::reverse(plan.steps.begin(),
                                  plan.steps.begin() + static_cast<std::ptrdiff_t>(n));
                   }));
  m.push_back(make("partial-op-change-is-a-no-op",
                   "accepts P(sum) -> P(avg) (or any other change of reduce op) and only "
                   "relabels the pieces, which changes the tensor they stand for",
                   {}, {}, /*accept_partial_op_change=*/true));
  m.push_back(make("avg-reduced-as-sum",
                   "reduces Partial(avg) with sum (the 1/P forgotten): P(avg) -> R and "
                   "P(avg) -> S come out P times too large",
                   forget_avg_division));
  m.push_back(make("replicate-to-partial-sum-keeps-value-everywhere",
                   "R -> P(sum) leaves the value on every rank, so the sum is P times the tensor",
                   [](RedistributePlan& plan) {
                     std::erase_if(plan.steps,
                                   [](const auto& s) { return s.kind == Kind::keep_on_first; });
                   }));
  m.push_back(
      make("gather-along-wrong-dimension",
           "concatenates the all_gather's pieces along the next tensor dimension instead of the "
           "sharded one",
           {},
           [](const MeshGroups&, Communicator& g, const RedistributeStep& s,
              const Tensor<double>& x) -> std::optional<Tensor<double>> {
             if (s.kind != Kind::all_gather || s.before.size() < 2) return std::nullopt;
             const std::size_t d = s.from.dim();
             const std::size_t wrong = (d + 1) % s.before.size();
             // The data are packed along the wrong axis, then unpacked as if along d.
             const auto send = detail::to_d_major(x, wrong);
             std::vector<double> recv(numel(s.after));
             g.all_gather(std::span<const double>(send), std::span<double>(recv), s.counts);
             return detail::from_d_major(std::span<const double>(recv), s.after, d);
           }));
  m.push_back(
      make("slice-by-world-rank",
           "R -> S slices by the world rank (mod the group size) instead of the rank's coordinate "
           "on that mesh dimension: right on a 1-D mesh, wrong on a sub-mesh",
           {},
           [](const MeshGroups& groups, Communicator& g, const RedistributeStep& s,
              const Tensor<double>& x) -> std::optional<Tensor<double>> {
             if (s.kind != Kind::local_slice) return std::nullopt;
             return slice_piece(x, s, s.to.policy(), groups.world().rank() % g.size(), g.size());
           }));
  m.push_back(
      make("split-policy-ignored",
           "R -> S cuts by torch.chunk whatever the target's split policy: balanced and explicit "
           "splits come out with the wrong sizes in the wrong places",
           {},
           [](const MeshGroups&, Communicator& g, const RedistributeStep& s,
              const Tensor<double>& x) -> std::optional<Tensor<double>> {
             if (s.kind != Kind::local_slice) return std::nullopt;
             return slice_piece(x, s, SplitPolicy::chunk(), g.rank(), g.size());
           }));
  return m;
}

template <class T>
std::vector<BasicRedistributeImpl<T>> reduction_mutants() {
  std::vector<BasicRedistributeImpl<T>> m;
  m.push_back(make_of<T>("avg-reduced-as-sum",
                         "reduces Partial(avg) with sum (the 1/P forgotten): P(avg) -> R and "
                         "P(avg) -> S come out P times too large",
                         forget_avg_division));
  if constexpr (!std::is_same_v<T, bfloat16>) {
    // For bfloat16 itself the rounding is the identity: no mutant there.
    m.push_back(make_of<T>(
        "reduction-in-bfloat16",
        "rounds every term to bfloat16 before all_reduce / reduce_scatter (a lower precision "
        "than the element type, as a communication-compression bug would): exact for small "
        "integers, wrong by up to 2^-9 relative for real values",
        {},
        [](const MeshGroups&, Communicator& g, const RedistributeStep& s,
           const Tensor<T>& x) -> std::optional<Tensor<T>> {
          if (!is_reduction(s)) return std::nullopt;
          Tensor<T> y = x;
          for (auto& v : y.values()) {
            v = static_cast<T>(static_cast<float>(bfloat16(static_cast<float>(v))));
          }
          return execute_step(g, s, std::move(y));
        }));
  }
  m.push_back(make_of<T>(
      "reduction-loses-two-bits",
      "every reduced element comes out rounded to two bits fewer than the element type (an "
      "accumulator or wire format 2 bits short): within 4 units of the last place, so only a "
      "bound tighter than that catches it",
      {},
      [](const MeshGroups&, Communicator& g, const RedistributeStep& s,
         const Tensor<T>& x) -> std::optional<Tensor<T>> {
        if (!is_reduction(s)) return std::nullopt;
        Tensor<T> y = execute_step(g, s, x);
        for (auto& v : y.values()) v = round_to_bits(v, std::numeric_limits<T>::digits - 2);
        return y;
      }));
  return m;
}

template std::vector<BasicRedistributeImpl<double>> reduction_mutants<double>();
template std::vector<BasicRedistributeImpl<float>> reduction_mutants<float>();
template std::vector<BasicRedistributeImpl<bfloat16>> reduction_mutants<bfloat16>();
template std::vector<BasicRedistributeImpl<float16>> reduction_mutants<float16>();

}  // namespace shardcheck::layout_test
