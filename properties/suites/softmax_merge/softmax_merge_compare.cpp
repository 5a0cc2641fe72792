// softmax_merge as a case on disk (docs/case-format.md, compare/compare.hpp): n partials of the
// same rows merged by their log-sum-exp, as ops/softmax_merge/softmax_merge_spec.cpp declares
// the op. The config is empty ({}: the op takes no fields), the sizes parts, rows, width, no
// mesh (one rank: the merge moves no data); the dtype is the partials' element type A, float64
// or float32 (the attention kernel's accumulator: a bfloat16 attention's partials are float32).
//
//   inputs   out_parts [parts, rows, width], lse_parts [parts, rows]: partial j's out and lse
//            (row layout; attention's out [batch, L, h, d] and lse [batch, h, L] are the rows
//            (b, t, i) = out[b, t, i, :] with lse[b, i, t]); an empty partial has lse −inf and
//            its out may hold anything (docs/softmax_merge.md, "Conventions")
//   outputs  out [rows, width], lse [rows], each optional, global or one file (R, one rank)
//
// The reference is the exact merge of the case's partials taken as exact A values; the bound is
// reference/softmax_merge's for a merge in A of those inputs. A case may declare how its merge
// evaluates ("contract"): "nway" (one max, one sum, one rounding of the lse: the library's
// softmax_merge) or "two_way_tree" (any tree of two-way steps: a ring's chain of online merges
// from the first partial or from the identity, a pairwise reduction;
// reference/softmax_merge/softmax_merge_tree.hpp). Without it each element's bound is the larger
// of the two, which covers both. The signatures are the suite's mutants (softmax_merge_mutants).
#include "compare/compare.hpp"
#include "ops/softmax_merge/softmax_merge_spec.hpp"
#include "reference/softmax_merge/softmax_merge.hpp"
#include "suites/softmax_merge/softmax_merge_expected.hpp"
#include "suites/softmax_merge/softmax_merge_impl.hpp"
#include "suites/softmax_merge/softmax_merge_mutants.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace shardcheck::check {

// The merge's evaluation order, as the case declares it (its "contract").
enum class MergeContract { either, nway, two_way_tree };

// One case on disk: the sizes of the spec and the declared contract.
struct MergeCompareCase {
  DType dtype = DType::float64;
  int world = 1;
  std::size_t parts = 0, rows = 0, width = 0;
  MergeContract contract = MergeContract::either;

  // "parts=3 rows=4 width=2"
  std::string describe() const {
    return "parts=" + std::to_string(parts) + " rows=" + std::to_string(rows) +
           " width=" + std::to_string(width);
  }
};

// The partials of the case, in A.
template <class A>
struct MergeCompareData {
  std::vector<SoftmaxPartial<A>> parts;
};

// The merged partial, as the one rank returned it (outputs[0]).
template <class A>
struct MergeCompareRun {
  std::vector<SoftmaxPartial<A>> outputs;
};

struct MergeCompareExpected {
  ExpectedTensor out, lse;
};

namespace {

constexpr const char* kNwayWords =
    "one max, one sum and one rounding of the lse per row, as lib/ops/softmax_merge's n-way "
    "merge";
constexpr const char* kTreeWords =
    "any tree of two-way steps (a ring's chain of online merges, a pairwise reduction; "
    "reference/softmax_merge/softmax_merge_tree.hpp)";

template <class A>
constexpr bool is_merge_type = std::is_same_v<A, double> || std::is_same_v<A, float>;

reference::hp larger(const Tensor<reference::hp>& a, const Tensor<reference::hp>& b,
                     std::size_t i) {
  const reference::hp x = a.empty() ? reference::hp(0) : a[i];
  const reference::hp y = b.empty() ? reference::hp(0) : b[i];
  return x > y ? x : y;
}

// Each element's bound the larger of the n-way and the tree bound.
Rows either_bound(const Rows& nway, const Rows& tree) {
  Rows b = nway;
  b.out_err = Tensor<reference::hp>(nway.out.shape());
  b.lse_err = Tensor<reference::hp>(nway.lse.shape());
  for (std::size_t i = 0; i < b.out_err.size(); ++i) {
    b.out_err[i] = larger(nway.out_err, tree.out_err, i);
  }
  for (std::size_t i = 0; i < b.lse_err.size(); ++i) {
    b.lse_err[i] = larger(nway.lse_err, tree.lse_err, i);
  }
  return b;
}

}  // namespace

