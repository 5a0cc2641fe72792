// The checks of the redistribute suite's properties (redistribute_suite.cpp holds the table),
// each one case against one implementation, its verdict concluded (engine/verdict.hpp).
//
// Exact values (redistribute_exact.cpp): small integers in float64, so every reduction (sum, avg
// of equal terms, max, min) is exact and results are compared bit for bit. These pin down which
// elements go where and which terms are combined:
//   check_preserves     materialize(impl(x)) == materialize(x) for a valid pair of layouts
//   check_ledger        each rank's ledger holds exactly plan_redistribute's collectives, in
//                       order, with their bytes
//   check_round_trip    Shard/Replicate there and back returns every rank's original piece
//   check_refuses       S -> P and P(a) -> P(b) are refused with a UsageError on every rank
//
// Rounding arithmetic (redistribute_bounds.cpp), in the case's element type T (float64,
// float32, bfloat16, float16), random real values:
//   check_movement      Shard/Replicate only: the target materializes to x bit for bit (NaN,
//                       ±inf, -0 and subnormals included), every replica identical
//   check_reductions    Partial terms reduced: within the a-priori bound derived in
//                       redistribute_bounds.cpp from the documented reduction order
#pragma once

#include "suites/redistribute/redistribute_case.hpp"
#include "suites/redistribute/redistribute_impl.hpp"

namespace shardcheck::check {

void check_preserves(const RedistributeImplementation& impl, const RedistributeCase& c);
void check_ledger(const RedistributeImplementation& impl, const RedistributeCase& c);
void check_round_trip(const RedistributeImplementation& impl, const RedistributeCase& c);
void check_refuses(const RedistributeImplementation& impl, const RedistributeCase& c);

// Instantiated for double, float, bfloat16 and float16 in redistribute_bounds.cpp.
template <class T>
void check_movement(const RedistributeImplementation& impl, const RedistributeCase& c);
// claims_plan: the implementation claims the library's plan (ImplementationInfo::deterministic),
// which reduces only the Partial dimensions the target does not keep; otherwise any source
// Partial dimension may be reduced once (through R and back), and the bound counts its additions.
template <class T>
void check_reductions(const RedistributeImplementation& impl, const RedistributeCase& c,
                      bool claims_plan);

// Each rank's piece under `layout` of the global term its Partial coordinates select
// (terms.size() == term_count(c.mesh, layout)).
template <class T>
std::vector<Tensor<T>> pieces_of_terms(const std::vector<Tensor<T>>& terms,
                                       const RedistributeCase& c,
                                       const std::vector<Placement>& layout);

// What the implementation returned on every rank, and what each rank's ledger recorded.
template <class T>
struct RedistributeRun {
  std::vector<Tensor<T>> pieces;
  std::vector<std::vector<LedgerEntry>> ledgers;
};

// Runs impl on every rank of c.mesh: rank r's piece in[r] under `from` to its piece under `to`.
// @throws RankFailure when a rank threw.
template <class T>
RedistributeRun<T> run_redistribute(const RedistributeImplementation& impl,
                                    const RedistributeCase& c, const std::vector<Tensor<T>>& in,
                                    const std::vector<Placement>& from,
                                    const std::vector<Placement>& to);

// "element [1, 2]: 3 where 4 was expected" for the first element whose bits differ, "" when
// every bit agrees (same shape assumed).
template <class T>
std::string first_difference(const Tensor<T>& got, const Tensor<T>& want);

}  // namespace shardcheck::check
