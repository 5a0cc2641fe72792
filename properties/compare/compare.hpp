// `shardcheck compare`'s engine: one case an outside implementation ran (a case directory,
// docs/case-format.md) judged by the op's own family exactly as its suite judges a run: the
// reference computed from the case's inputs, every output the case gives materialized by the
// op's spec and compared under the derived bound (engine/tensor_check.hpp says what a tensor's
// verdict holds: bound ratio, ulps, NaN/Inf placement, the worst element with its owning rank
// and distance to the shard boundary, and what assert_close's defaults would say).
//
// A family makes its ops comparable with two free functions beside its case type, found by
// argument-dependent lookup like the engine's other steps (engine/rank_family.hpp), and one
// registration (register_<family>_compare(), called by register_builtin_compares()):
//
//   Case case_of(const cases::CaseManifest&, Case*)    the case at the manifest's op, config,
//       sizes, mesh and dtype; every config field read through manifest.config (a field it does
//       not read is refused); the pointer is a tag and always null
//   template <class T> void read_tensors(CaseReader&, const Case&, Data<T>&, Run<T>&)
//       each input by name into the family's Data<T>, each output into the run's per-rank
//       outputs (CaseReader::output), as if the ranks had returned them
//
// and its check_outputs (engine/rank_family.hpp) declared in its headers, as compare_as below
// calls it.
#pragma once

#include "cases/case_manifest.hpp"
#include "compare/case_reader.hpp"
#include "engine/family.hpp"
#include "engine/rank_family.hpp"
#include "engine/verdict.hpp"
#include "tensor/tensor.hpp"

#include <algorithm>
#include <cstddef>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace shardcheck::check {

// A known bug signature the failing outputs match: one of the family's mutants (its realistic
// bugs, properties/suites/<family>/<family>_mutants.cpp) run on the case's own inputs. It
// matches a tensor when its values are within kDiagnosisResidual of the case's, in units of
// each element's bound (max over elements of |case − signature| / bound), and, where the case
// fails, that residual is at most 1/kDiagnosisShare of the case's bound ratio there. It is
// reported when it matches at least one tensor where the case fails and fails nowhere the case
// passes: a full match when it matches every tensor the case gives, a partial one otherwise
// (`unexplained`: PyTorch's bias on every rank, whose autograd also scales the bias gradient by
// P, partly matches bias-on-every-rank, which gets db right; a NumPy port with the top-left
// mask in its forward and backward partly matches cp-top-left-mask, whose backward differs).
struct Diagnosis {
  std::string signature;    // the mutant's name: "bias-on-every-rank"
  std::string description;  // the bug in words
  double residual = 0;      // over the matched tensors
  // The failing tensors of the case the signature explains (matches), the rank that owns the
  // case's worst element of the first of them (-1: replicated), and those it does not explain.
  std::vector<std::string> explained;
  std::vector<std::string> unexplained;
  int rank = -1;
};

// A signature matches when the case's outputs are within kDiagnosisResidual bounds of the
// signature's everywhere, and that residual is at most 1/kDiagnosisShare of the case's worst
// bound ratio (the signature accounts for all but a sliver of the error). Both are roundings of
// the same wrong formula, whose own rounding can exceed the correct formula's bound by a small
// factor (bias-on-every-rank adds P biases: 2.2 bounds measured against a NumPy port), while a
// signature of another bug is off by about the bug's size (1.4e7 bounds in the same case).
inline constexpr double kDiagnosisResidual = 16.0;
inline constexpr double kDiagnosisShare = 16.0;

// How large a case must be for its diagnosis to run on a cut-down case (docs/compare.md,
// "Diagnosis at real sizes"), and how much of it a cut keeps. `above` is in the family's own
// measure of a signature run's work, in multiply-adds of a linear signature's time (the linear
// layers: multiply-adds of one product, tokens × in × out; parallel_mlp: tokens × hidden × ffn;
// sequence_parallel_norm: tokens × hidden elements, the embedding tokens × hidden, the
// cross-entropy tokens × vocab, each times its measured cost per element in those
// multiply-adds); a family that cannot be cut safely has no diagnosis_cut and always runs the
// full case. A
// cut keeps about `rows` token rows and `columns` output features (a family says which
// dimensions), spread over the ranks' shards, always with every shard boundary's first and last
// two and the worst element of every tensor the case gives.
struct DiagnosisCutSize {
  double above = 1U << 30U;  // 14 linear signatures here take ~10 s (64 s each at 9.2e10)
  std::size_t rows = 64;
  std::size_t columns = 256;
};

