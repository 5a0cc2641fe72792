// The generic suite engine: an op family's suite is a description F (its case generator, its
// implementation interface, the expected function and a table of properties as values); the
// engine does the rest once for every family: property lookup, the draw, typed dispatch over the
// element types, running the implementation on P ranks, materializing and comparing, the
// declared-traffic and bit-identity checks, registration and the mutant catalog.
//
// What F provides (properties/suites/linear/linear_suite.cpp is the model; docs/adding-an-op.md
// walks through it):
//
//   Interface, Case, Options, Own: the types, from deriving FamilyTypes<...> below (or
//       RankFamily<F, ...>, rank_family.hpp), with the standard rows of its table
//   static constexpr FamilyInfo info;   its name and words
//   static constexpr Row properties[];   the table, one Property<F> per property
//   using Library;        the adapter over the library's own ops, "shardcheck"
//   mutants(): the catalog, std::span<const Mutant<Interface>> (may be a constexpr pointer to
//       the family's function: mutants = x_mutants)
//   and beside its case type, in namespace shardcheck::check, the free function
//   rc::Gen<Case> gen_case(const RunConfig&, const Options&), the draw (found by
//       argument-dependent lookup on Options, as rank_family.hpp's steps are)
//   template <class Fn> static void visit_types(const Case&, Fn&&);  calls fn(T{}) for the
//       case's element type (FloatTypes: the four floating types; a family whose interface has
//       fewer types visits fewer)
//   template <class T> static void check_case(const Row&, const Interface&, const Case&);
//       one typed case, its verdict concluded (conclude()); families whose ops run on ranks get
//       it from RankFamily
//
// A property is a value: its name and sentence, which check it makes, how it narrows the draw
// and whether it needs the deterministic kernel. No property name is compared anywhere else.
#pragma once

#include "engine/registry.hpp"
#include "engine/suite.hpp"
#include "runtime/errors.hpp"

