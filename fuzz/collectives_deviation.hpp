// Internal to the decoder (collectives_program.cpp): choosing and applying the one deviation
// a program may carry.
#pragma once

#include "collectives_program.hpp"

namespace shardcheck::fuzz::detail {

// The raw bytes that place a deviation: which rank (`who`), and what it does instead (`aux`,
// `aux2`), each taken modulo what the deviation needs.
struct Choice {
  int who = 0, aux = 0, aux2 = 0;
};

// Settles prog.deviation (falling back to a kind that applies to the call, or none when a
// group of one cannot disagree), sets prog.deviant, prog.deviation_text and, for usage_all,
// changes the call itself. Returns in deviant_spec/fault what the deviant issues instead.
void choose_deviation(Program& prog, const Choice& ch, Call& deviant_spec, Fault& fault);

// Fills prog.actions: per world rank, the calls it makes, with the deviation applied.
void build_actions(Program& prog, const Call& deviant_spec, Fault fault);

}  // namespace shardcheck::fuzz::detail