// What a comparison may be told beyond the case: the tests lower the cut's threshold to force
// the cut-down path on moderate cases.
struct CompareOptions {
  DiagnosisCutSize cut;
};

// What the comparison of one case concluded.
struct CompareResult {
  std::string dir;             // the case's directory
  std::string implementation;  // from the manifest
  std::string contract;        // the arithmetic the bounds assumed, in words
  CaseVerdict verdict;         // op, dtype, world, case in words, one TensorCheck per output
  // The baseline's tensors (cases::CaseManifest::baseline), judged the same way, by name.
  std::string baseline_implementation;
  std::vector<TensorCheck> baseline;
  // The baseline's check of tensor `name`, or nullptr.
  const TensorCheck* baseline_of(const std::string& name) const;
  // When a tensor fails: the known signatures it matches, closest first ("no known signature"
  // when empty and signatures_tried > 0), and how many the family has.
  std::vector<Diagnosis> diagnosis;
  std::size_t signatures_tried = 0;
  // The cut-down case the signatures ran on, in words ("64 of 2048 tokens and 256 of 11008
  // output features, every shard boundary and the worst elements kept"); empty when they ran on
  // the whole case.
  std::string diagnosis_cut;
};

// max over elements of |a − b| / bound (a's bounds) for two checks of one tensor with kept
// values; 0 for two equal specials (NaN and NaN, the same infinity), inf for values of
// different classes, for an element over a zero bound, or when the shapes differ.
double element_residual(const TensorCheck& a, const TensorCheck& b);

// "matches bias-on-every-rank at rank 1 (residual 0.02 of the bound; fails in y, db): <what the
// bug is>" for each diagnosis, or "no known signature (of 17)"; empty when nothing failed. After
// a cut-down diagnosis the parenthesis ends with "; diagnosed on <diagnosis_cut>".
std::vector<std::string> diagnosis_lines(const CompareResult& r);

// The implementation's largest error over the baseline's (FlashAttention's tests pass a kernel
// at most 2x a same-dtype baseline's error): 1 when both are 0, inf when only the baseline's is.
double baseline_error_ratio(const TensorCheck& impl, const TensorCheck& baseline);

using CompareFn = std::function<CompareResult(const cases::CaseManifest&, const CompareOptions&)>;

// The ops `compare` knows, by op name.
class CompareRegistry {
 public:
  static CompareRegistry& instance();
  void add(const std::string& op, CompareFn fn);
  const CompareFn* find(const std::string& op) const;
  std::vector<std::string> ops() const;

 private:
  std::map<std::string, CompareFn> ops_;
};

// Registers every builtin family's ops (idempotent).
void register_builtin_compares();

// Judges the case `m`. @throws cases::CaseError (bad input: an unknown op, a config field the
// op does not take, a tensor of the wrong shape or type, a missing file) and UsageError from the
// op's spec (a config the op refuses: sizes that do not split).
CompareResult compare_case(const cases::CaseManifest& m, const CompareOptions& options = {});

// The contract every builtin bound assumes, in words (docs/compare.md): accumulation in
// `accumulate`, acc_t<T> (acc_dtype) unless the case declared another.
std::string default_contract(DType t, std::optional<DType> accumulate = std::nullopt);

// A family whose contracts take parameters (the manifest's "contract" as an object,
// CaseManifest::contract_options) defines, beside its case type, `bool
// reads_contract_options(const Case*)` returning true, and its case_of reads them and refuses
// unknown ones. This fallback, for the others, says they take none: compare_as refuses any field
// of the object but "name".
template <class Case>
constexpr bool reads_contract_options(const Case* /*tag*/) {
  return false;
}

