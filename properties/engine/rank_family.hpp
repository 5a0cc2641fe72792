// The typed case of a family whose op runs on P ranks (linear, norm, vocab, attention, mlp): draw
// the global tensors, run the implementation on the ranks, then make the property's check against
// the reference, the declared traffic or the replicated copies, and conclude the verdict. A
// family F gets it by deriving from RankFamily<F, Interface, Case, Options, Data, Own> (family.hpp
// lists what every family provides); for this part F provides, in addition (each may be a
// static member function or a constexpr pointer to the family's function, `run = run_linear<T>`):
//
//   template <class T> gen_data(const Case&): rc::Gen<Data<T>>, the global tensors of a case
//   template <class T> run(const Interface&, const Case&, const Data<T>&): RankRun<...>
//       (run_on_ranks below does the running; a family whose run holds more, e.g. several ops'
//       outputs, returns its own struct with .ledgers and .error)
//   static std::string op_name(const Case&);                  "column_parallel_linear"
//   declared_traffic(const Case&): std::vector<std::vector<DeclaredCall>>, each rank's calls,
//       from the op's spec (declared_calls, engine/traffic.hpp)
//   template <class T> expected(const Case&, const Data<T>&): Expected
//   template <class T> static void add_checks(CaseVerdict&, const Case&, const Run<T>&,
//                                             const Expected&);  every output materialized and
//       compared (check_pieces, OutputChecks below)
//   template <class T> static void own_check(Own, CaseVerdict&, const Case&, const Data<T>&,
//                                            const Run<T>&);     only with checks of its own
//   static int world(const Case&);                             when it is not c.world
#pragma once

#include "engine/expected.hpp"
#include "engine/family.hpp"
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

// Runs fn(comm) on `world` ranks; rank r's result becomes outputs[r]. An exception from any rank
// (the runtime names the rank) becomes RankRun::error, so the verdict reports it as the failure.
template <class Outputs, class Fn>
RankRun<Outputs> run_on_ranks(int world, Fn&& fn) {
  RankRun<Outputs> out;
  out.outputs.resize(static_cast<std::size_t>(world));
  try {
    auto result = run(world, [&](Communicator& comm) {
      out.outputs[static_cast<std::size_t>(comm.rank())] = fn(comm);
    });
    out.ledgers = std::move(result.ledgers);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

// The pieces of one output, by rank: outputs[r].*member.
template <class Outputs, class T>
std::vector<Tensor<T>> pieces_of(const std::vector<Outputs>& outputs, Tensor<T> Outputs::*member) {
  std::vector<Tensor<T>> pieces;
  pieces.reserve(outputs.size());
  for (const auto& o : outputs) pieces.push_back(o.*member);
  return pieces;
}

// Compares each output of a run, materialized from its pieces by its placement, with its expected
// value: check("y", &Outputs::y, placement, expected.y) appends the tensor's verdict to v.
template <class Outputs>
struct OutputChecks {
  CaseVerdict& v;
  const std::vector<Outputs>& outputs;  // by rank
  int world;

  template <class T>
  void operator()(const char* name, Tensor<T> Outputs::*member, const Placement& p,
                  const ExpectedTensor& x) const {
    v.tensors.push_back(check_pieces<T>(name, pieces_of(outputs, member), p, x, world));
  }
};

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

  static int world(const Case& c) { return c.world; }

  // What every rank declares, by rank.
  static std::vector<std::vector<DeclaredCall>> declared_by_rank(const Case& c) {
    return F::declared_traffic(c);
  }

  template <class T>
  static void check_case(const Property<F>& p, const Interface& impl, const Case& c) {
    const auto d = *F::template gen_data<T>(c);
    const auto run = F::template run<T>(impl, c, d);
    CaseVerdict v;
    if (!begin_verdict(v, F::op_name(c), c.dtype, F::world(c), c.describe(), run.error)) return;
    switch (p.check) {
      case Check::traffic:
        if (auto f = check_traffic_per_rank(declared_by_rank(c), run.ledgers); !f.empty()) {
          v.failures.push_back(std::move(f));
        }
        break;
      case Check::reference:
        F::template add_checks<T>(v, c, run, F::template expected<T>(c, d));
        break;
      case Check::replicated_bit_identical:
        // Only the replication matters: drop the bound verdicts, keep ranks that disagree.
        F::template add_checks<T>(v, c, run, F::template expected<T>(c, d));
        keep_only_divergence(v);
        break;
      case Check::own:
        if constexpr (!std::is_same_v<typename F::Own, NoOwnChecks>) {
          F::template own_check<T>(p.own, v, c, d, run);
        }
        break;
    }
    conclude(v);
  }
};

}  // namespace shardcheck::check
