// The attention suite's mutant catalog: realistic bugs of partitioned attention, each a
// registered implementation that the suite must catch. They are built from the library's own
// pieces (the block kernel, the merge, the projections) with one thing done wrong, so each
// differs from a correct implementation in exactly the way its description says.
#pragma once

#include "engine/family.hpp"
#include "suites/attention/attention_impl.hpp"

#include <span>

namespace shardcheck::check {

// Every attention mutant, registered by the suite as "mutant:<name>".
std::span<const Mutant<AttentionImplementation>> attention_mutants();

}  // namespace shardcheck::check
