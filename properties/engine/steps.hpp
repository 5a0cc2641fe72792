// The declarations of a rank family's steps (engine/rank_family.hpp lists them and what each
// does), written once for every family: a family's case header calls
//
//   SHARDCHECK_DECLARE_RANK_STEPS(LinearImplementation, LinearCase, LinearCaseOptions, LinearData,
//                                 LinearRun, LinearExpected)
//
// after its types, and its .cpp files define the templates and instantiate them for the four
// floating element types (engine/instantiate.hpp). It declares, in the enclosing namespace
// (shardcheck::check, where the engine finds them by argument-dependent lookup):
//
//   rc::Gen<Case> gen_case(const RunConfig&, const Options&);                   the draw
//   template <class T> rc::Gen<Data<T>> gen_data(const Case&);                  the global tensors
//   template <class T> Run<T> run_ranks(const Interface&, const Case&, const Data<T>&);
//       the implementation on the case's ranks; an exception from a rank becomes Run<T>::error
//   spec::OpSpec op_spec(const Case&);   the op's spec at the case's sizes (lib/ops/<family>/)
//   template <class T> Expected expected(const Case&, const Data<T>&);   values and bounds
//   template <class T> void check_outputs(CaseVerdict&, const Case&, const Run<T>&,
//                                         const Expected&);
//       every output of the run materialized by its spec's placement and checked, appended to
//       the verdict (<family>_suite.cpp; `shardcheck compare` calls it too, compare/compare.hpp)
#pragma once

#include "engine/expected.hpp"
#include "engine/rank_family.hpp"
#include "engine/suite.hpp"
#include "engine/verdict.hpp"
#include "ops/op_spec.hpp"

#include <rapidcheck.h>

// The macro's arguments are types and template names, which cannot be parenthesized:
// bugprone-macro-parentheses does not apply.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SHARDCHECK_DECLARE_RANK_STEPS(Interface, Case, Options, Data, Run, Expected) \
  rc::Gen<Case> gen_case(const RunConfig& config, const Options& options);           \
  template <class T>                                                                 \
  rc::Gen<Data<T>> gen_data(const Case& c);                                          \
  template <class T>                                                                 \
  Run<T> run_ranks(const Interface& impl, const Case& c, const Data<T>& d);          \
  spec::OpSpec op_spec(const Case& c);                                               \
  template <class T>                                                                 \
  Expected expected(const Case& c, const Data<T>& d);                                \
  template <class T>                                                                 \
  void check_outputs(CaseVerdict& v, const Case& c, const Run<T>& run, const Expected& e);
// NOLINTEND(bugprone-macro-parentheses)
