// The attention suite (see attention_suite.cpp for its properties).
#pragma once

#include "suites/attention/attention_impl.hpp"
#include "engine/registry.hpp"

namespace shardcheck::check {

class AttentionSuite final : public RegistrySuite<AttentionImplementation> {
 public:
  std::string name() const override;
  std::string description() const override;
  std::vector<PropertyInfo> properties() const override;
  void run_case(const std::string& property, const std::string& impl,
                const RunConfig& config) const override;
};

// Registers the suite, the library's implementation ("shardcheck") and the mutant catalog.
void register_attention_suite();

}  // namespace shardcheck::check
