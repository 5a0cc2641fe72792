#include "engine/suite.hpp"

namespace shardcheck::check {

SuiteRegistry& SuiteRegistry::instance() {
  static SuiteRegistry registry;
  return registry;
}

void SuiteRegistry::add(std::unique_ptr<Suite> suite) {
  if (find(suite->name()) != nullptr) return;  // builtin registration is idempotent
  suites_.push_back(std::move(suite));
}

const Suite* SuiteRegistry::find(const std::string& name) const {
  for (const auto& s : suites_) {
    if (s->name() == name) return s.get();
  }
  return nullptr;
}

}  // namespace shardcheck::check
