// The typed case of a family whose op runs on P ranks (linear, norm, vocab, attention): draw the
// global tensors, run the implementation on the ranks, then make the property's check against
// the reference, the declared traffic or the replicated copies, and conclude the verdict. A
// family F gets it by deriving from RankFamily<F> (family.hpp lists what every family provides);
// for this part F provides, in addition:
//
//   template <class T> using Data = ...;   the global tensors of a case
//   template <class T> static rc::Gen<Data<T>> gen_data(const Case&);
//   template <class T> static RankRun<...> run(const Interface&, const Case&, const Data<T>&);
//       (run_on_ranks below does the running; a family whose run holds more, e.g. several ops'
//       outputs, returns its own struct with .ledgers and .error)
//   static std::string op_name(const Case&);                  "column_parallel_linear"
//   static std::vector<std::vector<DeclaredCall>> declared_traffic(const Case&);   per rank
//   template <class T> static Expected expected(const Case&, const Data<T>&);
//   template <class T> static void add_checks(CaseVerdict&, const Case&, const Run<T>&,
//                                             const Expected&);  every output materialized and
//       compared (check_pieces)
//   template <class T> static void own_check(Own, CaseVerdict&, const Case&, const Data<T>&,
//                                            const Run<T>&);     only with checks of its own
#pragma once

#include "engine/expected.hpp"
#include "engine/family.hpp"
#include "engine/traffic.hpp"
#include "engine/verdict.hpp"
#include "runtime/launcher.hpp"
#include "runtime/ledger.hpp"

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

// The same declared collectives on every one of `world` ranks.
inline std::vector<std::vector<DeclaredCall>> on_every_rank(std::vector<DeclaredCall> calls,
                                                            int world) {
  return std::vector<std::vector<DeclaredCall>>(static_cast<std::size_t>(world), calls);
}

template <class F>
struct RankFamily : FloatTypes {
  // (Interface and Case are template parameters because F is incomplete where this is declared.)
  template <class T, class Interface, class Case>
  static void check_case(const Property<F>& p, const Interface& impl, const Case& c) {
    const auto d = *F::template gen_data<T>(c);
    const auto run = F::template run<T>(impl, c, d);
    CaseVerdict v;
    if (!begin_verdict(v, F::op_name(c), c.dtype, F::world(c), c.describe(), run.error)) return;
    switch (p.check) {
      case Check::traffic:
        if (auto f = check_traffic_per_rank(F::declared_traffic(c), run.ledgers); !f.empty()) {
          v.failures.push_back(std::move(f));
        }
        break;
      case Check::reference: F::add_checks(v, c, run, F::expected(c, d)); break;
      case Check::replicated_bit_identical:
        // Only the replication matters: drop the bound verdicts, keep ranks that disagree.
        F::add_checks(v, c, run, F::expected(c, d));
        keep_only_divergence(v);
        break;
      case Check::own:
        if constexpr (!std::is_same_v<typename F::Own, NoOwnChecks>) {
          F::own_check(p.own, v, c, d, run);
        }
        break;
    }
    conclude(v);
  }
};

}  // namespace shardcheck::check
