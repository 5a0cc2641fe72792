#include "engine/case_driver.hpp"

namespace shardcheck::check {

namespace {
const CaseDriver* active = nullptr;
}  // namespace

const CaseDriver* case_driver() noexcept { return active; }

void set_case_driver(const CaseDriver* d) noexcept { active = d; }

void same_case(const std::string& description) {
  const auto* d = case_driver();
  if (d == nullptr) return;
  const auto checker = d->agree(description);
  if (checker == description) return;
  d->abandon("drew the case\n  " + description + "\nwhere process 0 drew\n  " + checker +
             "\nevery process of an MPI run must run the same command (the same seed, cases, "
             "max-world and dtypes) of the same program");
}

}  // namespace shardcheck::check
