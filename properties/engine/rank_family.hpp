// The typed case of a family whose op runs on P ranks (linear, norm, vocab, attention, mlp): draw
// the global tensors, run the implementation on the ranks, then make the property's check against
// the reference, the declared traffic or the replicated copies, and conclude the verdict. A
// family F gets it by deriving from RankFamily<F, Interface, Case, Options, Data, Own> (family.hpp
// lists what every family provides). The steps of a case are free functions the family defines
// beside its case type, in namespace shardcheck::check, overloaded on that type; the engine calls
// them unqualified and finds them by argument-dependent lookup (the customization-point idiom of
// std::swap and std::begin), so the family names them once, where they are written:
//
//   rc::Gen<Case> gen_case(const RunConfig&, const Options&);          the draw (family.hpp)
//   template <class T> rc::Gen<Data<T>> gen_data(const Case&);         the global tensors
//   spec::OpSpec op_spec(const Case&);    the op's spec (lib/ops/<family>/<family>_spec.hpp) at
//       the case's sizes: its name and world size for the verdict, its tensors' placements (by
//       which the inputs are cut and the outputs materialized) and each rank's collectives (the
//       declared traffic, declared_calls in engine/traffic.hpp)
//   template <class T> Run run_ranks(const Interface&, const Case&, const Data<T>&);
//       the implementation run on the case's ranks: a RankRun (run_on_ranks below), or, for a
//       family whose run holds more (several ops' outputs), its own struct with .ledgers, .error
//   template <class T> Expected expected(const Case&, const Data<T>&);  values and bounds
//   template <class T> void check_outputs(CaseVerdict&, const Case&, const Run&, const Expected&);
//       every output materialized and compared (check_pieces, OutputChecks below; for a family
//       whose outputs for_each_output lists, check_listed_outputs below, in one line:
//       engine/instantiate.hpp's SHARDCHECK_CHECK_LISTED_OUTPUTS)
//
// (engine/steps.hpp's SHARDCHECK_DECLARE_RANK_STEPS declares all six for a family in one line)
// and, only a family with checks of its own, beside its Own enum (found by argument-dependent
// lookup on it, so it may sit in the suite file's anonymous namespace with the enum):
//   template <class T> void own_check(Own, CaseVerdict&, const Case&, const Data<T>&, const Run&);
#pragma once

#include "engine/case_driver.hpp"
#include "engine/expected.hpp"
#include "engine/family.hpp"
#include "engine/rank_bytes.hpp"
#include "engine/traffic.hpp"
#include "engine/verdict.hpp"
#include "runtime/launcher.hpp"
#include "runtime/ledger.hpp"

#include <rapidcheck.h>

#include <exception>
#include <string>
#include <type_traits>
#include <vector>

