// redistribute in rounding arithmetic, in every element type the runtime reduces (float64,
// float32, bfloat16, float16), with random real values: materialize(redistribute(x, t)) equals
// materialize(x) bit for bit when only data moves, and within an a-priori bound when Partial
// terms are reduced. (redistribute_props.cpp checks the same identity with small integers in
// float64, where every reduction is exact, plus the ledger, round trips and refusals.)
//
// Cases: 1-D to 3-D meshes (sizes 1 to 3), shapes of 1 to 3 dimensions (sizes 0 to 6), split
// policies chunk, balanced and explicit (uneven, zeros included), the reduce ops sum, avg, max
// and min. Values: genTensor's unit and wide profiles (every binade of T, subnormals included;
// no NaN or inf in a reduction), the largest exponent chosen so that no partial sum of up to 27
// terms can overflow (wide_max_exp). Data movement also runs the special profile (NaN, ±inf,
// -0, subnormals): they must travel bit for bit.
//
//   data movement   every Partial of genCase() replaced by R: S -> R, R -> S, S(i) -> S(j)
//                   (all_to_all or gather-then-slice), nested shards. The materialized target
//                   must be bit-identical to x, and every replica bit-identical.
//   reductions      one mesh dimension of size >= 2 is Partial(op) in the source and mostly R
//                   or S(d) in the target (P -> R all_reduce, P -> S reduce_scatter); the others
//                   are any valid pair, so several Partial dimensions, R -> P and multi-step
//                   plans occur. Each rank's Partial term is an arbitrary tensor of T. The
//                   expected global is op over the source terms, in hp (reference/precision.hpp).
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
//                                source, not in the target, size > 1), and for avg in
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
// got is the target layout materialized (lib/layout/materialize_mesh.hpp) with the terms of the
// target's own Partial dimensions reduced in hp, as the reference does. Both hp reductions round
// (113 bits): every bound adds 4·gamma_n(u_hp)·A, which also covers evaluating the bound in hp.
// Measured |err|/bound per dtype: docs/layout.md; the program prints the worst of a run at exit.
//
// Teeth: redistribute_bounds_mutants.every_reduction_mutant_is_killed runs the reduction
// property against layout_test::reduction_mutants<T>() (redistribute_mutants.cpp) in each type.
#include "generators/values.hpp"
#include "layout/materialize_mesh.hpp"
#include "layout/redistribute.hpp"
#include "layout_test_support.hpp"
#include "redistribute_cases.hpp"
#include "redistribute_impl.hpp"
#include "reference/precision.hpp"
#include "runtime/launcher.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace shardcheck {
namespace {

using layout_test::BasicRedistributeImpl;
using layout_test::Case;
using layout_test::genCase;
using layout_test::genPlacement;
using layout_test::kMeshNames;
using layout_test::library_redistribute_of;
using reference::hp;

// The largest binade of the wide profile: 27 terms (3 x 3 x 3 Partial) of magnitude below
// 2^(e+1) sum to less than T's largest finite value, in any order and after rounding.
template <class T>
constexpr int wide_max_exp() {
  if constexpr (std::is_same_v<T, float16>) return 10;  // 27·2^11 = 55296 < 65504
  else if constexpr (std::is_same_v<T, double>) return 1000;
  else return 100;  // float32, bfloat16: max ≈ 2^128
}

template <class T>
std::string dtype_name() {
  return std::string(name(dtype_of<T>));
}

// ---------------------------------------------------------------- worst |err|/bound of a run

struct Worst {
  double ratio = 0;
  std::size_t elements = 0;  // elements compared under a nonzero bound (sum, avg)
  std::size_t cases = 0;
  std::string where;
};
// [float64, float32, bfloat16, float16][sum, avg]
Worst g_worst[4][2];

template <class T>
Worst* worst_of() {
  if constexpr (std::is_same_v<T, double>) return g_worst[0];
  else if constexpr (std::is_same_v<T, float>) return g_worst[1];
  else if constexpr (std::is_same_v<T, bfloat16>) return g_worst[2];
  else return g_worst[3];
}

// Printed when the program ends (defined after g_worst, so destroyed before it).
struct WorstReport {
  WorstReport() = default;
  WorstReport(const WorstReport&) = delete;
  WorstReport& operator=(const WorstReport&) = delete;
  WorstReport(WorstReport&&) = delete;
  WorstReport& operator=(WorstReport&&) = delete;
  ~WorstReport() {
    const char* names[] = {"float64", "float32", "bfloat16", "float16"};
    for (int i = 0; i < 8; ++i) {
      const Worst& w = g_worst[i / 2][i % 2];
      if (w.cases == 0) continue;
      std::printf(
          "redistribute_bounds %-8s %s worst |err|/bound %.3g over %zu elements of %zu cases%s%s\n",
          names[i / 2], i % 2 == 0 ? "sum" : "avg", w.ratio, w.elements, w.cases,
          w.where.empty() ? "" : " at ", w.where.c_str());
    }
  }
};
WorstReport g_report;

// ---------------------------------------------------------------- cases and pieces

// The choices below are drawn with element / weightedElement, which do not depend on
// RapidCheck's size: inRange does (at small sizes it yields the low end of its range only), and
// the early cases would all be 1-D meshes of size 2 going P -> P.

// A size 0 to 6, mostly nonzero (an empty tensor checks nothing about rounding).
rc::Gen<std::size_t> genExtent() {
  return rc::gen::weightedElement<std::size_t>(
      {{1, 0}, {2, 1}, {2, 2}, {2, 3}, {2, 4}, {2, 5}, {2, 6}});
}

// One mesh dimension j of size >= 2 goes from P(op) to R or S(d) (to P(op) one time in six);
// every other dimension is a valid pair as in genCase().
rc::Gen<Case> genReductionCase() {
  return rc::gen::exec([] {
    Case c;
    const auto n = *rc::gen::element<std::size_t>(1, 2, 3);
    const auto names = *rc::gen::elementOf(std::vector<std::vector<int>>{
        {0, 1, 2}, {0, 1, 3}, {0, 2, 3}, {1, 2, 3}, {3, 2, 1}, {2, 0, 3}, {1, 3, 0}});
    const auto j = *rc::gen::element<std::size_t>(0, 1, 2) % n;
    std::vector<MeshDim> dims;
    for (std::size_t i = 0; i < n; ++i) {
      const int size = i == j ? *rc::gen::element(2, 3) : *rc::gen::element(1, 2, 3);
      dims.push_back({kMeshNames[names[i]], size});
    }
    c.mesh = DeviceMesh(dims);
    const auto nd = *rc::gen::element<std::size_t>(1, 2, 3);
    c.global = *rc::gen::container<Shape>(nd, genExtent());
    c.op = *rc::gen::weightedElement<ReduceOp>(
        {{2, ReduceOp::sum}, {2, ReduceOp::avg}, {1, ReduceOp::max}, {1, ReduceOp::min}});
    for (std::size_t i = 0; i < n; ++i) {
      if (i == j) {
        c.from.push_back(Placement::partial(c.op));
        const bool stays = *rc::gen::weightedElement<bool>({{1, true}, {5, false}});
        c.to.push_back(stays ? Placement::partial(c.op) : *genPlacement(nd, c.op, false));
        continue;
      }
      const auto f = *genPlacement(nd, c.op, true);
      auto t = *genPlacement(nd, c.op, !f.is_shard());
      if (*rc::gen::weightedElement<bool>({{1, true}, {3, false}})) t = f;
      c.from.push_back(f);
      c.to.push_back(t);
    }
    layout_test::add_explicit_splits(c.from, c.mesh, c.global);
    layout_test::add_explicit_splits(c.to, c.mesh, c.global);
    return c;
  });
}

// The number of Partial terms of `layout` (row-major over its Partial mesh dimensions, as
// materialize_mesh.hpp numbers them).
std::size_t term_count(const DeviceMesh& mesh, const std::vector<Placement>& layout) {
  std::size_t n = 1;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    if (layout[i].is_partial()) n *= static_cast<std::size_t>(mesh.size(i));
  }
  return n;
}