// A family whose bounds hold for a declared accumulator (the manifest's "accumulate") other than
// acc_t<T> defines, beside its case type, `bool takes_declared_accumulate(const Case*)` returning
// true, and its case_of reads the manifest's accumulate (checked by require_accumulate_holds) into
// the case, whose expected() bounds then assume it. This fallback, for the others, says they take
// acc_t<T> only: compare_as refuses another.
template <class Case>
constexpr bool takes_declared_accumulate(const Case* /*tag*/) {
  return false;
}

// The manifest's accumulate, when it gives one that holds every value of the storage dtype
// exactly and rounds no finer than it: the storage dtype itself (16-bit accumulation, as small
// CPU matmuls in bfloat16 do) or a wider format (float32 or float64 for bfloat16 and float16;
// float64 for float32). @throws cases::CaseError naming the field and the accumulators the dtype
// takes.
std::optional<DType> require_accumulate_holds(const cases::CaseManifest& m);

// require_accumulate_holds, and a declared accumulator long enough for the case's dots: gamma_n
// (reference/bounds.hpp, step (a)) needs n·u < 1 with u = 2^-p, so a dot of `longest` ≥ 2^p
// terms accumulated in a p-bit format has no a-priori bound. `longest_words` names the sizes
// `longest` is the largest of ("the largest of tokens, in, out"). @throws cases::CaseError.
std::optional<DType> require_accumulate_bounded(const cases::CaseManifest& m, std::size_t longest,
                                                const std::string& longest_words);

// A family whose ops take a declared contract (the manifest's "contract") defines, beside its
// case type, `std::optional<std::string> contract_words(const Case&, DType)`: the contract the
// case's bounds assumed, in words (its case_of reads manifest.contract). This fallback, for the
// others, says they take none.
template <class Case>
std::optional<std::string> contract_words(const Case& /*c*/, DType /*t*/) {
  return std::nullopt;
}

// A family's case (a case_of's start) with the fields a one-group family sets from every
// manifest alike: its dtype, and its world, the product of the mesh.
template <class Case>
Case case_at_mesh(const cases::CaseManifest& m) {
  Case c;
  c.dtype = m.dtype;
  c.world = m.world();
  return c;
}

// @throws cases::CaseError when the manifest's mesh is not the op's (names and sizes, in order).
void require_mesh(const cases::CaseManifest& m, const spec::OpSpec& s);

// The op's spec at the case; a config the op refuses (a split that does not tile its dimension,
// a mesh other than the op's) becomes a CaseError naming the manifest.
template <class Case>
spec::OpSpec spec_of(const cases::CaseManifest& m, const Case& c) {
  spec::OpSpec s;
  try {
    s = op_spec(c);
    // Every rank's piece of every tensor: a split policy is checked against its dimension only
    // when it is applied.
    for (const auto& t : s.tensors) {
      for (int r = 0; r < s.world(); ++r) (void)t.local_shape(s.mesh, r);
    }
  } catch (const cases::CaseError&) {
    throw;
  } catch (const UsageError& e) {
    throw cases::CaseError(m.file + ": config: " + e.what());
  }
  require_mesh(m, s);
  return s;
}

// A case's words without " profile=...": how a suite draws values, not part of a case on disk.
std::string without_profile(std::string case_text);

// Reads `m`'s outputs into a run and checks the ones it gives against `e`, with the layout
// problems found while reading; appended to v.tensors.
template <class T, class Case, template <class> class Data, template <class> class Run,
          class Expected>
void check_given(CaseVerdict& v, const cases::CaseManifest& m, const spec::OpSpec& s, const Case& c,
                 const Expected& e) {
  Data<T> d{};
  Run<T> run{};
  CaseReader r(m, s);
  read_tensors(r, c, d, run);
  r.done();
  CaseVerdict all;
  check_outputs(all, c, run, e);
  for (auto& t : all.tensors) {
    if (!r.supplied(t.name)) continue;
    if (auto p = r.problems().find(t.name); p != r.problems().end()) t.problem = p->second;
    v.tensors.push_back(std::move(t));
  }
  v.failures.insert(v.failures.end(), all.failures.begin(), all.failures.end());
}

