// A case manifest's config object (cases/json_fields.hpp) read in the form `shardcheck list
// --json` writes it (ops/op_spec.hpp): a configuration's fields by its table (read_fields,
// ops/field_table.hpp), each value as the writer writes its type:
//   a split policy  {"kind": "chunk"} | {"kind": "balanced"} | {"kind": "explicit", "sizes": [..]}
//   an algorithm    "ring", "sequential", ... (runtime/ledger.hpp's names)
//   a kernel        "deterministic" | "fast" (ops/linear/linear.hpp)
//   any other enum  its names (runtime/enum_names.hpp: the names the spec prints)
//   an optional     its value, or null for none
//   a configuration its fields, as an object
// A field the manifest leaves out takes the value passed (the config type's C++ default, or what
// the family's reader set from the case's sizes).
#pragma once

#include "cases/json_fields.hpp"
#include "layout/split_policy.hpp"
#include "ops/field_table.hpp"
#include "ops/linear/linear.hpp"
#include "runtime/ledger.hpp"

#include <cstdint>
#include <optional>
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

// The value at `key` as the spec writes a field of its type; `fallback` when the field is left
// out. @throws cases::CaseError naming the field.
inline bool field_or(cases::Fields& config, const std::string& key, bool fallback) {
  return config.boolean_or(key, fallback);
}
inline double field_or(cases::Fields& config, const std::string& key, double fallback) {
  return config.number_or(key, fallback);
}
inline std::size_t field_or(cases::Fields& config, const std::string& key, std::size_t fallback) {
  return config.size_or(key, fallback);
}
template <NamedEnum E>
E field_or(cases::Fields& config, const std::string& key, E fallback) {
  return named_or(config, key, fallback);
}
inline SplitPolicy field_or(cases::Fields& config, const std::string& key,
                            const SplitPolicy& fallback) {
  return split_or(config, key, fallback);
}
inline std::vector<double> field_or(cases::Fields& config, const std::string& key,
                                    std::vector<double> fallback) {
  return config.numbers_or(key, std::move(fallback));
}
inline std::vector<std::size_t> field_or(cases::Fields& config, const std::string& key,
                                         std::vector<std::size_t> fallback) {
  return config.sizes_or(key, std::move(fallback));
}
// An integer or null (none): padding_idx, ignore_index.
std::optional<std::int64_t> field_or(cases::Fields& config, const std::string& key,
                                     std::optional<std::int64_t> fallback);
// A non-negative integer or null (none): real_vocab.
std::optional<std::size_t> field_or(cases::Fields& config, const std::string& key,
                                    std::optional<std::size_t> fallback);

template <FieldConfig C>
void read_fields(cases::Fields& config, C& cfg);

// A configuration inside the config (the attention layer's context_parallel): its fields from
// the object at `key`, every other field of that object refused.
template <FieldConfig C>
C field_or(cases::Fields& config, const std::string& key, C fallback) {
  if (!config.has(key)) return fallback;
  cases::Fields object = config.object(key);
  read_fields(object, fallback);
  object.done();
  return fallback;
}
template <FieldConfig C>
std::optional<C> field_or(cases::Fields& config, const std::string& key,
                          std::optional<C> fallback) {
  if (!config.has(key)) return fallback;
  if (config.raw(key).is_null()) return std::nullopt;
  return field_or(config, key, fallback.value_or(C{}));
}

// Each field of cfg's table (ConfigFields<C>, beside the op's spec) from `config`, in the
// table's order; a field the config leaves out keeps cfg's value. Unknown fields are left for
// the caller's config.done(), which names them with the known ones.
template <FieldConfig C>
void read_fields(cases::Fields& config, C& cfg) {
  for_each_field(cfg, [&config](const char* key, auto& v) { v = field_or(config, key, v); });
}

}  // namespace shardcheck::check