// Each rank's piece under `layout` of the global term its Partial coordinates select.
template <class T>
std::vector<Tensor<T>> pieces_of_terms(const std::vector<Tensor<T>>& terms, const Case& c,
                                       const std::vector<Placement>& layout) {
  std::vector<Tensor<T>> pieces;
  for (int r = 0; r < c.mesh.world_size(); ++r) {
    const auto co = c.mesh.coordinates(r);
    std::size_t t = 0;
    for (std::size_t i = 0; i < layout.size(); ++i) {
      if (!layout[i].is_partial()) continue;
      t = t * static_cast<std::size_t>(c.mesh.size(i)) + static_cast<std::size_t>(co[i]);
    }
    const auto piece = local_piece(c.global, c.mesh, layout, co);
    Tensor<T> out(piece.shape);
    detail::copy_block(terms.at(t).data(), c.global, piece.offset, out.data(), piece.shape,
                       Shape(piece.shape.size(), 0), piece.shape);
    pieces.push_back(std::move(out));
  }
  return pieces;
}

template <class T>
std::vector<Tensor<T>> run_impl(const Case& c, const std::vector<Tensor<T>>& in,
                                const BasicRedistributeImpl<T>& impl) {
  std::vector<Tensor<T>> out(in.size());
  run(c.mesh.world_size(), [&](Communicator& world) {
    MeshGroups groups(world, c.mesh);
    const auto r = static_cast<std::size_t>(world.rank());
    out[r] = impl.run(groups, in[r], c.global, c.from, c.to);
  });
  return out;
}