namespace shardcheck::check {

// What the ranks returned: each rank's outputs, each rank's ledger, or the error one threw.
template <class Outputs>
struct RankRun {
  std::vector<Outputs> outputs;  // by rank
  std::vector<Ledger> ledgers;   // by rank
  std::string error;             // the implementation threw: nothing else is set
};

// Runs fn(comm) on `world` ranks; rank r's result becomes outputs[r]. With a case driver set (an
// MPI run, case_driver.hpp), through it: rank r on process r, then every rank's outputs and
// ledger on every process; a case with more ranks than processes is discarded with the reason
// (the command line caps --max-world at the processes, so only a suite that draws past it does).
// @throws RankFailure when a rank threw (the same on every process of an MPI run).
template <class Outputs, class Fn>
RankRun<Outputs> outputs_of_ranks(int world, Fn&& fn) {
  RankRun<Outputs> out;
  if (const auto* d = case_driver()) {
    if (world > d->processes()) {
      throw rc::detail::CaseResult(rc::detail::CaseResult::Type::Discard,
                                   "the case needs " + std::to_string(world) +
                                       " ranks; mpirun started " + std::to_string(d->processes()) +
                                       " processes");
    }
    auto g = d->run(world, [&](Communicator& comm) { return to_bytes(fn(comm)); });
    out.outputs.reserve(g.outputs.size());
    for (const auto& bytes : g.outputs) out.outputs.push_back(from_bytes<Outputs>(bytes));
    out.ledgers = std::move(g.ledgers);
    return out;
  }
  out.outputs.resize(static_cast<std::size_t>(world));
  auto result = run(world, [&](Communicator& comm) {
    out.outputs[static_cast<std::size_t>(comm.rank())] = fn(comm);
  });
  out.ledgers = std::move(result.ledgers);
  return out;
}

// outputs_of_ranks, where an exception from any rank (the runtime names the rank) becomes
// RankRun::error, so the verdict reports it as the failure.
template <class Outputs, class Fn>
RankRun<Outputs> run_on_ranks(int world, Fn&& fn) {
  try {
    return outputs_of_ranks<Outputs>(world, fn);
  } catch (const std::exception& e) {
    RankRun<Outputs> out;
    out.outputs.resize(static_cast<std::size_t>(world));
    out.error = e.what();
    return out;
  }
}

// run_on_ranks with each rank's inputs made first, on this thread: inputs(r) for every rank r
// before any rank starts, then fn(comm, its inputs) on the ranks.
template <class Outputs, class Inputs, class Fn>
RankRun<Outputs> run_on_ranks_with(int world, Inputs&& inputs, Fn&& fn) {
  std::vector<decltype(inputs(0))> by_rank;
  by_rank.reserve(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) by_rank.push_back(inputs(r));
  return run_on_ranks<Outputs>(world, [&](Communicator& comm) {
    return fn(comm, by_rank[static_cast<std::size_t>(comm.rank())]);
  });
}

// The pieces of one output, by rank: outputs[r].*member.
template <class Outputs, class T>
std::vector<Tensor<T>> pieces_of(const std::vector<Outputs>& outputs, Tensor<T> Outputs::*member) {
  std::vector<Tensor<T>> pieces;
  pieces.reserve(outputs.size());
  for (const auto& o : outputs) pieces.push_back(o.*member);
  return pieces;
}

// Compares each output of a run, materialized from its pieces, with its expected value, and
// appends the tensor's verdict to v: check("y", &Outputs::y, expected.y) by the placement the op's
// spec gives its tensor "y", or check("y", &Outputs::y, placement, expected.y) by another.
template <class Outputs>
struct OutputChecks {
  CaseVerdict& v;
  const std::vector<Outputs>& outputs;  // by rank
  const spec::OpSpec& spec;

  template <class T>
  void operator()(const char* name, Tensor<T> Outputs::*member, const Placement& p,
                  const ExpectedTensor& x) const {
    v.tensors.push_back(check_pieces<T>(name, pieces_of(outputs, member), p, x, spec.world()));
  }
  template <class T>
  void operator()(const char* name, Tensor<T> Outputs::*member, const ExpectedTensor& x) const {
    (*this)(name, member, spec.tensor(name).placement(), x);
  }
};
// Deduces Outputs from the run (clang 14, which clang-tidy uses, has no deduction for aggregates).
template <class Outputs>
OutputChecks(CaseVerdict&, const std::vector<Outputs>&, const spec::OpSpec&)
    -> OutputChecks<Outputs>;

// check_outputs for a family that lists its outputs once, beside its case type (found by
// argument-dependent lookup, like the steps):
//   template <class T, class Fn> void for_each_output(const Case&, Fn&& fn);
// calls fn(name, &Outputs::member, &Expected::member) for each output the case has (its compare
// reader reads the same list). Each is materialized by its spec's placement and compared with its
// expected value (engine/instantiate.hpp's SHARDCHECK_CHECK_LISTED_OUTPUTS defines the family's
// check_outputs with it).
template <class T, class Case, class Outputs, class Expected>
void check_listed_outputs(CaseVerdict& v, const Case& c, const RankRun<Outputs>& run,
                          const Expected& e) {
  const auto s = op_spec(c);
  const OutputChecks one{v, run.outputs, s};
  for_each_output<T>(
      c, [&](const char* name, Tensor<T> Outputs::*output, ExpectedTensor Expected::*expected) {
        one(name, output, e.*expected);
      });
}

// The same list read from a case on disk: reader.output(name, run.outputs, member) for each output
// for_each_output names (the compare readers' read_tensors, compare/case_reader.hpp).
template <class T, class Reader, class Case, class Outputs>
void read_listed_outputs(Reader& reader, const Case& c, RankRun<Outputs>& run) {
  for_each_output<T>(c, [&](const char* name, Tensor<T> Outputs::*output, auto /*expected*/) {
    reader.output(name, run.outputs, output);
  });
}

// A pin for the properties about what several ranks hold: the world size drawn from
// [2, max_world], or 1 when max_world is 1.
template <class Options>
void pin_several_ranks(Options& o, const RunConfig& config) {
  o.world = config.max_world >= 2 ? *rc::gen::inRange(2, config.max_world + 1) : 1;
}

template <class F, class Interface, class Case, class Options, template <class> class DataT,
          class Own = NoOwnChecks>
struct RankFamily : FloatTypes, FamilyTypes<Interface, Case, Options, Own> {
  template <class T>
  using Data = DataT<T>;
  using Row = typename FamilyTypes<Interface, Case, Options, Own>::Row;
  using Pin = typename FamilyTypes<Interface, Case, Options, Own>::Pin;

