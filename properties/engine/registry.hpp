// The implementations of one op family, by name. The library's own, the mutants and a user's
// all register here; a suite runs its properties against any of them (RegistrySuite, the base
// of the generic suite engine's FamilySuite, engine/family.hpp, whose register_family registers
// a family's library implementation and mutant catalog).
//
// A user registers from their own translation unit, which their executable links directly (so
// its static initializer runs), with no change to the toolkit:
//
//   static shardcheck::check::Registration<shardcheck::check::LinearImplementation> mine(
//       {.name = "my-kernels", .description = "our fused TP linear"},
//       std::make_shared<shardcheck::check::LinearAdapter<MyLinear>>());
#pragma once

#include "engine/suite.hpp"
#include "runtime/errors.hpp"

#include <memory>
#include <string>
#include <vector>

namespace shardcheck::check {

template <class Interface>
class ImplementationRegistry {
 public:
  struct Entry {
    ImplementationInfo info;
    std::shared_ptr<const Interface> impl;
  };

  static ImplementationRegistry& instance() {
    static ImplementationRegistry registry;
    return registry;
  }

  // @throws UsageError when the name is taken (two implementations cannot share a name).
  void add(ImplementationInfo info, std::shared_ptr<const Interface> impl) {
    if (find(info.name) != nullptr) {
      throw UsageError("implementation '" + info.name +
                       "' is registered twice; give each implementation its own name");
    }
    entries_.push_back({std::move(info), std::move(impl)});
  }
  // Adds unless the name is taken by an earlier call with the same name (builtin registration
  // may run more than once).
  void add_once(ImplementationInfo info, std::shared_ptr<const Interface> impl) {
    if (find(info.name) == nullptr) entries_.push_back({std::move(info), std::move(impl)});
  }

  const Entry* find(const std::string& name) const {
    for (const auto& e : entries_) {
      if (e.info.name == name) return &e;
    }
    return nullptr;
  }
  // The entry whose implementation is the object `impl` (what a suite's check was given), or
  // nullptr: how a check finds what `impl` claims (its ImplementationInfo).
  const Entry* entry_of(const Interface& impl) const {
    for (const auto& e : entries_) {
      if (e.impl.get() == &impl) return &e;
    }
    return nullptr;
  }
  const std::vector<Entry>& entries() const { return entries_; }

  std::vector<ImplementationInfo> infos() const {
    std::vector<ImplementationInfo> out;
    for (const auto& e : entries_) out.push_back(e.info);
    return out;
  }

  // @throws UsageError naming the known implementations.
  const Entry& get(const std::string& name) const {
    if (const Entry* e = find(name)) return *e;
    std::string known;
    for (const auto& e : entries_) known += (known.empty() ? "" : ", ") + e.info.name;
    throw UsageError("unknown implementation '" + name + "'; known: " + known);
  }

 private:
  std::vector<Entry> entries_;
};

template <class Interface>
struct Registration {
  Registration(ImplementationInfo info, std::shared_ptr<const Interface> impl) {
    ImplementationRegistry<Interface>::instance().add(std::move(info), std::move(impl));
  }
};

// The base of a suite whose implementations are those registered for `I`
// (ImplementationRegistry<I>): it lists them, and gives the suite an implementation by name and
// whether that one claims the deterministic kernel (for applies()).
template <class I>
class RegistrySuite : public Suite {
 public:
  using Interface = I;
  using Registry = ImplementationRegistry<I>;

  std::vector<ImplementationInfo> implementations() const override {
    return Registry::instance().infos();
  }

 protected:
  // @throws UsageError naming the known implementations.
  static const I& implementation(const std::string& name) {
    return *Registry::instance().get(name).impl;
  }
  // True when `name` is registered and claims the deterministic kernel.
  static bool deterministic(const std::string& name) {
    const auto* e = Registry::instance().find(name);
    return e != nullptr && e->info.deterministic;
  }
};

}  // namespace shardcheck::check