// A cut-down of a case for the diagnosis: a smaller case of the same family with the same world
// size, split kinds and shard boundaries (explicit splits of each rank's kept elements), its
// inputs and expected values taken from the full case's, and for each output tensor the case
// may give, the flat (row-major) indices of the full tensor it keeps, in the cut tensor's
// order. A family cuts only where every signature's output on the cut case equals its output on
// the full case at the kept elements (rows and output features of a linear layer are
// independent), up to the order in which a ring reduction adds the ranks' partials (its chunks
// follow the buffer's length); see diagnosis_cut below. A signature for which that cannot hold
// at any cut (its output at a kept element reads elements the cut drops: norm's
// normalized-over-token-axis takes statistics over each rank's every token) is named in
// `whole` and runs on the full case, so the cut loses no diagnosis.
template <class T, class Case, template <class> class Data, class Expected>
struct DiagnosisCut {
  Case c;
  Data<T> d;
  Expected e;
  std::map<std::string, std::vector<std::size_t>> kept;
  std::string words;               // CompareResult::diagnosis_cut
  std::vector<std::string> whole;  // signatures run on the full case, by name
};

// A family whose diagnosis can run on a cut-down case defines, beside its case type,
// `std::optional<DiagnosisCut<T, Case, Data, Expected>> diagnosis_cut(const Case&, const
// Data<T>&, const Expected&, const CaseVerdict& given, const DiagnosisCutSize&)`: the cut when
// the case is larger than size.above and a cut keeps every tensor `given` (the case's checked
// outputs, with kept values) exact, nullopt to run the full case. This fallback, for the
// others, always runs the full case.
template <class T, class Case, template <class> class Data, class Expected>
std::optional<DiagnosisCut<T, Case, Data, Expected>> diagnosis_cut(
    const Case& /*c*/, const Data<T>& /*d*/, const Expected& /*e*/, const CaseVerdict& /*given*/,
    const DiagnosisCutSize& /*size*/) {
  return std::nullopt;
}

// The indices a cut keeps along one dimension of a case, and how many in each piece.
struct KeptIndices {
  std::vector<std::size_t> index;  // sorted, into the full dimension
  std::vector<std::size_t> sizes;  // one per piece: the cut's explicit split of the dimension
};

// Along a dimension cut into `pieces` (their sizes in order; one piece when it is not split):
// in every piece its first two and last two elements (each shard boundary), the `must` indices
// inside it (the worst elements), and others spread evenly, up to `per_piece` in each, or as
// many as the piece needing the most boundary and must indices keeps, so that pieces of equal
// size keep equally many (a floor(n/P) split stays exact); a smaller piece is kept whole.
KeptIndices keep_along(const std::vector<std::size_t>& pieces, std::size_t per_piece,
                       const std::vector<std::size_t>& must);

// The flat row-major indices of a [rows, cols] tensor at rows × cols (each sorted), row by row.
std::vector<std::size_t> flat_indices(std::size_t cols_of_full,
                                      const std::vector<std::size_t>& rows,
                                      const std::vector<std::size_t>& cols);

// The flat row-major indices of the rows `rows` (sorted) of a [*, cols] tensor, each row whole.
std::vector<std::size_t> flat_rows(std::size_t cols, const std::vector<std::size_t>& rows);

// The elements of t at the flat indices `kept`, as a tensor of `shape`. @pre the product of
// shape is kept.size().
template <class V>
Tensor<V> select_flat(const Tensor<V>& t, const std::vector<std::size_t>& kept, Shape shape) {
  Tensor<V> out(std::move(shape));
  for (std::size_t k = 0; k < kept.size(); ++k) out[k] = t[kept[k]];
  return out;
}

// A cut of token rows alone, for a family whose given tensors are [tokens, ...] with every token
// row computed alone (parallel_mlp, sequence_parallel_norm, the vocab ops): the token rows of
// the worst element of each tensor given, or nullopt when the case gives a tensor not named in
// `row_tensors` (a sum over tokens, which a token cut would change).
std::optional<std::vector<std::size_t>> worst_rows(const CaseVerdict& given,
                                                   const std::vector<std::string>& row_tensors);

