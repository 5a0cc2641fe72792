// "[2,0,3]": integers in brackets, comma-separated, as error messages and case descriptions
// print counts, groups of ranks and split sizes.
#pragma once

#include <cstddef>
#include <string>

namespace shardcheck {

// Values: any sized range of integers (std::vector<int>, std::span<const std::size_t>, ...).
template <class Values>
std::string format_list(const Values& values) {
  std::string s = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i != 0) s += ',';
    s += std::to_string(values[i]);
  }
  return s + ']';
}

}  // namespace shardcheck
