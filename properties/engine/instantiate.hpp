// The explicit instantiations of a family's typed steps (engine/rank_family.hpp) for the four
// floating element types, written once for every family. Each family's step is a template defined
// in its .cpp file and declared in its header; one line after the definition instantiates it:
//
//   SHARDCHECK_INSTANTIATE_GEN_DATA(LinearCase, LinearData)           in <family>_case.cpp
//   SHARDCHECK_INSTANTIATE_RUN_RANKS(LinearImplementation, LinearCase, LinearData, LinearRun)
//                                                                      in <family>_run.cpp
//   SHARDCHECK_INSTANTIATE_EXPECTED(LinearCase, LinearData, LinearExpected)
//                                                                      in <family>_expected.cpp
//   SHARDCHECK_INSTANTIATE_CHECK_OUTPUTS(LinearCase, LinearRun, LinearExpected)
//                                   where check_outputs is defined (shardcheck compare calls it),
//   or, for a family whose outputs for_each_output lists (engine/rank_family.hpp), one line that
//   defines check_outputs and instantiates it:
//   SHARDCHECK_CHECK_LISTED_OUTPUTS(LinearCase, LinearRun, LinearExpected)   in <family>_suite.cpp
//
// Data and Run are the family's templates over the element type (Data<T>, Run<T>).
#pragma once

#include "runtime/dtype.hpp"

// The macros' arguments are types and template names (LinearCase, LinearData), which cannot be
// parenthesized: bugprone-macro-parentheses does not apply.
// NOLINTBEGIN(bugprone-macro-parentheses)

// template rc::Gen<Data<T>> gen_data<T>(const Case&);
#define SHARDCHECK_DETAIL_GEN_DATA(T, Case, Data) \
  template rc::Gen<Data<T>> gen_data<T>(const Case&);
#define SHARDCHECK_INSTANTIATE_GEN_DATA(Case, Data) \
  SHARDCHECK_FOR_EACH_FLOAT_TYPE_WITH(SHARDCHECK_DETAIL_GEN_DATA, Case, Data)

// template Run<T> run_ranks<T>(const Interface&, const Case&, const Data<T>&);
#define SHARDCHECK_DETAIL_RUN_RANKS(T, Interface, Case, Data, Run) \
  template Run<T> run_ranks<T>(const Interface&, const Case&, const Data<T>&);
#define SHARDCHECK_INSTANTIATE_RUN_RANKS(Interface, Case, Data, Run) \
  SHARDCHECK_FOR_EACH_FLOAT_TYPE_WITH(SHARDCHECK_DETAIL_RUN_RANKS, Interface, Case, Data, Run)

// template Expected expected<T>(const Case&, const Data<T>&);
#define SHARDCHECK_DETAIL_EXPECTED(T, Case, Data, Expected) \
  template Expected expected<T>(const Case&, const Data<T>&);
#define SHARDCHECK_INSTANTIATE_EXPECTED(Case, Data, Expected) \
  SHARDCHECK_FOR_EACH_FLOAT_TYPE_WITH(SHARDCHECK_DETAIL_EXPECTED, Case, Data, Expected)
// template void check_outputs<T>(CaseVerdict&, const Case&, const Run<T>&, const Expected&);
#define SHARDCHECK_DETAIL_CHECK_OUTPUTS(T, Case, Run, Expected) \
  template void check_outputs<T>(CaseVerdict&, const Case&, const Run<T>&, const Expected&);
#define SHARDCHECK_INSTANTIATE_CHECK_OUTPUTS(Case, Run, Expected) \
  SHARDCHECK_FOR_EACH_FLOAT_TYPE_WITH(SHARDCHECK_DETAIL_CHECK_OUTPUTS, Case, Run, Expected)
// check_outputs defined by engine/rank_family.hpp's check_listed_outputs (a family whose run is a
// RankRun and whose outputs for_each_output lists), and instantiated.
#define SHARDCHECK_CHECK_LISTED_OUTPUTS(Case, Run, Expected)                                \
  template <class T>                                                                        \
  void check_outputs(CaseVerdict& v, const Case& c, const Run<T>& run, const Expected& e) { \
    check_listed_outputs<T>(v, c, run, e);                                                  \
  }                                                                                         \
  SHARDCHECK_INSTANTIATE_CHECK_OUTPUTS(Case, Run, Expected)
// NOLINTEND(bugprone-macro-parentheses)
