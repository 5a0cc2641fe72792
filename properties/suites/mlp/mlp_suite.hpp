// The mlp suite (mlp_suite.cpp: its properties, on the generic engine, engine/family.hpp).
#pragma once

namespace shardcheck::check {

// Registers the suite, the library's implementation ("shardcheck") and the mutant catalog.
void register_mlp_suite();

}  // namespace shardcheck::check