MergeCompareCase case_of(const cases::CaseManifest& m, MergeCompareCase* /*tag*/) {
  if (m.dtype != DType::float64 && m.dtype != DType::float32) {
    throw cases::CaseError(m.file + ": dtype: is " + std::string(name(m.dtype)) +
                           " but softmax_merge merges partials in the attention kernel's "
                           "accumulator, float64 or float32 (a bfloat16 or float16 attention's "
                           "out and lse partials are float32); give the partials' own type");
  }
  auto c = case_at_mesh<MergeCompareCase>(m);
  c.parts = m.size("parts");
  c.rows = m.size("rows");
  c.width = m.size("width");
  cases::Fields f = m.config;
  f.done();  // the op takes no config fields
  if (m.contract.empty()) {
    c.contract = MergeContract::either;
  } else if (m.contract == "nway") {
    c.contract = MergeContract::nway;
  } else if (m.contract == "two_way_tree") {
    c.contract = MergeContract::two_way_tree;
  } else {
    throw cases::CaseError(m.file + ": contract: is \"" + m.contract + "\" but " + m.op +
                           " knows \"nway\" (" + kNwayWords + ") and \"two_way_tree\" (" +
                           kTreeWords + "); omit the field for a bound that covers both");
  }
  return c;
}

std::optional<std::string> contract_words(const MergeCompareCase& c, DType t) {
  const std::string a(name(t));
  const std::string head = "the partials and the merge in " + a + ", exp and log within 1 ulp; ";
  switch (c.contract) {
    case MergeContract::nway:
      return head + "contract nway: " + kNwayWords + " (docs/softmax_merge.md)";
    case MergeContract::two_way_tree:
      return head + "contract two_way_tree: " + kTreeWords + " (docs/softmax_merge.md)";
    case MergeContract::either: break;
  }
  return head + "the n-way merge (" + kNwayWords + ") or " + kTreeWords +
         ": the larger bound (docs/softmax_merge.md)";
}

spec::OpSpec op_spec(const MergeCompareCase& c) {
  return softmax_merge_spec(c.parts, c.rows, c.width);
}

template <class A>
void read_tensors(CaseReader& r, const MergeCompareCase& c, MergeCompareData<A>& d,
                  MergeCompareRun<A>& run) {
  Tensor<A> out_parts, lse_parts;
  r.input("out_parts", out_parts);
  r.input("lse_parts", lse_parts);
  d.parts.clear();
  const std::size_t n = c.rows * c.width;
  for (std::size_t j = 0; j < c.parts; ++j) {
    SoftmaxPartial<A> p{Tensor<A>(Shape{c.rows, c.width}), Tensor<A>(Shape{c.rows})};
    std::copy_n(out_parts.data() + j * n, n, p.out.data());
    std::copy_n(lse_parts.data() + j * c.rows, c.rows, p.lse.data());
    d.parts.push_back(std::move(p));
  }
  r.output("out", run.outputs, &SoftmaxPartial<A>::out);
  r.output("lse", run.outputs, &SoftmaxPartial<A>::lse);
}

// The exact merge of the case's partials (taken as exact A values) and the bound of a merge in A
// of the declared form.
template <class A>
MergeCompareExpected expected(const MergeCompareCase& c, const MergeCompareData<A>& d) {
  if constexpr (is_merge_type<A>) {
    std::vector<Rows> given;
    given.reserve(d.parts.size());
    for (const auto& p : d.parts) given.push_back(exact_rows(p));
    const Rows value = exact_merge(given, c.rows, c.width);
    Rows bound;
    if (c.contract == MergeContract::nway) {
      bound = bounded_merge<A>(given, c.rows, c.width, MergeForm::nway);
    } else if (c.contract == MergeContract::two_way_tree) {
      bound = bounded_merge<A>(given, c.rows, c.width, MergeForm::two_way_tree);
    } else {
      bound = either_bound(bounded_merge<A>(given, c.rows, c.width, MergeForm::nway),
                           bounded_merge<A>(given, c.rows, c.width, MergeForm::two_way_tree));
    }
    return {expect_out(value, bound), expect_lse(value, bound)};
  } else {
    throw UsageError("softmax_merge: the merge runs in float64 or float32");
  }
}

// A signature (a mutant of the suite) run on the case's partials: its n-way merge().
template <class A>
MergeCompareRun<A> run_ranks(const SoftmaxMergeImplementation& impl, const MergeCompareCase& c,
                             const MergeCompareData<A>& d) {
  if constexpr (is_merge_type<A>) {
    MergeCompareRun<A> run;
    run.outputs.push_back(impl.merge(std::span<const SoftmaxPartial<A>>(d.parts), c.rows, c.width));
    return run;
  } else {
    throw UsageError("softmax_merge: the merge runs in float64 or float32");
  }
}

template <class A>
void check_outputs(CaseVerdict& v, const MergeCompareCase& c, const MergeCompareRun<A>& run,
                   const MergeCompareExpected& e) {
  const spec::OpSpec s = op_spec(c);
  const OutputChecks one{v, run.outputs, s};
  one("out", &SoftmaxPartial<A>::out, e.out);
  one("lse", &SoftmaxPartial<A>::lse, e.lse);
}

void register_softmax_merge_compare() {
  CompareRegistry::instance().add(
      "softmax_merge",
      compare_as<MergeCompareCase, MergeCompareData, MergeCompareRun, &softmax_merge_mutants>);
}

}  // namespace shardcheck::check
