// A rank's outputs as bytes and back: how the MPI case driver (engine/case_driver.hpp) brings
// every rank's outputs and ledger from the process that ran it to every process of the run.
//
// One function serves both directions, as Boost.Serialization's `serialize(Archive&, T&)` does:
// field(a, x) writes x into a ByteWriter or reads it back from a ByteReader. It knows
//   - arithmetic types, enums and the 16-bit floats (their bytes, this machine's byte order:
//     every process of an MPI run is the same program, docs/mpi.md);
//   - Tensor<T> (its shape, then its elements), std::vector, std::optional, std::string;
//   - LedgerEntry and Ledger;
//   - any struct with a `fields(S& s, F&& f)` found by argument-dependent lookup, which calls
//     f(members...) with every member in declaration order. Each rank family declares it beside
//     its Outputs struct (e.g. suites/linear/linear_impl.hpp), with a static_assert on the
//     struct's size where every member is a tensor, so a member added later and not listed
//     fails to compile instead of arriving empty.
#pragma once

#include "runtime/errors.hpp"
#include "runtime/ledger.hpp"
#include "tensor/tensor.hpp"

#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace shardcheck::check {

class ByteWriter {
 public:
  static constexpr bool reading = false;
  void raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  std::vector<std::byte> take() && { return std::move(bytes_); }

 private:
  std::vector<std::byte> bytes_;
};

class ByteReader {
 public:
  static constexpr bool reading = true;
  explicit ByteReader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  // @throws Error when fewer than n bytes are left (the writer and the reader disagree).
  void raw(void* p, std::size_t n) {
    if (n > bytes_.size() - pos_) {
      throw Error("rank outputs: " + std::to_string(bytes_.size()) +
                  " bytes end before the field at byte " + std::to_string(pos_) +
                  "; the processes of an MPI run must be the same program");
    }
    if (n != 0) std::memcpy(p, bytes_.data() + pos_, n);
    pos_ += n;
  }
  bool at_end() const noexcept { return pos_ == bytes_.size(); }

 private:
  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
};

template <class X>
struct is_tensor : std::false_type {};
template <class T>
struct is_tensor<Tensor<T>> : std::true_type {};
template <class X>
struct is_vector : std::false_type {};
template <class X>
struct is_vector<std::vector<X>> : std::true_type {};
template <class X>
struct is_optional : std::false_type {};
template <class X>
struct is_optional<std::optional<X>> : std::true_type {};

// Copied as bytes: numbers, enums, bfloat16 and float16 (trivially copyable structs of one
// 16-bit word).
template <class X>
inline constexpr bool is_plain_v = std::is_arithmetic_v<X> || std::is_enum_v<X> ||
                                   std::is_same_v<X, bfloat16> || std::is_same_v<X, float16>;

template <class A>
void field_size(A& a, std::size_t& n) {
  auto v = static_cast<std::uint64_t>(n);
  a.raw(&v, sizeof v);
  n = static_cast<std::size_t>(v);
}

template <class A, class X>
void field(A& a, X& x);

template <class A>
void field(A& a, LedgerEntry& e) {
  std::vector<int> group = e.group ? *e.group : std::vector<int>{};
  field(a, group);
  if constexpr (A::reading) e.group = std::make_shared<const std::vector<int>>(std::move(group));
  field(a, e.op);
  field(a, e.dtype);
  field(a, e.count);
  field(a, e.bytes_sent);
  field(a, e.bytes_recv);
  field(a, e.algorithm);
  field(a, e.reduce_op);
  field(a, e.peer);
  field(a, e.step);
}

template <class A>
void field(A& a, Ledger& l) {
  std::vector<LedgerEntry> entries = l.entries();
  field(a, entries);
  if constexpr (A::reading) {
    l.clear();
    for (auto& e : entries) l.record(std::move(e));
  }
}

template <class A, class X>
void field(A& a, X& x) {
  if constexpr (is_plain_v<X>) {
    a.raw(&x, sizeof x);
  } else if constexpr (std::is_same_v<X, std::string>) {
    std::size_t n = x.size();
    field_size(a, n);
    x.resize(n);
    a.raw(x.data(), n);
  } else if constexpr (is_tensor<X>::value) {
    // The shape, then the element count: a default Tensor (shape [], no elements) differs from
    // a scalar (shape [], one element).
    Shape shape = x.shape();
    std::size_t n = x.size();
    field(a, shape);
    field_size(a, n);
    if constexpr (A::reading) {
      x = n == 0 && shape.empty() ? X() : X(std::move(shape));
      if (x.size() != n) {
        throw Error("rank outputs: a tensor of shape " + format_shape(x.shape()) + " with " +
                    std::to_string(n) +
                    " elements; the processes of an MPI run must be the same program");
      }
    }
    a.raw(x.data(), x.size() * sizeof(*x.data()));
  } else if constexpr (is_vector<X>::value) {
    std::size_t n = x.size();
    field_size(a, n);
    x.resize(n);
    for (auto& e : x) field(a, e);
  } else if constexpr (is_optional<X>::value) {
    bool has = x.has_value();
    field(a, has);
    if (!has) {
      x.reset();
      return;
    }
    if (!x) x.emplace();
    field(a, *x);
  } else {
    fields(x, [&](auto&... members) { (field(a, members), ...); });
  }
}

// x as bytes (x is moved from: a rank's outputs are sent once).
template <class X>
std::vector<std::byte> to_bytes(X&& x) {
  ByteWriter w;
  std::remove_cvref_t<X> own = std::forward<X>(x);
  field(w, own);
  return std::move(w).take();
}

// The X that to_bytes wrote. @throws Error when the bytes are short or too long.
template <class X>
X from_bytes(std::span<const std::byte> bytes) {
  ByteReader r(bytes);
  X x{};
  field(r, x);
  if (!r.at_end()) {
    throw Error("rank outputs: " + std::to_string(bytes.size()) +
                " bytes hold more than the outputs read from them; the processes of an MPI run "
                "must be the same program");
  }
  return x;
}

}  // namespace shardcheck::check
