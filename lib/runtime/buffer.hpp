// A type-erased view of elements: what the argument checks and the backends see of the spans
// the typed calls of communicator.hpp take.
#pragma once

#include "runtime/dtype.hpp"

#include <cstddef>
#include <span>

namespace shardcheck {

struct ConstBuffer {
  const void* data;
  std::size_t count;  // elements
  DType dtype;
};
struct MutBuffer {
  void* data;
  std::size_t count;  // elements
  DType dtype;
};

template <Element T>
ConstBuffer erase(std::span<const T> s) noexcept {
  return {s.data(), s.size(), dtype_of<T>};
}
template <Element T>
MutBuffer erase(std::span<T> s) noexcept {
  return {s.data(), s.size(), dtype_of<T>};
}

}  // namespace shardcheck