// keep_along over the token pieces (one per rank under a token split, else one) keeping about
// size.rows in all, at least 4 in each piece.
KeptIndices keep_rows(const std::vector<std::size_t>& pieces, const DiagnosisCutSize& size,
                      const std::vector<std::size_t>& worst);

// "64 of 2048 tokens, every shard boundary and the worst elements kept": a token cut's words,
// followed by "; a, b and c on all 2048" for the signatures `whole` (DiagnosisCut::whole) runs
// on the full case.
std::string kept_tokens_words(std::size_t kept, std::size_t tokens,
                              const std::vector<std::string>& whole = {});

// x's values and bounds at the flat indices `kept`, as tensors of `shape`.
ExpectedTensor select_expected(const ExpectedTensor& x, const std::vector<std::size_t>& kept,
                               const Shape& shape);

// `given`'s tensors with their kept values and bounds cut to `kept` (a tensor without an entry
// is kept whole); everything else, the pass/fail, the bound ratio, the worst element and its
// rank, is the full tensor's.
std::vector<TensorCheck> cut_checks(const std::vector<TensorCheck>& given,
                                    const std::map<std::string, std::vector<std::size_t>>& kept);

// Runs each signature (a mutant of the family) on the case's inputs and keeps those whose
// outputs match the case's checked tensors (`given`, with kept values) as kDiagnosisResidual
// and kDiagnosisShare say, and fail somewhere. A signature that throws on the case is skipped.
// On a cut-down case `given` holds the case's values at the kept elements and c, d, e are the
// cut's; a signature's residual there is at most its residual over the whole case. Adds to out
// (compare_as calls it twice on a cut: the cut's signatures, then DiagnosisCut::whole's on the
// full case) and sorts all of out.diagnosis.
template <class T, class Case, template <class> class Data, template <class> class Run,
          class Expected, class I>
void diagnose(CompareResult& out, const std::vector<TensorCheck>& given, const Case& c,
              const Data<T>& d, const Expected& e, std::span<const Mutant<I>> signatures) {
  for (const auto& sig : signatures) {
    ++out.signatures_tried;
    CaseVerdict sv;
    try {
      const auto impl = sig.make();
      const Run<T> run = run_ranks(*impl, c, d);
      check_outputs(sv, c, run, e);
    } catch (const std::exception&) {
      continue;  // the signature cannot run this case (a config it refuses)
    }
    Diagnosis dg{sig.name, sig.description, 0, {}, {}, -1};
    bool contradicted = false;  // a tensor where the case passes and the signature does not
    for (const auto& t : given) {
      if (!t.problem.empty() || t.values.empty()) continue;
      const auto it = std::find_if(sv.tensors.begin(), sv.tensors.end(),
                                   [&](const TensorCheck& x) { return x.name == t.name; });
      if (it == sv.tensors.end()) continue;
      const double r = element_residual(t, *it);
      const bool matched =
          r <= kDiagnosisResidual && (t.pass() || r * kDiagnosisShare <= t.max_ratio);
      if (matched) dg.residual = std::max(dg.residual, r);
      if (t.pass()) {
        contradicted = contradicted || !it->pass();
      } else if (matched) {
        if (dg.explained.empty()) dg.rank = t.worst_rank;
        dg.explained.push_back(t.name);
      } else {
        dg.unexplained.push_back(t.name);
      }
    }
    if (!dg.explained.empty() && !contradicted) out.diagnosis.push_back(std::move(dg));
  }
  // Full matches first, then the closest.
  std::stable_sort(out.diagnosis.begin(), out.diagnosis.end(),
                   [](const Diagnosis& a, const Diagnosis& b) {
                     if (a.unexplained.empty() != b.unexplained.empty()) {
                       return a.unexplained.empty();
                     }
                     return a.residual < b.residual;
                   });
}

// The typed comparison of one family's case: read, compute the reference, check the outputs the
// case gives (and the baseline's), report the layout problems found while reading; when a
// tensor fails and the family gives its signatures (a function returning its mutant catalog,
// for example &linear_mutants), the diagnosis.
template <class Case, template <class> class Data, template <class> class Run,
          auto Signatures = nullptr>