#include <rapidcheck.h>

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::check {

// Which comparison a property makes of a case.
enum class Check {
  reference,                 // every output against the high-precision reference, under its bound
  replicated_bit_identical,  // the outputs' replicated copies agree bit for bit across ranks
  traffic,                   // every rank's ledger against the collectives the op declares
  own,                       // the family's own check (Property::own names it)
};

// For a family without checks of its own.
enum class NoOwnChecks { none };

// What a family is called and says of itself (`shardcheck list`).
struct FamilyInfo {
  const char* name = nullptr;                 // the suite's name: "linear"
  const char* description = nullptr;          // what the suite checks, in words
  const char* library_description = nullptr;  // the library's own implementation, "shardcheck"
};

// A property's words, as `shardcheck list` prints them (PropertyInfo), in a constant.
struct PropertyText {
  const char* name = nullptr;         // short id: "matches_reference"
  const char* description = nullptr;  // the sentence
  bool numeric = false;               // compares values under a bound (PropertyInfo::numeric)
};

// One property of a family whose draw takes Options and whose own checks Own names: a row of
// the family's table, a constant.
template <class Options, class Own>
struct PropertyRow {
  PropertyText info;
  Check check = Check::reference;
  // Narrows the draw (an op, a world size, a value profile); null: the family's full draw.
  void (*pin)(Options&, const RunConfig&) = nullptr;
  // Applies only to implementations that claim the deterministic kernel (bit-exactness).
  bool deterministic_only = false;
  Own own{};  // with Check::own: which of the family's checks
};

// A property of family F.
template <class F>
using Property = PropertyRow<typename F::Options, typename F::Own>;

// The types every family names: its implementation interface (ImplementationRegistry<Interface>),
// one drawn case (.dtype, .describe()), what a property pins of the draw (a default-constructible
// struct) and the enum naming the family's own checks (Check::own), or NoOwnChecks; and the row
// of a property its own check makes.
template <class InterfaceT, class CaseT, class OptionsT, class OwnT = NoOwnChecks>
struct FamilyTypes {
  using Interface = InterfaceT;
  using Case = CaseT;
  using Options = OptionsT;
  using Own = OwnT;
  // A row of the family's table (Property<F>, spelt within F, which is not complete there).
  using Row = PropertyRow<Options, Own>;
  // How a property narrows the draw (Property::pin).
  using Pin = void (*)(Options&, const RunConfig&);

  // The row of a property made by the family's own check `own` (Check::own).
  static constexpr Row own_property(PropertyText info, Own own, Pin pin = nullptr,
                                    bool deterministic_only = false) {
    return {info, Check::own, pin, deterministic_only, own};
  }

  // A pin that sets fields of the options to constants, each field followed by its value:
  // pin_fields<&Options::op, Op::layer, &Options::min_world, 2> (a Pin, so a table row names it
  // where it would otherwise write a lambda that assigns them).
  template <auto Field, auto Value, auto... More>
  static void pin_fields(Options& o, const RunConfig& config) {
    o.*Field = Value;
    if constexpr (sizeof...(More) > 0) pin_fields<More...>(o, config);
  }
};

// One entry of a mutant catalog, registered as "mutant:<name>".
template <class I>
struct Mutant {
  const char* name = nullptr;         // "bias-on-every-rank"
  const char* description = nullptr;  // the bug in words, and where it was seen
  std::shared_ptr<const I> (*make)() = nullptr;
  // Claims the deterministic kernel, so the bit-exactness properties apply to it (a bug in the
  // algorithm, not in the summation order).
  bool deterministic = true;
  // Claims ImplementationInfo::two_way_tree (softmax_merge: merge() is a chain of two-way steps).
  bool two_way_tree = false;
};

// make() for a catalog entry: the family's adapter over a mutant type.
template <class I, class Adapter>
std::shared_ptr<const I> make_mutant() {
  return std::make_shared<const Adapter>();
}

template <class F>
class FamilySuite final : public RegistrySuite<typename F::Interface> {
  using Base = RegistrySuite<typename F::Interface>;

 public:
  std::string name() const override { return F::info.name; }
  std::string description() const override { return F::info.description; }

  std::vector<PropertyInfo> properties() const override {
    std::vector<PropertyInfo> out;
    for (const auto& p : F::properties) {
      out.push_back({p.info.name, p.info.description, p.info.numeric});
    }
    return out;
  }

  bool applies(const std::string& property, const std::string& impl) const override {
    return !find(property).deterministic_only || Base::deterministic(impl);
  }

  void run_case(const std::string& property, const std::string& impl,
                const RunConfig& config) const override {
    const Property<F>& p = find(property);
    const auto& target = Base::implementation(impl);
    typename F::Options options;
    if (p.pin != nullptr) p.pin(options, config);
    const typename F::Case c = *gen_case(config, options);
    F::visit_types(c, [&]<class T>(T) { F::template check_case<T>(p, target, c); });
  }

 private:
  // @throws UsageError naming the suite's properties.
  static const Property<F>& find(const std::string& property) {
    std::string known;
    for (const auto& p : F::properties) {
      if (p.info.name == property) return p;
      known += (known.empty() ? "" : ", ") + std::string(p.info.name);
    }
    throw UsageError("suite '" + std::string(F::info.name) + "' has no property '" + property +
                     "'; its properties: " + known);
  }
};

// Registers family F, idempotently: the library's own ops as the deterministic implementation
// "shardcheck", every mutant of its catalog as "mutant:<name>", then the suite unless a suite of
// its name is registered already (builtin registration may run more than once).
template <class F>
void register_family() {
  auto& reg = ImplementationRegistry<typename F::Interface>::instance();
  reg.add_once({"shardcheck", F::info.library_description, false, true},
               std::make_shared<const typename F::Library>());
  for (const auto& m : F::mutants()) {
    reg.add_once(
        {std::string("mutant:") + m.name, m.description, true, m.deterministic, m.two_way_tree},
        m.make());
  }
  auto& suites = SuiteRegistry::instance();
  if (suites.find(F::info.name) == nullptr) suites.add(std::make_unique<FamilySuite<F>>());
}

// visit_types for a family whose interface takes the four floating element types.
struct FloatTypes {
  template <class Case, class Fn>
  static void visit_types(const Case& c, Fn&& fn) {
    visit_float_dtype(c.dtype, std::forward<Fn>(fn));
  }
};

}  // namespace shardcheck::check
