// A test program's RapidCheck defaults: its seed and cases per property. test_main.cpp reads
// them; each program defines them in a file properties/CMakeLists.txt generates
// (shardcheck_rc_defaults()), so the main itself is compiled once for every program.
#pragma once

// The seed every run of this program draws its cases from unless RC_PARAMS is set.
extern const unsigned long long shardcheck_rc_seed;
// Cases per property: 300, or fewer under the sanitizers (properties/CMakeLists.txt).
extern const int shardcheck_rc_max_success;
