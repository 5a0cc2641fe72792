// The softmax_merge suite: the merge of attention partials
// (lib/ops/softmax_merge/softmax_merge.hpp) against the full softmax and the exact merge in high
// precision, under the a-priori bounds of reference/softmax_merge/softmax_merge.hpp, for any
// partition of the keys, any order of the partials, nested merges, the two-way chain a
// context-parallel ring runs, and the special-value conventions.
#include "suites/softmax_merge/softmax_merge_suite.hpp"

#include "engine/family.hpp"
#include "engine/verdict.hpp"
#include "suites/softmax_merge/softmax_merge_case.hpp"
#include "suites/softmax_merge/softmax_merge_expected.hpp"
#include "suites/softmax_merge/softmax_merge_mutants.hpp"

#include <rapidcheck.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace shardcheck::check {
namespace {

// Each property is a check of its own: which merge it runs and what it compares.
enum class MergeCheck { partition, permutation, associative, lse, ring_chain, special_values };

// The implementation's declared evaluation (ImplementationInfo::two_way_tree), found by its
// registry entry.
MergeForm form_of(const SoftmaxMergeImplementation& impl) {
  const auto* e = SoftmaxMergeRegistry::instance().entry_of(impl);
  return e != nullptr && e->info.two_way_tree ? MergeForm::two_way_tree : MergeForm::nway;
}

template <class A>
struct Checker {
  CaseVerdict& v;
  void operator()(const std::string& name, const Tensor<A>& actual, const ExpectedTensor& x) {
    v.tensors.push_back(check_tensor<A>(name, actual, x.value, x.bound, Placement::replicate(), 1));
  }
};

template <class A>
void check_both(Checker<A>& check, const std::string& prefix, const SoftmaxPartial<A>& got,
                const Rows& value, const Rows& bound) {
  check(prefix + "out", got.out, expect_out(value, bound));
  check(prefix + "lse", got.lse, expect_lse(value, bound));
}

template <class A>
void run_merge_property(MergeCheck property, const SoftmaxMergeImplementation& impl, MergeForm form,
                        const MergeCase& c, const MergeInputs<A>& in, Checker<A>& check) {
  const std::size_t rows = c.rows, width = c.width;
  const std::span<const SoftmaxPartial<A>> parts(in.parts);
  if (property == MergeCheck::partition || property == MergeCheck::lse) {
    const auto got = impl.merge(parts, rows, width);
    const Rows bound = bounded_merge<A>(in.rounded, rows, width, form);
    if (property == MergeCheck::partition) {
      check_both(check, "", got, in.full, bound);
    } else {
      check("lse", got.lse, expect_lse(in.full, bound));
    }
  } else if (property == MergeCheck::permutation) {
    std::vector<SoftmaxPartial<A>> permuted;
    for (const auto j : c.permutation) permuted.push_back(in.parts[j]);
    const Rows bound = bounded_merge<A>(in.exact_given, rows, width, form);
    const Rows value = exact_merge(in.exact_given, rows, width);
    check_both(check, "", impl.merge(parts, rows, width), value, bound);
    check_both(check, "permuted ", impl.merge(permuted, rows, width), value, bound);
  } else if (property == MergeCheck::associative) {
    std::vector<SoftmaxPartial<A>> results;
    std::vector<Rows> results_rows;
    for (std::size_t g = 0; g < c.groups; ++g) {
      std::vector<SoftmaxPartial<A>> sub;
      std::vector<Rows> sub_rows;
      for (std::size_t j = 0; j < c.parts; ++j) {
        if (c.group_of_part[j] != g) continue;
        sub.push_back(in.parts[j]);
        sub_rows.push_back(in.exact_given[j]);
      }
      auto got = impl.merge(sub, rows, width);
      const Rows bound = bounded_merge<A>(sub_rows, rows, width, form);
      check_both(check, "group " + std::to_string(g) + " ", got, exact_merge(sub_rows, rows, width),
                 bound);
      results_rows.push_back(reference::rows_of<reference::hp>(got.out, got.lse, &bound));
      results.push_back(std::move(got));
    }
    const auto got = impl.merge(results, rows, width);
    check_both(check, "", got, exact_merge(in.exact_given, rows, width),
               bounded_merge<A>(results_rows, rows, width, form));
  } else if (property == MergeCheck::ring_chain) {
    const std::size_t n = c.parts;
    std::vector<std::size_t> order;
    for (std::size_t k = 0; k < n; ++k) order.push_back((c.ring_start + n - k) % n);
    SoftmaxPartial<A> acc;
    Rows acc_rows;
    std::size_t first = 0;
    if (c.ring_from_empty) {
      acc = empty_softmax_partial<A>(rows, width);
      acc_rows = exact_rows(acc);
    } else {
      // The local partial as the attention kernel returns it: out 0 on its empty rows (the
      // partials received later keep whatever the case put there).
      acc = in.parts[order[0]];
      for (std::size_t i = 0; i < rows; ++i) {
        if (acc.lse[i] != -std::numeric_limits<A>::infinity()) continue;
        for (std::size_t e = 0; e < width; ++e) acc.out(i, e) = A(0);
      }
      acc_rows = exact_rows(acc);
      first = 1;
    }
    for (std::size_t k = first; k < n; ++k) {
      const Rows bound = bounded_merge<A>({acc_rows, in.exact_given[order[k]]}, rows, width);
      impl.merge_into(acc, in.parts[order[k]]);
      acc_rows = reference::rows_of<reference::hp>(acc.out, acc.lse, &bound);
    }
    check_both(check, "", acc, exact_merge(in.exact_given, rows, width), acc_rows);
    const auto nway = impl.merge(parts, rows, width);
    Rows nway_rows = reference::rows_of<reference::hp>(nway.out, nway.lse);
    const Rows nway_bound = bounded_merge<A>(in.exact_given, rows, width, form);
    nway_rows.out_err = nway_bound.out_err;
    nway_rows.lse_err = nway_bound.lse_err;
    check_both(check, "chain vs n-way ", acc, nway_rows, acc_rows);
  }
}

template <class A>
void run_typed(MergeCheck property, const SoftmaxMergeImplementation& impl, const MergeCase& c) {
  const MergeForm form = form_of(impl);
  CaseVerdict v;
  begin_verdict(v, property == MergeCheck::ring_chain ? "merge_into chain" : "softmax_merge",
                dtype_of<A>, static_cast<int>(c.parts), c.describe());
  Checker<A> check{v};
  if (property == MergeCheck::special_values) {
    const SpecialPartials<A> sp = *genSpecialPartials<A>(c);
    std::vector<SoftmaxPartial<A>> parts;
    std::vector<Rows> rows_in;
    for (std::size_t j = 0; j < sp.out.size(); ++j) {
      parts.push_back({sp.out[j], sp.lse[j]});
      rows_in.push_back(exact_rows(parts.back()));
    }
    v.world = static_cast<int>(parts.size());
    v.case_text += " special parts=" + std::to_string(parts.size());
    try {
      const auto got = impl.merge(parts, c.rows, c.width);
      check_both(check, "", got, exact_merge(rows_in, c.rows, c.width),
                 bounded_merge<A>(rows_in, c.rows, c.width, form));
    } catch (const std::exception& e) {
      v.failures.push_back(std::string("the case stopped with an exception: ") + e.what());
    }
    conclude(v);
    return;
  }
  const MergeData<A> d = *gen_data<A>(c);
  try {
    const MergeInputs<A> in = merge_inputs(c, d);
    run_merge_property(property, impl, form, c, in, check);
  } catch (const std::exception& e) {
    v.failures.push_back(std::string("the case stopped with an exception: ") + e.what());
  }
  conclude(v);
}

// Offsets and gaps up to ±1e30: every property but the one against the full softmax of rounded
// inputs (exp of such gaps is 0 or inf in any type).
void huge(MergeCaseOptions& o, const RunConfig&) { o.huge = true; }

struct SoftmaxMergeFamily
    : FamilyTypes<SoftmaxMergeImplementation, MergeCase, MergeCaseOptions, MergeCheck> {
  static constexpr FamilyInfo info = {
      "softmax_merge",
      "the softmax merge of attention partials (context-parallel attention's combine): n-way, "
      "nested, ring chains and special values",
      "the library's merge (lib/ops/softmax_merge/softmax_merge.hpp)"};

  static constexpr Row properties[] = {
      own_property(
          {"partition_matches_full_softmax",
           "merging the partials over ANY partition of the keys (contiguous or scattered parts, "
           "empty parts whose out holds 0, NaN or inf, masked keys, all-empty rows, score "
           "offsets up to ±1000 and gaps beyond exp's range), each partial rounded once to A, "
           "gives the full softmax's out and lse within the bound for rounded inputs",
           /*numeric=*/true},
          MergeCheck::partition),
      own_property({"permutation_invariant",
                    "merging the partials in any order gives the exact merge within the same "
                    "bound (inputs taken as exact A values; offsets and gaps up to 1e30)",
                    /*numeric=*/true},
                   MergeCheck::permutation, huge),
      own_property({"associative",
                    "merging the merges of any grouping of the partials (empty groups included) "
                    "gives the exact merge of all within the nested bound, and each group its "
                    "own within its bound",
                    /*numeric=*/true},
                   MergeCheck::associative, huge),
      own_property({"lse_matches_logsumexp",
                    "the merged lse equals the log-sum-exp of all scores (offsets and gaps up to "
                    "1e30) within the bound for rounded inputs",
                    /*numeric=*/true},
                   MergeCheck::lse, huge),
      own_property(
          {"ring_chain_matches_nway",
           "the two-way merge_into chain in ring order (rank r merges r, r-1, ..., r+1; the "
           "accumulator starting as the local partial, out 0 on its empty rows, or empty) "
           "equals the exact merge within the chain's bound, and the n-way merge within the sum "
           "of both bounds",
           /*numeric=*/true},
          MergeCheck::ring_chain, huge),
      own_property(
          {"special_value_conventions",
           "partials with lse -inf (whose out holds NaN or inf), NaN and +inf, NaN in a "
           "non-empty out, and zero partials: the result follows the documented conventions "
           "(empty: out 0, lse -inf; NaN lse: NaN; +inf lse: out NaN, lse +inf) and finite rows "
           "are within bound",
           /*numeric=*/true},
          MergeCheck::special_values, huge),
  };

  using Library = SoftmaxMergeAdapter<LibrarySoftmaxMerge>;
  static constexpr auto mutants = softmax_merge_mutants;

  // The merge runs in A = float64 or float32 (the attention kernel's accumulator).
  template <class Fn>
  static void visit_types(const Case& c, Fn&& fn) {
    if (c.dtype == DType::float64) {
      fn(double{});
    } else {
      fn(float{});
    }
  }
  template <class A>
  static void check_case(const Row& p, const Interface& impl, const Case& c) {
    run_typed<A>(p.own, impl, c);
  }
};

}  // namespace

void register_softmax_merge_suite() {
  register_family<SoftmaxMergeFamily>();
  SoftmaxMergeRegistry::instance().add_once(
      {.name = "chained-online",
       .description = "a correct merge as FlashAttention-style kernels run it: merge_into folded "
                      "from the identity over the partials in order (claims two_way_tree)",
       .two_way_tree = true},
      std::make_shared<const SoftmaxMergeAdapter<ChainedSoftmaxMerge>>());
}

}  // namespace shardcheck::check
