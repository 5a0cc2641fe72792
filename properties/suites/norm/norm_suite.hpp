// The norm suite (see norm_suite.cpp for its properties).
#pragma once

#include "engine/registry.hpp"
#include "suites/norm/norm_impl.hpp"

namespace shardcheck::check {

class NormSuite final : public RegistrySuite<NormImplementation> {
 public:
  std::string name() const override;
  std::string description() const override;
  std::vector<PropertyInfo> properties() const override;
  bool applies(const std::string& property, const std::string& impl) const override;
  void run_case(const std::string& property, const std::string& impl,
                const RunConfig& config) const override;
};

// Registers the suite, the library's implementation ("shardcheck") and the mutant catalog.
void register_norm_suite();

}  // namespace shardcheck::check
