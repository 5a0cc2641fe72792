// The properties a run that completed must satisfy, against the sequential model of
// properties/runtime/collective_model.hpp:
//   - every executed call's result on every rank equals the model's, bitwise (NaN payloads,
//     -0 and subnormals included), and has the model's length;
//   - send buffers are unchanged; each communicator reports the group it was made for;
//   - each rank's ledger has one entry per call it made, in order, with the call's op, group,
//     element type, count, algorithm, step, and the bytes of the documented formulas.
// Each function returns an empty string when the property holds, else what differs.
#pragma once

#include "collectives_exec.hpp"
#include "collectives_program.hpp"

#include <string>

namespace shardcheck::fuzz {

std::string check_outputs(const Program& prog, const Execution& ex);
std::string check_ledgers(const Program& prog, const Execution& ex);

}  // namespace shardcheck::fuzz
