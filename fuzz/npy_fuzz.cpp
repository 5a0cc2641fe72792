// libFuzzer harness for the .npy reader (cases/npy.hpp).
//
// Each input is a whole file for parse_npy. A CaseError is the reader refusing it, which is fine;
// any other exception, a crash, a hang or a sanitizer report (out-of-bounds read, overflow, an
// allocation the input does not justify) is a bug. On a file it accepts the harness checks:
//   invariants     data.size() == size() * item_bytes; item_bytes is one the kind has
//   round trip     serialize_npy → parse_npy gives the same kind, item_bytes, shape and data
//                  bytes, and serializing that again gives the same bytes
//   to_tensor      for each of the six element types: succeeds exactly when the descr is the
//                  one npy.hpp says (f8, f4, f2 exactly; u2 for bfloat16; any integer whose
//                  values fit for int64 and int32), otherwise throws CaseError; a tensor has the
//                  array's shape and its items (the same bytes, or the same integer values)
//   to_mask        succeeds exactly on bool arrays, with 0/1 bytes
// A violation prints what broke and aborts, so libFuzzer keeps the input.
// SHARDCHECK_FUZZ_VERBOSE=1 prints each accepted file's descr and shape.
#include "cases/npy.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace shardcheck::cases {
namespace {

bool verbose() {
  static const bool v = [] {
    const char* e = std::getenv("SHARDCHECK_FUZZ_VERBOSE");
    return e != nullptr && *e != '\0' && *e != '0';
  }();
  return v;
}

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (const std::size_t d : shape) s += std::to_string(d) + ",";
  return s + ")";
}

[[noreturn]] void violation(const NpyArray* a, const std::string& what) {
  std::fprintf(stderr, "\n==== shardcheck npy fuzz: property violated ====\n");
  if (a != nullptr) {
    std::fprintf(stderr, "array: descr %s, shape %s, %zu data bytes\n", a->descr().c_str(),
                 shape_text(a->shape).c_str(), a->data.size());
  }
  std::fprintf(stderr, "violation: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Item i of an integer array as a wide signed value (u8 above int64's range: nothing).
std::optional<long long> integer_at(const NpyArray& a, std::size_t i) {
  const unsigned char* p = a.data.data() + i * static_cast<std::size_t>(a.item_bytes);
  std::uint64_t u = 0;
  std::memcpy(&u, p, static_cast<std::size_t>(a.item_bytes));  // little-endian machine
  const int bits = 8 * a.item_bytes;
  if (a.kind == NpyKind::signed_integer) {
    if (bits < 64 && ((u >> (bits - 1)) & 1U) != 0) u |= ~std::uint64_t{0} << bits;
    return static_cast<long long>(u);
  }
  if (u > static_cast<std::uint64_t>(std::numeric_limits<long long>::max())) return std::nullopt;
  return static_cast<long long>(u);
}

bool is_integer(const NpyArray& a) {
  return a.kind == NpyKind::signed_integer || a.kind == NpyKind::unsigned_integer;
}

// Whether to_tensor<T> must accept `a`.
template <class T>
bool fits(const NpyArray& a) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    return a.kind == NpyKind::unsigned_integer && a.item_bytes == 2;
  } else if constexpr (std::is_integral_v<T>) {
    if (!is_integer(a)) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const auto v = integer_at(a, i);
      if (!v || *v < std::numeric_limits<T>::min() || *v > std::numeric_limits<T>::max()) {
        return false;
      }
    }
    return true;
  } else {
    return a.kind == NpyKind::floating && a.item_bytes == static_cast<int>(sizeof(T));
  }
}

template <class T>
void check_tensor(const NpyArray& a) {
  const std::string tname(name(dtype_of<T>));
  const bool want = fits<T>(a);
  std::optional<Tensor<T>> t;
  try {
    t = to_tensor<T>(a, dtype_of<T>, "fuzz.npy");
  } catch (const CaseError& e) {
    if (want) violation(&a, "to_tensor<" + tname + "> refused a fitting array: " + e.what());
    return;
  }
  if (!want) violation(&a, "to_tensor<" + tname + "> accepted an array it must refuse");
  if (t->shape() != a.shape || t->size() != a.size()) {
    violation(&a, "to_tensor<" + tname + "> has shape " + shape_text(t->shape()));
  }
  if constexpr (std::is_integral_v<T>) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (static_cast<long long>((*t)[i]) != *integer_at(a, i)) {
        violation(&a, "to_tensor<" + tname + "> item " + std::to_string(i) + " differs");
      }
    }
  } else if (a.size() != 0 && std::memcmp(t->data(), a.data.data(), a.data.size()) != 0) {
    violation(&a, "to_tensor<" + tname + "> is not the array's bytes");
  }
}

void check(const NpyArray& a) {
  const int b = a.item_bytes;
  const bool item_ok = a.kind == NpyKind::boolean    ? b == 1
                       : a.kind == NpyKind::floating ? (b == 2 || b == 4 || b == 8)
                                                     : (b == 1 || b == 2 || b == 4 || b == 8);
  if (!item_ok) violation(&a, "item_bytes " + std::to_string(b) + " for its kind");
  if (a.data.size() != a.size() * static_cast<std::size_t>(b)) {
    violation(&a, "data.size() is not size() * item_bytes");
  }
  const std::vector<unsigned char> bytes = serialize_npy(a);
  NpyArray r;
  try {
    r = parse_npy(bytes, "round-trip.npy");
  } catch (const CaseError& e) {
    violation(&a, std::string("the serialized array is refused: ") + e.what());
  }
  if (r.kind != a.kind || r.item_bytes != a.item_bytes || r.shape != a.shape || r.data != a.data) {
    violation(&a, "serialize → parse gives descr " + r.descr() + ", shape " + shape_text(r.shape) +
                      ", or other data");
  }
  if (serialize_npy(r) != bytes) violation(&a, "serializing the round trip changes the bytes");

  check_tensor<double>(a);
  check_tensor<float>(a);
  check_tensor<float16>(a);
  check_tensor<bfloat16>(a);
  check_tensor<std::int32_t>(a);
  check_tensor<std::int64_t>(a);
  try {
    const std::vector<std::uint8_t> m = to_mask(a, "fuzz.npy");
    if (a.kind != NpyKind::boolean) violation(&a, "to_mask accepted a non-bool array");
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (m[i] != (a.data[i] != 0 ? 1 : 0)) violation(&a, "to_mask is not 0/1 of the bytes");
    }
  } catch (const CaseError& e) {
    if (a.kind == NpyKind::boolean) violation(&a, std::string("to_mask refused bool: ") + e.what());
  }
}

}  // namespace
}  // namespace shardcheck::cases

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardcheck::cases;
  NpyArray a;
  try {
    a = parse_npy({data, size}, "fuzz.npy");
  } catch (const CaseError&) {
    return 0;  // refused: fine
  } catch (const std::exception& e) {
    violation(nullptr, std::string("parse_npy threw a non-CaseError: ") + e.what());
  }
  if (verbose()) {
    std::fprintf(stderr, "accepted: descr %s, shape %s\n", a.descr().c_str(),
                 shape_text(a.shape).c_str());
  }
  try {
    check(a);
  } catch (const std::exception& e) {
    violation(&a, std::string("an unexpected exception: ") + e.what());
  }
  return 0;
}
