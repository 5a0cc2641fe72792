// The names of the library's enums, each written once: what the library prints (`name(e)`), what
// an op's spec carries in JSON (`shardcheck list --json`, ops/op_spec.hpp), and what case files
// and the command line accept (`enum_from_name`; the compare parsers' named_or,
// properties/compare/config_fields.hpp). So a name the spec prints is by construction a name the
// parsers read back.
//
// An enum E whose enumerators are 0, 1, ..., N − 1 (no explicit values) is named beside its
// definition, in namespace shardcheck, enumerator i's name at index i (as nlohmann::json's
// NLOHMANN_JSON_SERIALIZE_ENUM names an enum's values in one declaration):
//   SHARDCHECK_ENUM_NAMES(MaskKind, "none", "causal", "explicit_mask");
// which specializes EnumNames<MaskKind> with `static constexpr std::array names`.
// An enumerator added without a name prints as "?" and parses from nothing, and nothing fails to
// compile: extend the table with the enum (properties/compare/config_fields_tests.cpp pins each
// table's names, so a name changed or dropped there fails it; an enumerator the table never
// listed it cannot see).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace shardcheck {

// Specialized per enum with `static constexpr std::array<std::string_view, N> names`.
template <class E>
struct EnumNames;

#define SHARDCHECK_ENUM_NAMES(E, ...)                                                   \
  template <>                                                                           \
  struct EnumNames<E> {                                                                 \
    static constexpr std::array names = std::to_array<std::string_view>({__VA_ARGS__}); \
  }

template <class E>
concept NamedEnum = std::is_enum_v<E> && requires {
  EnumNames<E>::names;
};

template <NamedEnum E>
inline constexpr std::size_t enum_count = EnumNames<E>::names.size();

// e's name; "?" for a value outside the table (an out-of-range integer cast to E).
template <NamedEnum E>
constexpr std::string_view name(E e) noexcept {
  const auto i = static_cast<std::size_t>(e);
  return i < enum_count<E> ? EnumNames<E>::names[i] : std::string_view("?");
}

// The enumerator named `s`, or nullopt (names are case-sensitive, as PyTorch's strings are).
template <NamedEnum E>
constexpr std::optional<E> enum_from_name(std::string_view s) noexcept {
  for (std::size_t i = 0; i < enum_count<E>; ++i) {
    if (EnumNames<E>::names[i] == s) return static_cast<E>(i);
  }
  return std::nullopt;
}

// Every enumerator of E, in declaration order.
template <NamedEnum E>
constexpr std::array<E, enum_count<E>> enum_values() noexcept {
  std::array<E, enum_count<E>> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<E>(i);
  return out;
}

// The name as a std::string, for messages built with +.
template <NamedEnum E>
std::string to_string(E e) {
  return std::string(name(e));
}

// "a, b or c": E's names, for a message that lists the choices.
template <NamedEnum E>
std::string names_or() {
  std::string s;
  for (std::size_t i = 0; i < enum_count<E>; ++i) {
    if (i != 0) s += i + 1 == enum_count<E> ? " or " : ", ";
    s += EnumNames<E>::names[i];
  }
  return s;
}

}  // namespace shardcheck