// The step kinds of rank 0's plan, for the case statistics.
void classify_steps(const Case& c, DType dtype) {
  std::set<std::string> kinds;
  std::size_t reductions = 0;
  std::size_t steps = 0;
  try {
    const auto plan =
        plan_redistribute(c.global, dtype, c.mesh, c.from, c.to, c.mesh.coordinates(0));
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

// ---------------------------------------------------------------- data movement, bitwise

template <class T>
void check_movement(const BasicRedistributeImpl<T>& impl) {
  auto c = *genCase();
  for (auto* layout : {&c.from, &c.to}) {
    for (auto& p : *layout) {
      if (p.is_partial()) p = Placement::replicate();
    }
  }
  const auto profile =
      *rc::gen::element(gen::Profile::unit, gen::Profile::wide, gen::Profile::special);
  RC_CLASSIFY(true, gen::to_string(profile));
  classify_steps(c, dtype_of<T>);
  const auto x = *gen::genTensor<T>(c.global, profile, wide_max_exp<T>());
  const auto out = run_impl(c, pieces_of_terms(std::vector<Tensor<T>>{x}, c, c.from), impl);
  const auto m = materialize(out, c.mesh, c.to, c.global);
  RC_ASSERT(m.divergent_ranks.empty());
  RC_ASSERT(bit_equal(m.global(), x));
}

// ---------------------------------------------------------------- reductions, bounded

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

std::string show(const hp& v) {
  std::ostringstream os;
  os.precision(17);
  os << static_cast<double>(v);
  return os.str();
}

// record: nullptr, or the worst-ratio slots {sum, avg} of T.
template <class T>
void check_reductions(const BasicRedistributeImpl<T>& impl, Worst* record) {
  const auto c = *genReductionCase();
  const auto profile = *rc::gen::element(gen::Profile::unit, gen::Profile::wide);
  RC_CLASSIFY(true, std::string(name(c.op)) + ", " + gen::to_string(profile));
  classify_steps(c, dtype_of<T>);
  const std::size_t n = term_count(c.mesh, c.from);
  std::vector<Tensor<T>> terms;
  for (std::size_t t = 0; t < n; ++t) {
    terms.push_back(*gen::genTensor<T>(c.global, profile, wide_max_exp<T>()));
  }
  const auto out = run_impl(c, pieces_of_terms(terms, c, c.from), impl);
  const auto m = materialize(out, c.mesh, c.to, c.global);
  if (!m.divergent_ranks.empty()) {
    RC_FAIL("rank " + std::to_string(m.divergent_ranks[0]) +
            "'s replica differs in some bit from the replica it must equal");
  }
  const auto got = reduce_in_hp(m.terms, m.reduce_op);
  const auto exact = reduce_in_hp(terms, std::optional<ReduceOp>(c.op));

  // a, k: the additions and divisions in T on an element's path (see the header).
  std::size_t a = 0;
  std::size_t k = 0;
  for (std::size_t i = 0; i < c.mesh.ndim(); ++i) {
    if (c.from[i].is_partial() && !c.to[i].is_partial() && c.mesh.size(i) > 1) {
      a += static_cast<std::size_t>(c.mesh.size(i) - 1);
      ++k;
    }
  }
  const auto f = reference::format_of<T>();
  const hp u = reference::unit_roundoff<hp>(f);
  const hp eta = reference::smallest_subnormal<hp>(f);
  const hp slack_factor = 4 * reference::gamma<hp>(n, reference::unit_roundoff_of<hp>());
  hp rel = 0;  // the factor of A (sum) or A/n (avg)
  if (c.op == ReduceOp::sum) rel = reference::gamma<hp>(a, u);
  if (c.op == ReduceOp::avg) rel = reference::gamma<hp>(a + k, u);

  Worst* w = record == nullptr       ? nullptr
             : c.op == ReduceOp::sum ? &record[0]
             : c.op == ReduceOp::avg ? &record[1]
                                     : nullptr;
  if (w != nullptr) ++w->cases;
  using std::abs;
  for (std::size_t e = 0; e < exact.size(); ++e) {
    hp abs_sum = 0;
    for (const auto& t : terms) abs_sum += abs(reference::to_hp(t.data()[e]));
    hp bound = 0;  // max, min: exact
    if (c.op == ReduceOp::sum) bound = rel * abs_sum + slack_factor * abs_sum;
    if (c.op == ReduceOp::avg) {
      bound = rel * abs_sum / hp(n) + hp(k) * eta + slack_factor * abs_sum;
    }
    const hp err = abs(got[e] - exact[e]);
    if (!(err <= bound)) {
      RC_FAIL(dtype_name<T>() + " element " + std::to_string(e) + ": got " + show(got[e]) +
              ", exact " + show(exact[e]) + ", |err| " + show(err) + " > bound " + show(bound) +
              " (n = " + std::to_string(n) + " terms, a = " + std::to_string(a) +
              " additions, k = " + std::to_string(k) + " divisions, sum|terms| " + show(abs_sum) +
              ")");
    }
    if (w != nullptr && bound > 0) {
      ++w->elements;
      const double ratio = static_cast<double>(err / bound);
      if (ratio > w->ratio) {
        std::ostringstream os;
        os << c << ", " << name(c.op) << ", " << gen::to_string(profile);
        w->ratio = ratio;
        w->where = os.str();
      }
    }
  }
}

// ---------------------------------------------------------------- properties

RC_GTEST_PROP(redistribute_bounds, float64_data_movement_is_bitwise, ()) {
  check_movement(library_redistribute_of<double>());
}
RC_GTEST_PROP(redistribute_bounds, float32_data_movement_is_bitwise, ()) {
  check_movement(library_redistribute_of<float>());
}
RC_GTEST_PROP(redistribute_bounds, bfloat16_data_movement_is_bitwise, ()) {
  check_movement(library_redistribute_of<bfloat16>());
}
RC_GTEST_PROP(redistribute_bounds, float16_data_movement_is_bitwise, ()) {
  check_movement(library_redistribute_of<float16>());
}

RC_GTEST_PROP(redistribute_bounds, float64_reductions_are_within_the_bound, ()) {
  check_reductions(library_redistribute_of<double>(), worst_of<double>());
}
RC_GTEST_PROP(redistribute_bounds, float32_reductions_are_within_the_bound, ()) {
  check_reductions(library_redistribute_of<float>(), worst_of<float>());
}
RC_GTEST_PROP(redistribute_bounds, bfloat16_reductions_are_within_the_bound, ()) {
  check_reductions(library_redistribute_of<bfloat16>(), worst_of<bfloat16>());
}
RC_GTEST_PROP(redistribute_bounds, float16_reductions_are_within_the_bound, ()) {
  check_reductions(library_redistribute_of<float16>(), worst_of<float16>());
}

// Every reduction mutant is killed by the reduction property in every type it applies to.
template <class T>
void expect_reduction_mutants_killed() {
  for (const auto& m : layout_test::reduction_mutants<T>()) {
    const bool killed = !rc::check(m.name + " (" + dtype_name<T>() + "): within the bound",
                                   [&] { check_reductions<T>(m, nullptr); });
    EXPECT_TRUE(killed) << m.name << " (" << dtype_name<T>() << ") SURVIVED: " << m.description;
    std::printf("%-40s %-8s %s\n", m.name.c_str(), dtype_name<T>().c_str(),
                killed ? "killed by reductions_are_within_the_bound" : "SURVIVED");
  }
}

TEST(redistribute_bounds_mutants, every_reduction_mutant_is_killed) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "mutant kills are checked by the default preset";
#endif
  expect_reduction_mutants_killed<double>();
  expect_reduction_mutants_killed<float>();
  expect_reduction_mutants_killed<bfloat16>();
  expect_reduction_mutants_killed<float16>();
}

}  // namespace
}  // namespace shardcheck
