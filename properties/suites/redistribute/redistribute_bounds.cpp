// The redistribute suite's checks in rounding arithmetic (redistribute_checks.hpp), in every
// element type the runtime reduces (float64, float32, bfloat16, float16), with random real values:
// materialize(redistribute(x, t)) equals materialize(x) bit for bit when only data moves, and
// within an a-priori bound when Partial terms are reduced.
//
// Values: genTensor's unit and wide profiles (every binade of T, subnormals included; no NaN or
// inf in a reduction), the largest exponent chosen so that no partial sum of up to 27 terms can
// overflow (wide_max_exp). Data movement also runs the special profile (NaN, ±inf, -0,
// subnormals): they must travel bit for bit.
//
// The reduction contract (lib/runtime/reduce_op.hpp; orders in lib/runtime/communicator.hpp):
// along a mesh dimension of size p, all_reduce and reduce_scatter combine an element's p terms
// with p − 1 additions in T, in the algorithm's order, each rounding once to T (bfloat16 and
// float16 add in float and round to T, which equals one rounding because 24 ≥ 2p + 2 bits:
// Figueroa 1995, see reference/bounds.hpp); avg then divides once by p in T; max and min pick
// an operand, exactly. The planner reduces one mesh dimension per step (redistribute.hpp), so
// an element is a summation tree over its n = Π p_i terms (i over the source's Partial mesh
// dimensions) in which each term takes part in at most
//   a = Σ_j (p_j − 1)  ≤ n − 1   additions, j over the dimensions reduced in T (Partial in the
//                                source, not in the target, size > 1; for an implementation
//                                that does not claim the library's plan, every Partial source
//                                dimension of size > 1: it may reduce one the target keeps
//                                Partial, through R and back), and for avg in
//   k = #j                       divisions.
// Per element, with x_t its source terms, A = Σ_t |x_t| and exact = op(x_t) evaluated in hp:
//   sum       |got − exact| ≤ gamma_a(u_T)·A
//             Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., §3.1 (3.4) and
//             §4.2: a sum in any order (any tree) is Σ_t x_t(1 + θ_t), |θ_t| ≤ gamma_{a_t},
//             a_t the additions x_t takes part in. An addition never underflows (a sum whose
//             result is subnormal is exact: Hauser, ACM TOPLAS 18(2), 1996).
//   avg       |got − exact| ≤ gamma_{a+k}(u_T)·A/n + k·eta_T
//             The same with one factor (1 + δ) more per division (Lemma 3.1). A division
//             whose result is subnormal errs by eta_T/2 absolute instead; later steps carry
//             such errors by sums then divisions by p (an average of them) and factors
//             ≤ 1 + gamma_{a+k} ≤ 2: at most eta_T per divided dimension.
//   max, min  got == exact (compared as numbers: +0 == -0)
// The bound holds for any order and any tree of the reductions, so it holds for an
// implementation that reduces another way than the library's plan, with the same additions per
// term. got is the target layout materialized (lib/layout/materialize_mesh.hpp) with the terms
// of the target's own Partial dimensions reduced in hp, as the reference does. Both hp
// reductions round (113 bits): every bound adds 4·gamma_n(u_hp)·A, which also covers evaluating
// the bound in hp. Measured |err|/bound per dtype: docs/layout.md.
#include "engine/tensor_check.hpp"
#include "engine/verdict.hpp"
#include "generators/values.hpp"
#include "layout/materialize_mesh.hpp"
#include "reference/precision.hpp"
#include "suites/redistribute/redistribute_checks.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <type_traits>

