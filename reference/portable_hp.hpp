// portable_hp: the 113-bit scalar in portable C++ (boost::multiprecision::cpp_bin_float_quad,
// IEEE binary128's precision and exponent range), whatever hp is. hp is this type under clang;
// under GCC hp is float128, and the properties run both so the clang builds' reference is tested
// by the GCC build too. Separate from precision.hpp because its header is slow to compile.
#pragma once

#include "reference/precision.hpp"

#include <boost/multiprecision/cpp_bin_float.hpp>

namespace shardcheck::reference {

using portable_hp = boost::multiprecision::cpp_bin_float_quad;

static_assert(std::numeric_limits<portable_hp>::digits == 113);

}  // namespace shardcheck::reference