CompareResult compare_as(const cases::CaseManifest& m,
                         [[maybe_unused]] const CompareOptions& options) {
  if (m.contract_options && !reads_contract_options(static_cast<const Case*>(nullptr))) {
    m.contract_options->done();  // "contract: unknown field ..., the fields known here are name"
  }
  const Case c = case_of(m, static_cast<Case*>(nullptr));
  const spec::OpSpec s = spec_of(m, c);
  if (m.accumulate && *m.accumulate != acc_dtype(m.dtype) &&
      !takes_declared_accumulate(static_cast<const Case*>(nullptr))) {
    throw cases::CaseError(m.file + ": accumulate: is " + std::string(name(*m.accumulate)) +
                           " but the bounds of " + s.op + " in " + std::string(name(m.dtype)) +
                           " assume " + std::string(name(acc_dtype(m.dtype))) +
                           " accumulation; omit the field or give that type (only "
                           "column_parallel_linear, row_parallel_linear, parallel_mlp, "
                           "context_parallel_attention and attention_layer take another: "
                           "docs/compare.md, \"Contract\")");
  }
  CompareResult out;
  out.dir = m.dir;
  out.implementation = m.implementation;
  if (auto words = contract_words(c, m.dtype)) {
    out.contract = std::move(*words);
  } else if (!m.contract.empty()) {
    throw cases::CaseError(m.file + ": contract: is \"" + m.contract + "\" but " + s.op +
                           " takes no declared contract; omit the field (its bounds assume " +
                           default_contract(m.dtype) + ")");
  } else {
    out.contract = default_contract(m.dtype, m.accumulate);
  }
  visit_dtype(m.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bfloat16> ||
                  std::is_same_v<T, float16>) {
      // The inputs once, for the reference (an output-free reader: read_tensors also reads
      // the outputs, which check_given reads again with its own reader).
      Data<T> d{};
      {
        Run<T> ignored{};
        CaseReader r(m, s);
        read_tensors(r, c, d, ignored);
        r.done();
      }
      const auto e = expected(c, d);
      CaseVerdict& v = out.verdict;
      begin_verdict(v, s.op, m.dtype, s.world(), without_profile(c.describe()));
      {
        const KeepElementValues keep;  // for the diagnosis; dropped below
        check_given<T, Case, Data, Run>(v, m, s, c, e);
        if constexpr (!std::is_null_pointer_v<decltype(Signatures)>) {
          if (!v.pass()) {
            if (auto cut = diagnosis_cut(c, d, e, v, options.cut)) {
              out.diagnosis_cut = cut->words;
              const auto all = Signatures();
              using Signature = typename decltype(all)::value_type;
              std::vector<Signature> on_cut, on_whole;
              for (const auto& sig : all) {
                const bool whole =
                    std::find(cut->whole.begin(), cut->whole.end(), sig.name) != cut->whole.end();
                (whole ? on_whole : on_cut).push_back(sig);
              }
              diagnose<T, Case, Data, Run>(out, cut_checks(v.tensors, cut->kept), cut->c, cut->d,
                                           cut->e, std::span<const Signature>(on_cut));
              diagnose<T, Case, Data, Run>(out, v.tensors, c, d, e,
                                           std::span<const Signature>(on_whole));
            } else {
              diagnose<T, Case, Data, Run>(out, v.tensors, c, d, e, Signatures());
            }
          }
        }
      }
      for (auto& t : v.tensors) {
        if (std::find(m.keep_values.begin(), m.keep_values.end(), t.name) == m.keep_values.end()) {
          t.values = {};
        }
        t.bounds = {};
      }
      if (!m.baseline.empty()) {
        cases::CaseManifest b = m;
        b.outputs = m.baseline;
        CaseVerdict bv;
        check_given<T, Case, Data, Run>(bv, b, s, c, e);
        out.baseline = std::move(bv.tensors);
        out.baseline_implementation = m.baseline_implementation;
      }
    }
  });
  return out;
}

}  // namespace shardcheck::check
