// The redistribute suite's mutant catalog: the library's planner and step executor with one
// realistic mistake each, an edit of the plan (a step dropped, reordered, or with the wrong
// counts, op or split policy) or a replacement for one kind of step (padding left in an uneven
// gather, a gather along the wrong axis, a slice indexed by the world rank instead of the mesh
// coordinate, a reduction carried out in a lower precision than the element type). The suite
// must kill every one (the tests and `shardcheck mutants redistribute`).
#pragma once

#include "engine/family.hpp"
#include "suites/redistribute/redistribute_impl.hpp"

#include <span>

namespace shardcheck::check {

// Every redistribute mutant, registered by the suite as "mutant:<name>".
std::span<const Mutant<RedistributeImplementation>> redistribute_mutants();

}  // namespace shardcheck::check
