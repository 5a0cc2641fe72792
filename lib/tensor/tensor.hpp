// Tensor<T>: a dense, row-major, owning n-dimensional array: the only container the ops and
// the check engine pass around. Deliberately small: shape, data, element access, equality,
// transpose and element type conversion.
// Shapes are printed as [4, 16] everywhere (logs, errors, reports).
#pragma once

#include "runtime/dtype.hpp"
#include "runtime/errors.hpp"

#include <cstddef>
#include <cstring>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace shardcheck {

using Shape = std::vector<std::size_t>;

inline std::size_t numel(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), std::size_t{1}, std::multiplies<>());
}

// "[4, 16]"
inline std::string format_shape(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i != 0) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + ']';
}

template <class T>
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape) : shape_(std::move(shape)), data_(numel(shape_)) {}
  Tensor(Shape shape, std::vector<T> data) : shape_(std::move(shape)), data_(std::move(data)) {
    if (data_.size() != numel(shape_)) {
      throw UsageError("Tensor: shape " + format_shape(shape_) + " needs " +
                       std::to_string(numel(shape_)) + " elements but " +
                       std::to_string(data_.size()) +
                       " were given; pass numel(shape) values in row-major order");
    }
  }

  const Shape& shape() const noexcept { return shape_; }
  std::size_t dim(std::size_t i) const { return shape_.at(i); }
  std::size_t ndim() const noexcept { return shape_.size(); }
  std::size_t size() const noexcept { return data_.size(); }
  bool empty() const noexcept { return data_.empty(); }

  T* data() noexcept { return data_.data(); }
  const T* data() const noexcept { return data_.data(); }
  std::span<T> span() noexcept { return data_; }
  std::span<const T> span() const noexcept { return data_; }
  std::vector<T>& values() noexcept { return data_; }
  const std::vector<T>& values() const noexcept { return data_; }

  // 2-D access (rows, cols); @pre ndim() == 2.
  T& operator()(std::size_t i, std::size_t j) noexcept { return data_[i * shape_[1] + j]; }
  const T& operator()(std::size_t i, std::size_t j) const noexcept {
    return data_[i * shape_[1] + j];
  }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  Shape shape_;
  std::vector<T> data_;
};

// Bitwise equality (NaN payloads and the sign of zero included): what "bit-identical" means.
template <class T>
bool bit_equal(const Tensor<T>& a, const Tensor<T>& b) {
  if (a.shape() != b.shape()) return false;
  return a.empty() ||
         std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;  // NOLINT(bugprone-*)
}

// The transpose of a 2-D tensor: t(j, i) = a(i, j), shape [a.dim(1), a.dim(0)]. @pre a.ndim() == 2.
template <class T>
Tensor<T> transpose(const Tensor<T>& a) {
  Tensor<T> t(Shape{a.dim(1), a.dim(0)});
  for (std::size_t i = 0; i < a.dim(0); ++i) {
    for (std::size_t j = 0; j < a.dim(1); ++j) t(j, i) = a(i, j);
  }
  return t;
}

// a with every element converted to T by static_cast (an accumulator's values rounded once to
// the storage type), same shape.
template <class T, class A>
Tensor<T> rounded(const Tensor<A>& a) {
  Tensor<T> out(a.shape());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = static_cast<T>(a[i]);
  return out;
}

}  // namespace shardcheck
