// A double in words as printf's %.<digits>g writes it: how the verdicts, the reports' bins and
// the commands print errors, bound ratios and figures ("3.5e+13", "0.992", "1e-05").
#pragma once

#include <cstdio>
#include <string>

namespace shardcheck::check {

// v with `digits` significant digits (6: printf's %g; 17: every digit of a double).
inline std::string format_number(double v, int digits = 6) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

}  // namespace shardcheck::check
