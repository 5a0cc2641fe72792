// The config values several ops share, read from a case manifest's config object
// (cases/json_fields.hpp) in the form `shardcheck list --json` writes them (ops/op_spec.hpp):
//   a split policy  {"kind": "chunk"} | {"kind": "balanced"} | {"kind": "explicit", "sizes": [..]}
//   an algorithm    "ring", "sequential", ... (runtime/ledger.hpp's names)
//   a kernel        "deterministic" | "fast" (ops/linear/linear.hpp)
//   any other enum  its names (runtime/enum_names.hpp: the names the spec prints)
// A field the manifest leaves out takes the config type's C++ default, the one passed here.
#pragma once

#include "cases/json_fields.hpp"
#include "layout/split_policy.hpp"
#include "ops/linear/linear.hpp"
#include "runtime/ledger.hpp"

#include <string>
#include <vector>

namespace shardcheck::check {

// The enumerator of E whose name (runtime/enum_names.hpp, the names the spec prints) the config
// gives at `key`; `fallback` when the field is left out. @throws cases::CaseError listing E's
// names.
template <NamedEnum E>
E named_or(cases::Fields& config, const std::string& key, E fallback) {
  if (!config.has(key)) return fallback;
  std::vector<std::string> names;
  for (E a : enum_values<E>()) names.emplace_back(name(a));
  return enum_from_name<E>(config.choice(key, names)).value_or(fallback);
}

// @throws cases::CaseError naming the field: not an object, an unknown kind, sizes with
// another kind or without "explicit", an unknown field inside.
SplitPolicy split_or(cases::Fields& config, const std::string& key, const SplitPolicy& fallback);

}  // namespace shardcheck::check
