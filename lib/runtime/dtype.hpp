// Element types the runtime moves and reduces: float64, float32, bfloat16, float16 (Eigen's
// storage types) and the integers int32, int64.
//
// `DType` is the runtime tag carried through the type-erased communicator interface, the
// ledger and error messages; `dtype_of<T>` maps a C++ element type to it. Names follow
// PyTorch's dtype names ("float32", "bfloat16") so logs read like the user's own code.
#pragma once

#include "runtime/enum_names.hpp"

#include <Eigen/Core>  // Eigen::bfloat16, Eigen::half (round-to-nearest-even from float)

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace shardcheck {

using bfloat16 = Eigen::bfloat16;
using float16 = Eigen::half;

enum class DType : std::uint8_t { float64, float32, bfloat16, float16, int32, int64 };

// The element types the runtime accepts.
template <class T>
concept Element = std::is_same_v<T, double> || std::is_same_v<T, float> ||
    std::is_same_v<T, bfloat16> || std::is_same_v<T, float16> || std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::int64_t>;

template <Element T>
inline constexpr DType dtype_of = [] {
  if constexpr (std::is_same_v<T, double>) return DType::float64;
  else if constexpr (std::is_same_v<T, float>) return DType::float32;
  else if constexpr (std::is_same_v<T, bfloat16>) return DType::bfloat16;
  else if constexpr (std::is_same_v<T, float16>) return DType::float16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DType::int32;
  else return DType::int64;
}();

// The accumulator of element type T: float64 for float64, float32 for every other floating type
// (bfloat16 and float16 accumulate in float32, as tensor cores do). Every op of lib/ops
// accumulates its dot products and sums in it, and the reference's arithmetic model
// (reference/bounds.hpp, arithmetic_of) is derived from it.
template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// acc_t as a runtime tag: float64 for float64, float32 otherwise.
constexpr DType acc_dtype(DType t) noexcept {
  return t == DType::float64 ? DType::float64 : DType::float32;
}

// X(T, args...) for each floating element type, in the order float64, float32, bfloat16,
// float16, and X(T) without arguments: how explicit instantiations and per-type virtual methods
// are written once (the list of types is written here only).
#define SHARDCHECK_FOR_EACH_FLOAT_TYPE_WITH(X, ...) \
  X(double, __VA_ARGS__) X(float, __VA_ARGS__) X(bfloat16, __VA_ARGS__) X(float16, __VA_ARGS__)
#define SHARDCHECK_DETAIL_APPLY(T, X) X(T)
#define SHARDCHECK_FOR_EACH_FLOAT_TYPE(X) \
  SHARDCHECK_FOR_EACH_FLOAT_TYPE_WITH(SHARDCHECK_DETAIL_APPLY, X)

// Bytes per element.
constexpr std::size_t size_of(DType t) noexcept {
  switch (t) {
    case DType::float64: return 8;
    case DType::float32: return 4;
    case DType::bfloat16: return 2;
    case DType::float16: return 2;
    case DType::int32: return 4;
    case DType::int64: return 8;
  }
  return 0;
}

constexpr bool is_floating(DType t) noexcept {
  return t == DType::float64 || t == DType::float32 || t == DType::bfloat16 || t == DType::float16;
}

// PyTorch's names: "float64", "float32", "bfloat16", "float16", "int32", "int64".
SHARDCHECK_ENUM_NAMES(DType, "float64", "float32", "bfloat16", "float16", "int32", "int64");

inline constexpr DType all_dtypes[] = {DType::float64, DType::float32, DType::bfloat16,
                                       DType::float16, DType::int32,   DType::int64};

// Calls f(T{}) with the C++ element type of `t`: the one place a runtime tag becomes a type.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::float64: return f(double{});
    case DType::float32: return f(float{});
    case DType::bfloat16: return f(bfloat16{});
    case DType::float16: return f(float16{});
    case DType::int32: return f(std::int32_t{});
    case DType::int64: break;
  }
  return f(std::int64_t{});
}

}  // namespace shardcheck
