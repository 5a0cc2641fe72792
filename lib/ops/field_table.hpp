// A configuration's fields, each named once: `ConfigFields<C>::fields`, a constexpr list of
// {JSON name, pointer to member} declared beside the op's spec
// (lib/ops/<family>/<family>_spec.hpp), in the order the spec's JSON lists them. Both ends of the
// case format walk this one list:
//   - the writer, `to_json(cfg)` (ops/op_spec.hpp): what `shardcheck list --json` prints as an
//     op's "config" and what a case file's config object holds;
//   - the readers, `read_fields(config, cfg)` (properties/compare/config_fields.hpp): what
//     `shardcheck compare` accepts, a field left out keeping cfg's value.
// So a field's name, its place and its type are written once, and the reader reads by
// construction what the writer writes. A field's checks against the case's sizes (a config
// tokens equal to sizes.tokens, eps > 0) stay with the family's reader.
//
// A field named as its member, the usual case, is listed by the member's name alone (as
// nlohmann::json's NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE lists a type's fields):
//   SHARDCHECK_CONFIG_FIELDS(MlpConfig, activation, ffn_features, ffn_split, tokens, ...);
// A field of a member struct written flat (the norm's kind as "kind") is
// config_field("kind", &C::norm, &NormConfig::kind); a table with one writes its specialization
// and joins the named parts with std::tuple_cat and SHARDCHECK_FIELDS_OF(C, members...).
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>

namespace shardcheck {

// One field: its name and its place, a pointer to a member or, with `sub`, to a member of one.
template <class Member, class Sub = std::nullptr_t>
struct ConfigField {
  const char* name = nullptr;
  Member member = nullptr;
  Sub sub = nullptr;
};

template <class Member>
constexpr ConfigField<Member> config_field(const char* name, Member member) {
  return {name, member};
}
template <class Member, class Sub>
constexpr ConfigField<Member, Sub> config_field(const char* name, Member member, Sub sub) {
  return {name, member, sub};
}

// Specialized per configuration type with `static constexpr std::tuple fields{...}`.
template <class C>
struct ConfigFields;

template <class C>
concept FieldConfig = requires {
  ConfigFields<std::remove_const_t<C>>::fields;
};

// cfg's field f (const when cfg is).
template <class C, class Member, class Sub>
constexpr auto& field_of(C& cfg, const ConfigField<Member, Sub>& f) {
  if constexpr (std::is_null_pointer_v<Sub>) {
    return cfg.*f.member;
  } else {
    return (cfg.*f.member).*f.sub;
  }
}

// std::tuple{config_field("a", &C::a), config_field("b", &C::b), ...} for the members named.
#define SHARDCHECK_FIELDS_OF(C, ...) \
  std::tuple { SHARDCHECK_DETAIL_EXPAND(SHARDCHECK_DETAIL_FIELDS(C, __VA_ARGS__)) }

// ConfigFields<C> of the members named, each field named as its member, in this order.
#define SHARDCHECK_CONFIG_FIELDS(C, ...)                                       \
  template <>                                                                  \
  struct ConfigFields<C> {                                                     \
    static constexpr std::tuple fields = SHARDCHECK_FIELDS_OF(C, __VA_ARGS__); \
  }

// The list's expansion, one member at a time (C++20 __VA_OPT__; up to 81 members).
#define SHARDCHECK_DETAIL_EXPAND(...) \
  SHARDCHECK_DETAIL_EXPAND4(SHARDCHECK_DETAIL_EXPAND4(SHARDCHECK_DETAIL_EXPAND4(__VA_ARGS__)))
#define SHARDCHECK_DETAIL_EXPAND4(...) \
  SHARDCHECK_DETAIL_EXPAND3(SHARDCHECK_DETAIL_EXPAND3(SHARDCHECK_DETAIL_EXPAND3(__VA_ARGS__)))
#define SHARDCHECK_DETAIL_EXPAND3(...) \
  SHARDCHECK_DETAIL_EXPAND2(SHARDCHECK_DETAIL_EXPAND2(SHARDCHECK_DETAIL_EXPAND2(__VA_ARGS__)))
#define SHARDCHECK_DETAIL_EXPAND2(...) \
  SHARDCHECK_DETAIL_EXPAND1(SHARDCHECK_DETAIL_EXPAND1(SHARDCHECK_DETAIL_EXPAND1(__VA_ARGS__)))
#define SHARDCHECK_DETAIL_EXPAND1(...) __VA_ARGS__
#define SHARDCHECK_DETAIL_FIELDS(C, m, ...) \
  config_field(#m, &C::m)                   \
      __VA_OPT__(, SHARDCHECK_DETAIL_FIELDS_AGAIN SHARDCHECK_DETAIL_PARENS(C, __VA_ARGS__))
#define SHARDCHECK_DETAIL_PARENS ()
#define SHARDCHECK_DETAIL_FIELDS_AGAIN() SHARDCHECK_DETAIL_FIELDS

// fn(name, field) for each field of cfg, in the table's order.
template <FieldConfig C, class Fn>
constexpr void for_each_field(C& cfg, Fn&& fn) {
  std::apply([&](const auto&... f) { (fn(f.name, field_of(cfg, f)), ...); },
             ConfigFields<std::remove_const_t<C>>::fields);
}

}  // namespace shardcheck
