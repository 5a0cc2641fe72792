// The model suite (model_suite.cpp: its properties, on the generic engine, engine/family.hpp):
// one training step of a decoder-only transformer on a pp × dp × cp × tp mesh against the dense
// high-precision step (docs/model.md).
#pragma once

namespace shardcheck::check {

// Registers the suite, the library's implementation ("shardcheck") and the mutant catalog.
void register_model_suite();

}  // namespace shardcheck::check
