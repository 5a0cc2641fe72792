// The softmax_merge suite (see merge_suite.cpp for its properties).
#pragma once

#include "engine/registry.hpp"
#include "suites/softmax_merge/softmax_merge_impl.hpp"

namespace shardcheck::check {

class SoftmaxMergeSuite final : public RegistrySuite<SoftmaxMergeImplementation> {
 public:
  std::string name() const override;
  std::string description() const override;
  std::vector<PropertyInfo> properties() const override;
  void run_case(const std::string& property, const std::string& impl,
                const RunConfig& config) const override;
};

// Registers the suite, the library's implementation ("shardcheck") and the mutant catalog.
void register_softmax_merge_suite();

}  // namespace shardcheck::check