  // The rows every rank family's table has, by check (a row of another check is written as a
  // Property value):
  // every output against the reference under its bound (numeric);
  static constexpr Row reference_property(const char* name, const char* sentence,
                                          Pin pin = nullptr) {
    return {{name, sentence, /*numeric=*/true}, Check::reference, pin};
  }
  // "declared_traffic": every rank's ledger against the collectives the op declares;
  static constexpr Row traffic_property(const char* sentence, Pin pin = nullptr) {
    return {{"declared_traffic", sentence}, Check::traffic, pin};
  }
  // "replicated_bit_identical": what several ranks hold is bit-identical on each of them.
  static constexpr Row replication_property(const char* sentence) {
    return {{"replicated_bit_identical", sentence},
            Check::replicated_bit_identical,
            pin_several_ranks<Options>};
  }

  // Pins of the draw that several families' options take: the op (Options::op), and a world of
  // at least N ranks (Options::min_world; the case's draw keeps 1 when max_world < N).
  template <auto Op>
  static void pin_op(Options& o, const RunConfig& /*config*/) {
    o.op = Op;
  }
  template <int N>
  static void pin_min_world(Options& o, const RunConfig& /*config*/) {
    o.min_world = N;
  }

  template <class T>
  static void check_case(const Row& p, const Interface& impl, const Case& c) {
    const Data<T> d = *gen_data<T>(c);
    const spec::OpSpec s = op_spec(c);
    same_case(s.op + " " + std::string(name(c.dtype)) + " " + c.describe());
    const auto run = run_ranks(impl, c, d);
    // Under mpirun only the checker compares; the case ends with its outcome (runner.cpp).
    if (const auto* driver = case_driver(); driver != nullptr && !driver->checker()) return;
    CaseVerdict v;
    if (!begin_verdict(v, s.op, c.dtype, s.world(), c.describe(), run.error)) return;
    if (s.mesh.size() >= 2) {
      for (const auto& [axis, size] : s.mesh) {
        if (size > 1) v.mesh_axes.push_back(axis);
      }
    }
    switch (p.check) {
      case Check::traffic:
        if (auto f = check_traffic_per_rank(declared_calls(s, c.dtype), run.ledgers); !f.empty()) {
          v.failures.push_back(std::move(f));
        }
        break;
      case Check::reference: check_outputs(v, c, run, expected(c, d)); break;
      case Check::replicated_bit_identical:
        // Only the replication matters: drop the bound verdicts, keep ranks that disagree.
        check_outputs(v, c, run, expected(c, d));
        keep_only_divergence(v);
        break;
      case Check::own:
        if constexpr (!std::is_same_v<typename F::Own, NoOwnChecks>) {
          own_check(p.own, v, c, d, run);
        }
        break;
    }
    conclude(v);
  }
};

}  // namespace shardcheck::check
