// The config values several ops share, read from a case manifest's config object
// (cases/json_fields.hpp) in the form `shardcheck list --json` writes them (ops/op_spec.hpp):
//   a split policy  {"kind": "chunk"} | {"kind": "balanced"} | {"kind": "explicit", "sizes": [..]}
//   an algorithm    "ring", "sequential", ... (runtime/ledger.hpp's names)
//   a kernel        "deterministic" | "fast" (ops/linear/linear.hpp)
// A field the manifest leaves out takes the config type's C++ default, the one passed here.
#pragma once

#include "cases/json_fields.hpp"
#include "layout/split_policy.hpp"
#include "ops/linear/linear.hpp"
#include "runtime/ledger.hpp"

#include <string>
#include <vector>

namespace shardcheck::check {

// The value of `all` whose name (name(value)) the config gives at `key`; `fallback` when the
// field is left out. @throws cases::CaseError listing the names of `all`.
template <class E>
E named_or(cases::Fields& config, const std::string& key, const std::vector<E>& all, E fallback) {
  if (!config.has(key)) return fallback;
  std::vector<std::string> names;
  names.reserve(all.size());
  for (E a : all) names.emplace_back(name(a));
  const std::string s = config.choice(key, names);
  for (E a : all) {
    if (name(a) == s) return a;
  }
  return fallback;
}

// @throws cases::CaseError naming the field: not an object, an unknown kind, sizes with
// another kind or without "explicit", an unknown field inside.
SplitPolicy split_or(cases::Fields& config, const std::string& key, const SplitPolicy& fallback);
// @throws cases::CaseError listing the algorithms' names.
Algorithm algorithm_or(cases::Fields& config, const std::string& key, Algorithm fallback);
// @throws cases::CaseError listing "deterministic" and "fast".
Kernel kernel_or(cases::Fields& config, const std::string& key, Kernel fallback);

}  // namespace shardcheck::check