namespace shardcheck::check {
namespace {

using reference::hp;

// The largest binade of the wide profile: 27 terms (3 x 3 x 3 Partial) of magnitude below
// 2^(e+1) sum to less than T's largest finite value, in any order and after rounding.
// float16: 27·2^11 = 55296 < 65504; float32, bfloat16: max ≈ 2^128.
constexpr gen::MaxExp wide_max_exp{.float16 = 10, .bfloat16 = 100, .float32 = 100, .float64 = 1000};

// The step kinds of rank 0's plan, for the case statistics.
void classify_steps(const RedistributeCase& c) {
  std::set<std::string> kinds;
  std::size_t reductions = 0;
  std::size_t steps = 0;
  try {
    const auto plan =
        plan_redistribute(c.global, c.dtype, c.mesh, c.from, c.to, c.mesh.coordinates(0));
    steps = plan.steps.size();
    for (const auto& s : plan.steps) {
      kinds.insert(std::string(name(s.kind)));
      if (s.kind == RedistributeStep::Kind::all_reduce ||
          s.kind == RedistributeStep::Kind::reduce_scatter) {
        ++reductions;
      }
    }
  } catch (const UsageError&) {
  }
  for (const char* k : {"all_gather", "all_reduce", "reduce_scatter", "all_to_all", "local slice",
                        "keep on coordinate 0"}) {
    RC_CLASSIFY(kinds.count(k) != 0, k);
  }
  RC_CLASSIFY(steps >= 2, "multi-step plan");
  RC_CLASSIFY(reductions >= 2, "two or more reduction steps");
}

// op over the terms, elementwise, in hp; the first term when there is no op (no Partial).
template <class T>
std::vector<hp> reduce_in_hp(const std::vector<Tensor<T>>& terms, std::optional<ReduceOp> op) {
  std::vector<hp> out;
  for (const T& v : terms.at(0).values()) out.push_back(reference::to_hp(v));
  if (!op) return out;
  for (std::size_t t = 1; t < terms.size(); ++t) {
    for (std::size_t e = 0; e < out.size(); ++e) {
      const hp v = reference::to_hp(terms[t].data()[e]);
      switch (*op) {
        case ReduceOp::sum:
        case ReduceOp::avg: out[e] += v; break;
        case ReduceOp::max: out[e] = std::max(out[e], v); break;
        case ReduceOp::min: out[e] = std::min(out[e], v); break;
        case ReduceOp::product: out[e] *= v; break;
      }
    }
  }
  if (*op == ReduceOp::avg) {
    for (auto& v : out) v /= hp(terms.size());
  }
  return out;
}

// The comparison of the reduced global (got, in hp) with the exact reduction under `bound`, as
// a TensorCheck (what the report shows): the largest error and bound ratio, the worst element.
TensorCheck reduction_check(const RedistributeCase& c, const std::vector<hp>& got,
                            const std::vector<hp>& exact, const std::vector<hp>& bound) {
  TensorCheck t;
  t.name = "reduced global";
  t.placement = format_placements(c.to);
  t.dtype = c.dtype;
  t.shape = c.global;
  t.parts = c.mesh.world_size();
  double worst = -1;
  using std::abs;
  for (std::size_t e = 0; e < exact.size(); ++e) {
    const hp err = abs(got[e] - exact[e]);
    const auto err_d = static_cast<double>(err);
    const double ratio = bound[e] > 0 ? static_cast<double>(err / bound[e])
                         : err == 0   ? 0.0
                                      : std::numeric_limits<double>::infinity();
    t.max_abs_err = std::max(t.max_abs_err, err_d);
    t.max_ratio = std::max(t.max_ratio, ratio);
    if (ratio > 1) ++t.over_bound;
    if (ratio > worst) {
      worst = ratio;
      t.worst_index = detail::unravel(e, c.global);
      t.worst_actual = static_cast<double>(got[e]);
      t.worst_exact = static_cast<double>(exact[e]);
      t.worst_bound = static_cast<double>(bound[e]);
    }
  }
  return t;
}

}  // namespace

template <class T>
void check_movement(const RedistributeImplementation& impl, const RedistributeCase& c) {
  const auto profile =
      *rc::gen::element(gen::Profile::unit, gen::Profile::wide, gen::Profile::special);
  RC_CLASSIFY(true, gen::to_string(profile));
  classify_steps(c);
  const auto x = *gen::genTensor<T>(c.global, profile, wide_max_exp.of<T>());
  CaseVerdict v;
  begin_verdict(v, "redistribute", c.dtype, c.mesh.world_size(),
                c.describe() + ", " + gen::to_string(profile) + " values");
  try {
    const auto o = run_redistribute(impl, c, pieces_of_terms(std::vector<Tensor<T>>{x}, c, c.from),
                                    c.from, c.to);
    const auto m = materialize(o.pieces, c.mesh, c.to, c.global);
    if (!m.divergent_ranks.empty()) {
      v.failures.push_back("rank " + std::to_string(m.divergent_ranks[0]) +
                           "'s replica differs in some bit from the replica it must equal");
    } else if (auto diff = first_difference(m.global(), x); !diff.empty()) {
      v.failures.push_back("data movement changed a value: " + diff);
    }
  } catch (const std::exception& e) {
    v.failures.push_back(std::string("the case stopped with an exception: ") + e.what());
  }
  conclude(v);
}

template <class T>
void check_reductions(const RedistributeImplementation& impl, const RedistributeCase& c,
                      bool claims_plan) {
  const auto profile = *rc::gen::element(gen::Profile::unit, gen::Profile::wide);
  RC_CLASSIFY(true, std::string(name(c.op)) + ", " + gen::to_string(profile));
  classify_steps(c);
  const std::size_t n = term_count(c.mesh, c.from);
  std::vector<Tensor<T>> terms;
  for (std::size_t t = 0; t < n; ++t) {
    terms.push_back(*gen::genTensor<T>(c.global, profile, wide_max_exp.of<T>()));
  }
  // a, k: the additions and divisions in T on an element's path (see the header).
  std::size_t a = 0;
  std::size_t k = 0;
  for (std::size_t i = 0; i < c.mesh.ndim(); ++i) {
    if (c.from[i].is_partial() && (!claims_plan || !c.to[i].is_partial()) && c.mesh.size(i) > 1) {
      a += static_cast<std::size_t>(c.mesh.size(i) - 1);
      ++k;
    }
  }
  CaseVerdict v;
  begin_verdict(v, "redistribute", c.dtype, c.mesh.world_size(),
                c.describe() + ", " + gen::to_string(profile) +
                    " values, n = " + std::to_string(n) + " terms, a = " + std::to_string(a) +
                    " additions, k = " + std::to_string(k) + " divisions");
  try {
    const auto o = run_redistribute(impl, c, pieces_of_terms(terms, c, c.from), c.from, c.to);
    const auto m = materialize(o.pieces, c.mesh, c.to, c.global);
    if (!m.divergent_ranks.empty()) {
      v.failures.push_back("rank " + std::to_string(m.divergent_ranks[0]) +
                           "'s replica differs in some bit from the replica it must equal");
    } else {
      const auto got = reduce_in_hp(m.terms, m.reduce_op);
      const auto exact = reduce_in_hp(terms, std::optional<ReduceOp>(c.op));
      const auto f = reference::format_of<T>();
      const hp u = reference::unit_roundoff<hp>(f);
      const hp eta = reference::smallest_subnormal<hp>(f);
      const hp slack_factor = 4 * reference::gamma<hp>(n, reference::unit_roundoff_of<hp>());
      hp rel = 0;  // the factor of A (sum) or A/n (avg)
      if (c.op == ReduceOp::sum) rel = reference::gamma<hp>(a, u);
      if (c.op == ReduceOp::avg) rel = reference::gamma<hp>(a + k, u);
      std::vector<hp> bound(exact.size(), hp(0));  // max, min: exact
      using std::abs;
      for (std::size_t e = 0; e < exact.size(); ++e) {
        hp abs_sum = 0;
        for (const auto& t : terms) abs_sum += abs(reference::to_hp(t.data()[e]));
        if (c.op == ReduceOp::sum) bound[e] = rel * abs_sum + slack_factor * abs_sum;
        if (c.op == ReduceOp::avg) {
          bound[e] = rel * abs_sum / hp(n) + hp(k) * eta + slack_factor * abs_sum;
        }
      }
      v.tensors.push_back(reduction_check(c, got, exact, bound));
    }
  } catch (const std::exception& e) {
    v.failures.push_back(std::string("the case stopped with an exception: ") + e.what());
  }
  conclude(v);
}

#define SHARDCHECK_DETAIL_REDISTRIBUTE_BOUNDS(T)                                                \
  template void check_movement<T>(const RedistributeImplementation&, const RedistributeCase&);  \
  template void check_reductions<T>(const RedistributeImplementation&, const RedistributeCase&, \
                                    bool);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_DETAIL_REDISTRIBUTE_BOUNDS)
#undef SHARDCHECK_DETAIL_REDISTRIBUTE_BOUNDS

}  // namespace shardcheck::check
