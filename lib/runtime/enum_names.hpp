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
// The macro checks at compile time that the names and the enumerators are as many: an enumerator
// added without a name (or a name left for one removed) fails to compile, naming the enum
// (detail::names_every_enumerator, with GCC and Clang; properties/compare/config_fields_tests.cpp
// pins each table's names, so a name changed there fails it).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace shardcheck {

// Specialized per enum with `static constexpr std::array<std::string_view, N> names`.
template <class E>
struct EnumNames;

namespace detail {

// Whether V is one of its enum's enumerators. The compiler prints a template argument that is
// an enumerator by its name ("V = shardcheck::MaskKind::causal") and any other value as a cast
// ("V = (shardcheck::MaskKind)3"); magic_enum reads enums the same way. Other compilers: true.
template <auto V>
constexpr bool is_enumerator() noexcept {
#if defined(__GNUC__) || defined(__clang__)
  constexpr std::string_view f = __PRETTY_FUNCTION__;
  constexpr std::size_t at = f.find("V = ");
  static_assert(at != std::string_view::npos, "is_enumerator: an unknown __PRETTY_FUNCTION__");
  return f[at + 4] != '(';
#else
  return true;
#endif
}

// Whether E's enumerators are exactly 0, 1, ..., N − 1.
template <class E, std::size_t... I>
constexpr bool enumerators_are(std::index_sequence<I...> /*values*/) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  return (is_enumerator<static_cast<E>(I)>() && ...) &&
         !is_enumerator<static_cast<E>(sizeof...(I))>();
#else
  return true;
#endif
}

// Whether EnumNames<E> names every enumerator of E, and nothing else.
template <class E>
constexpr bool names_every_enumerator() noexcept {
  return enumerators_are<E>(std::make_index_sequence<EnumNames<E>::names.size()>());
}

}  // namespace detail

#define SHARDCHECK_ENUM_NAMES(E, ...)                                                   \
  template <>                                                                           \
  struct EnumNames<E> {                                                                 \
    static constexpr std::array names = std::to_array<std::string_view>({__VA_ARGS__}); \
  };                                                                                    \
  static_assert(detail::names_every_enumerator<E>(),                                    \
                "SHARDCHECK_ENUM_NAMES(" #E                                             \
                ", ...): not one name per enumerator (an "                              \
                "enumerator added without a name, or a name for none); name each, in order")

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
