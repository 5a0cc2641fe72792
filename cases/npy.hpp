// NumPy's .npy format: one array per file, read and written without NumPy.
//
// A file is the magic "\x93NUMPY", a format version (major, minor), a header length
// (little-endian uint16 for version 1.0; uint32 for 2.0 and 3.0), a header that is a Python dict
// literal {'descr': ..., 'fortran_order': ..., 'shape': (...), } padded with spaces and ended by
// '\n' (3.0: the header is UTF-8, 1.0 and 2.0: latin-1), then the data: prod(shape) items of
// descr's size, C order unless fortran_order. Source: NumPy's format specification,
// numpy/lib/format.py ("The .npy format", NEP 1).
//
// Read: versions 1.0, 2.0 and 3.0; byte orders '<', '>', '|' and '=' (native); C and Fortran
// order; every rank including 0 (a scalar) and zero-size dimensions. The element types shardcheck
// takes: float64 'f8', float32 'f4', float16 'f2'; bfloat16 has no NumPy dtype and is stored as
// its raw bits in uint16 'u2' (the case manifest says "bfloat16", docs/case-format.md); integers
// 'i1' 'i2' 'i4' 'i8' 'u1' 'u2' 'u4' 'u8'; bool 'b1' (and '?', its alias).
// Refused, each with a CaseError naming the file and the field: a wrong magic, an unknown
// version, a header that is not such a dict (a missing, repeated or unknown key, a value of the
// wrong kind), any other descr (complex, object, strings, structured, datetime), a shape whose
// element count overflows, and data shorter or longer than the shape says.
// Once read, an array is in C order and native byte order, so its bytes are the items in
// row-major order.
#pragma once

#include "runtime/dtype.hpp"
#include "runtime/errors.hpp"
#include "tensor/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace shardcheck::cases {

// A case file (an .npy array or a case manifest) is malformed or does not fit the case.
// what(): "<file>: <field>: <what is wrong>; <what to do>".
class CaseError : public UsageError {
 public:
  using UsageError::UsageError;
};

// The kind of an .npy item ('f', 'i', 'u', 'b' in descr).
enum class NpyKind : std::uint8_t { floating, signed_integer, unsigned_integer, boolean };

struct NpyArray {
  NpyKind kind = NpyKind::floating;
  int item_bytes = 4;               // 1, 2, 4 or 8 (floating: 2, 4, 8; boolean: 1)
  std::vector<std::size_t> shape;   // empty: a scalar (one item)
  std::vector<unsigned char> data;  // prod(shape) * item_bytes bytes, C order, native byte order

  std::size_t size() const;  // prod(shape); 1 for a scalar
  // The descr NumPy writes for this array on a little-endian machine: "<f4", "|b1", "|u1", ...
  std::string descr() const;
};

// Parses the bytes of a whole .npy file. `what` names it in errors (its path).
// @throws CaseError as the header comment lists.
NpyArray parse_npy(std::span<const unsigned char> bytes, const std::string& what);
// Reads and parses the file at `path`. @throws CaseError (also when it cannot be opened).
NpyArray read_npy(const std::string& path);

// The bytes of `a` as a version 1.0 file (2.0 when the header would not fit in 65535 bytes),
// little endian, C order: what numpy.save writes for the same array.
std::vector<unsigned char> serialize_npy(const NpyArray& a);
// Writes serialize_npy(a) to `path` atomically (a temporary file beside it, then a rename).
// @throws CaseError naming the path when it cannot be written.
void write_npy(const std::string& path, const NpyArray& a);

// The array as a tensor of T, for an element type a case manifest declares as `declared`:
//   float64, float32, float16  need descr f8, f4, f2 exactly (no silent conversion: a float32
//                              file for a float64 tensor is an error, since the values would
//                              not be the ones the implementation saw);
//   bfloat16                   needs u2 (the raw bits), stored as bfloat16 bit for bit;
//   int64                      any integer descr whose values fit (u8 above 2^63-1 refused);
//   int32                      any integer descr whose values fit in int32.
// `declared` must be dtype_of<T>. A scalar becomes a tensor of shape {} with one element.
// @throws CaseError naming `what` (the file) and both types when they do not match.
template <Element T>
Tensor<T> to_tensor(const NpyArray& a, DType declared, const std::string& what);

// A bool array ('b1') as 0/1 bytes, C order. @throws CaseError naming `what` for another descr.
std::vector<std::uint8_t> to_mask(const NpyArray& a, const std::string& what);

// The tensor as an array: f8, f4, f2, u2 for bfloat16 (its bits), i4, i8.
template <Element T>
NpyArray from_tensor(const Tensor<T>& t);
// A mask (0/1 bytes) as a bool array of `shape`.
NpyArray from_mask(const std::vector<std::uint8_t>& mask, std::vector<std::size_t> shape);

}  // namespace shardcheck::cases
