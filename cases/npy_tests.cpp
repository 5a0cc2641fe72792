// Tests of cases/npy.hpp: golden files exactly as numpy.save writes them (NumPy 1.24.2; the
// byte arrays below were generated once with numpy.save and numpy.lib.format.write_array, the
// test needs no Python), every version, byte order, order and accepted descr, scalars and
// zero-size arrays, round trips for each element type, to_tensor's conversions and refusals,
// and every refusal of the reader by its message.
#include "cases/npy.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace shardcheck::cases {
namespace {

using ::testing::HasSubstr;
using Bytes = std::vector<unsigned char>;

// Generated with NumPy 1.24.2 (python3 -c "import numpy as np, io; f = io.BytesIO(); ..."):
//   kBigEndianF8_2x3   np.save(f, np.arange(6, dtype='>f8').reshape(2, 3))
//   kLittleF8_2x3      np.save(f, np.arange(6, dtype='<f8').reshape(2, 3))
//   kFortranI4_2x3x4   np.save(f, np.asfortranarray(np.arange(24, dtype='<i4').reshape(2, 3, 4)))
//   kVersion2F4_3      np.lib.format.write_array(f, np.arange(3, dtype='<f4'), version=(2, 0))
//   kVersion3U2_4      np.lib.format.write_array(f, np.arange(4, dtype='<u2'), version=(3, 0))
//   kScalarF4          np.save(f, np.float32(1.5))
//   kZeroSizeI8_0x3    np.save(f, np.zeros((0, 3), dtype='<i8'))
//   kBoolB1_3          np.save(f, np.array([True, False, True]))
constexpr char kBigEndianF8_2x3[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '>f8', 'fortran_order': False, 'shape': (2, 3), }       "
    "                                                   \x0a\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x3f\xf0\x00\x00\x00\x00\x00\x00@\x00\x00\x00\x00\x00\x00\x00@\x08\x00\x00\x00\x00\x00"
    "\x00@\x10\x00\x00\x00\x00\x00\x00@\x14\x00\x00\x00\x00\x00\x00";
constexpr char kLittleF8_2x3[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }       "
    "                                                   \x0a\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x00\x00\x00\x00\x00\x00@\x00\x00\x00\x00\x00\x00"
    "\x08@\x00\x00\x00\x00\x00\x00\x10@\x00\x00\x00\x00\x00\x00\x14@";
constexpr char kFortranI4_2x3x4[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }     "
    "                                                   \x0a\x00\x00\x00\x00\x0c\x00\x00\x00"
    "\x04\x00\x00\x00\x10\x00\x00\x00\x08\x00\x00\x00\x14\x00\x00\x00\x01\x00\x00\x00\x0d\x00"
    "\x00\x00\x05\x00\x00\x00\x11\x00\x00\x00\x09\x00\x00\x00\x15\x00\x00\x00\x02\x00\x00\x00"
    "\x0e\x00\x00\x00\x06\x00\x00\x00\x12\x00\x00\x00\x0a\x00\x00\x00\x16\x00\x00\x00\x03\x00"
    "\x00\x00\x0f\x00\x00\x00\x07\x00\x00\x00\x13\x00\x00\x00\x0b\x00\x00\x00\x17\x00\x00\x00";
constexpr char kVersion2F4_3[] =
    "\x93NUMPY\x02\x00t\x00\x00\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } "
    "                                                         \x0a\x00\x00\x00\x00\x00\x00"
    "\x80\x3f\x00\x00\x00@";
constexpr char kVersion3U2_4[] =
    "\x93NUMPY\x03\x00t\x00\x00\x00{'descr': '<u2', 'fortran_order': False, 'shape': (4,), } "
    "                                                         \x0a\x00\x00\x01\x00\x02\x00"
    "\x03\x00";
constexpr char kScalarF4[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (), }           "
    "                                                   \x0a\x00\x00\xc0\x3f";
constexpr char kZeroSizeI8_0x3[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': False, 'shape': (0, 3), }       "
    "                                                   \x0a";
constexpr char kBoolB1_3[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }         "
    "                                                   \x0a\x01\x00\x01";

// A golden file's bytes (the literal without its terminating NUL).
template <std::size_t N>
Bytes golden(const char (&literal)[N]) {
  return Bytes(literal, literal + N - 1);
}

// A file of `version` with the header text as given (no padding added) and the data bytes.
Bytes npy_file(const std::string& header, const Bytes& data = {}, int version = 1) {
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<unsigned char>(version), 0};
  const std::size_t n = header.size();
  b.push_back(static_cast<unsigned char>(n & 0xff));
  b.push_back(static_cast<unsigned char>((n >> 8) & 0xff));
  if (version != 1) {
    b.push_back(static_cast<unsigned char>((n >> 16) & 0xff));
    b.push_back(static_cast<unsigned char>((n >> 24) & 0xff));
  }
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// A version 1.0 file whose header is `dict` followed by '\n'.
Bytes dict_file(const std::string& dict, const Bytes& data = {}) {
  return npy_file(dict + "\n", data);
}

std::string header(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

template <class T>
Bytes le_bytes(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <class T>
Bytes be_bytes(const std::vector<T>& v) {
  Bytes b;
  for (const T& x : v) {
    Bytes one = le_bytes(std::vector<T>{x});
    b.insert(b.end(), one.rbegin(), one.rend());
  }
  return b;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CaseError& e) {
    return e.what();
  }
  return "(no CaseError)";
}

std::string parse_error(const Bytes& b) {
  return error_of([&] { (void)parse_npy(b, "x.npy"); });
}

template <class T>
std::vector<T> values_of(const NpyArray& a) {
  std::vector<T> v(a.data.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

// ---- golden files ----

TEST(NpyGolden, BigEndianFloat64IsSwappedToNative) {
  const NpyArray a = parse_npy(golden(kBigEndianF8_2x3), "x.npy");
  EXPECT_EQ(a.kind, NpyKind::floating);
  EXPECT_EQ(a.item_bytes, 8);
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(values_of<double>(a), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(a.descr(), "<f8");
}

TEST(NpyGolden, SerializeWritesWhatNumpySaveWrites) {
  for (const Bytes& g :
       {golden(kLittleF8_2x3), golden(kScalarF4), golden(kZeroSizeI8_0x3), golden(kBoolB1_3)}) {
    EXPECT_EQ(serialize_npy(parse_npy(g, "g.npy")), g);
  }
  // The big-endian file is written little endian: the same bytes as the little-endian golden.
  EXPECT_EQ(serialize_npy(parse_npy(golden(kBigEndianF8_2x3), "g.npy")), golden(kLittleF8_2x3));
}

TEST(NpyGolden, FortranOrderRank3BecomesCOrder) {
  const NpyArray a = parse_npy(golden(kFortranI4_2x3x4), "x.npy");
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{2, 3, 4}));
  std::vector<std::int32_t> want(24);
  for (int i = 0; i < 24; ++i) want[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(values_of<std::int32_t>(a), want);
  const Tensor<std::int64_t> t = to_tensor<std::int64_t>(a, DType::int64, "x.npy");
  EXPECT_EQ(t.values()[23], 23);
}

TEST(NpyGolden, Versions2And3) {
  const NpyArray v2 = parse_npy(golden(kVersion2F4_3), "x.npy");
  EXPECT_EQ(v2.shape, (std::vector<std::size_t>{3}));
  EXPECT_EQ(values_of<float>(v2), (std::vector<float>{0, 1, 2}));
  const NpyArray v3 = parse_npy(golden(kVersion3U2_4), "x.npy");
  EXPECT_EQ(v3.kind, NpyKind::unsigned_integer);
  EXPECT_EQ(values_of<std::uint16_t>(v3), (std::vector<std::uint16_t>{0, 1, 2, 3}));
}

TEST(NpyGolden, ScalarZeroSizeAndBool) {
  const NpyArray s = parse_npy(golden(kScalarF4), "x.npy");
  EXPECT_TRUE(s.shape.empty());
  EXPECT_EQ(s.size(), 1U);
  const Tensor<float> t = to_tensor<float>(s, DType::float32, "x.npy");
  EXPECT_TRUE(t.shape().empty());
  ASSERT_EQ(t.size(), 1U);
  EXPECT_EQ(t[0], 1.5F);
  const NpyArray z = parse_npy(golden(kZeroSizeI8_0x3), "x.npy");
  EXPECT_EQ(z.shape, (std::vector<std::size_t>{0, 3}));
  EXPECT_EQ(z.size(), 0U);
  EXPECT_TRUE(z.data.empty());
  EXPECT_EQ(to_tensor<std::int64_t>(z, DType::int64, "x.npy").shape(), (Shape{0, 3}));
  const NpyArray b = parse_npy(golden(kBoolB1_3), "x.npy");
  EXPECT_EQ(b.descr(), "|b1");
  EXPECT_EQ(to_mask(b, "x.npy"), (std::vector<std::uint8_t>{1, 0, 1}));
}

// ---- versions, byte orders, orders, descrs ----

TEST(NpyRead, EveryVersion) {
  const Bytes data = le_bytes(std::vector<std::int16_t>{-2, 7});
  for (int v : {1, 2, 3}) {
    const NpyArray a = parse_npy(npy_file(header("<i2", "(2,)") + "\n", data, v), "x.npy");
    EXPECT_EQ(values_of<std::int16_t>(a), (std::vector<std::int16_t>{-2, 7})) << v;
  }
}

TEST(NpyRead, EveryByteOrder) {
  const std::vector<std::uint32_t> v = {1, 0x01020304, 0xfffffffe};
  for (const char* d : {"<u4", "=u4", "|u4", "u4"}) {
    EXPECT_EQ(values_of<std::uint32_t>(parse_npy(dict_file(header(d, "(3,)"), le_bytes(v)), "x")),
              v)
        << d;
  }
  EXPECT_EQ(values_of<std::uint32_t>(parse_npy(dict_file(header(">u4", "(3,)"), be_bytes(v)), "x")),
            v);
  // One-byte items have no order: '>' and '|' both read as is.
  for (const char* d : {"|i1", ">i1", "<i1"}) {
    const NpyArray a = parse_npy(dict_file(header(d, "(2,)"), {0xff, 0x05}), "x");
    EXPECT_EQ(values_of<std::int8_t>(a), (std::vector<std::int8_t>{-1, 5})) << d;
  }
}

TEST(NpyRead, FortranOrderRank1And2) {
  const std::vector<double> v = {1, 2, 3};
  EXPECT_EQ(values_of<double>(parse_npy(dict_file(header("<f8", "(3,)", true), le_bytes(v)), "x")),
            v);
  // A 2×3 matrix [[0, 1, 2], [3, 4, 5]] in Fortran order is its columns: 0 3 1 4 2 5.
  const NpyArray a = parse_npy(
      dict_file(header("<f4", "(2, 3)", true), le_bytes(std::vector<float>{0, 3, 1, 4, 2, 5})),
      "x");
  EXPECT_EQ(values_of<float>(a), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  // Big-endian and Fortran together.
  const NpyArray b = parse_npy(
      dict_file(header(">i2", "(2, 2)", true), be_bytes(std::vector<std::int16_t>{1, 3, 2, 4})),
      "x");
  EXPECT_EQ(values_of<std::int16_t>(b), (std::vector<std::int16_t>{1, 2, 3, 4}));
}

TEST(NpyRead, FortranOrderRank3KnownPermutation) {
  // Shape (2, 3, 2): C index (i, j, k) = 6i + 2j + k; Fortran offset = i + 2j + 6k.
  std::vector<std::int32_t> f(12);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 2; ++k)
        f.at(static_cast<std::size_t>(i) + 2 * static_cast<std::size_t>(j) +
             6 * static_cast<std::size_t>(k)) = 6 * i + 2 * j + k;
    }
  }
  const NpyArray a = parse_npy(dict_file(header("<i4", "(2, 3, 2)", true), le_bytes(f)), "x");
  std::vector<std::int32_t> want(12);
  for (int n = 0; n < 12; ++n) want[static_cast<std::size_t>(n)] = n;
  EXPECT_EQ(values_of<std::int32_t>(a), want);
}

TEST(NpyRead, EveryAcceptedDescr) {
  struct Case {
    const char* descr;
    NpyKind kind;
    int bytes;
  };
  const Case cases[] = {
      {"<f8", NpyKind::floating, 8},
      {"<f4", NpyKind::floating, 4},
      {"<f2", NpyKind::floating, 2},
      {"|i1", NpyKind::signed_integer, 1},
      {"<i2", NpyKind::signed_integer, 2},
      {"<i4", NpyKind::signed_integer, 4},
      {"<i8", NpyKind::signed_integer, 8},
      {"|u1", NpyKind::unsigned_integer, 1},
      {"<u2", NpyKind::unsigned_integer, 2},
      {"<u4", NpyKind::unsigned_integer, 4},
      {"<u8", NpyKind::unsigned_integer, 8},
      {"|b1", NpyKind::boolean, 1},
      {"?", NpyKind::boolean, 1},
      {"|?", NpyKind::boolean, 1},
  };
  for (const Case& c : cases) {
    const NpyArray a = parse_npy(
        dict_file(header(c.descr, "(2,)"), Bytes(2 * static_cast<std::size_t>(c.bytes), 1)), "x");
    EXPECT_EQ(a.kind, c.kind) << c.descr;
    EXPECT_EQ(a.item_bytes, c.bytes) << c.descr;
    EXPECT_EQ(a.size(), 2U) << c.descr;
  }
}

TEST(NpyRead, HeaderSpellings) {
  const Bytes d = le_bytes(std::vector<float>{1, 2, 3, 4, 5, 6});
  // Double quotes, whitespace anywhere, keys in any order, no trailing commas, padding.
  for (const std::string& h : {
           std::string(R"({"descr":"<f4","fortran_order":False,"shape":(2,3)})"),
           std::string(" {  'shape' : ( 2 , 3 , ) ,\t'fortran_order':False,\n'descr':'<f4' }   "),
           std::string("{'fortran_order': False, 'descr': \"<f4\", 'shape': (2, 3)}"),
       }) {
    EXPECT_EQ(parse_npy(dict_file(h, d), "x").shape, (std::vector<std::size_t>{2, 3})) << h;
  }
  // Python 2's long suffix, which NumPy drops in versions 1.0 and 2.0.
  EXPECT_EQ(parse_npy(dict_file(header("<f4", "(2L, 3L)"), d), "x").size(), 6U);
  EXPECT_THAT(parse_error(npy_file(header("<f4", "(2L, 3L)") + "\n", d, 3)),
              HasSubstr("expected ',' or ')' in the shape"));
  // A scalar, a one-element tuple, zero-size dimensions anywhere.
  EXPECT_TRUE(parse_npy(dict_file(header("<f4", "()"), Bytes(4)), "x").shape.empty());
  EXPECT_EQ(parse_npy(dict_file(header("<f4", "( )"), Bytes(4)), "x").size(), 1U);
  EXPECT_EQ(parse_npy(dict_file(header("<f4", "(1,)"), Bytes(4)), "x").size(), 1U);
  EXPECT_EQ(parse_npy(dict_file(header("<f4", "(3, 0)"), {}), "x").size(), 0U);
  // The other dimensions of a zero-size array may multiply beyond size_t (NumPy counts only
  // the non-zero ones, and so does this reader: they must still fit).
  EXPECT_EQ(parse_npy(dict_file(header("|u1", "(0, 4294967296, 4294967295)"), {}), "x").size(), 0U);
}

// ---- round trips ----

template <class T>
void round_trip(const std::vector<T>& v, const Shape& shape) {
  const Tensor<T> t(shape, v);
  const NpyArray a = from_tensor(t);
  const NpyArray b = parse_npy(serialize_npy(a), "r.npy");
  EXPECT_EQ(b.kind, a.kind);
  EXPECT_EQ(b.item_bytes, a.item_bytes);
  EXPECT_EQ(b.shape, a.shape);
  EXPECT_EQ(b.data, a.data);
  EXPECT_TRUE(bit_equal(to_tensor<T>(b, dtype_of<T>, "r.npy"), t));
}

TEST(NpyRoundTrip, EachElementType) {
  round_trip<double>({1.5, -0.0, std::numeric_limits<double>::quiet_NaN(), 1e300, 5, 6},
                     Shape{2, 3});
  round_trip<float>({1.5F, -2.25F, std::numeric_limits<float>::infinity()}, Shape{3});
  round_trip<bfloat16>({bfloat16(1.0F), bfloat16(-3.5F), bfloat16(0.0F), bfloat16(7.0F)},
                       Shape{2, 1, 2});
  round_trip<float16>({float16(0.5F), float16(-65504.0F)}, Shape{1, 2});
  round_trip<std::int32_t>({std::numeric_limits<std::int32_t>::min(), 0, 7}, Shape{3});
  round_trip<std::int64_t>({std::numeric_limits<std::int64_t>::max(), -1}, Shape{2});
  round_trip<double>({42}, Shape{});
  round_trip<float>({}, Shape{0, 3});
  EXPECT_EQ(from_tensor(Tensor<bfloat16>(Shape{1})).descr(), "<u2");
  EXPECT_EQ(from_tensor(Tensor<std::int32_t>(Shape{1})).descr(), "<i4");
  EXPECT_EQ(from_tensor(Tensor<float16>(Shape{1})).descr(), "<f2");
}

TEST(NpyRoundTrip, Mask) {
  const NpyArray a = from_mask({1, 0, 0, 1, 1, 0}, {3, 2});
  EXPECT_EQ(a.descr(), "|b1");
  EXPECT_EQ(to_mask(parse_npy(serialize_npy(a), "m.npy"), "m.npy"),
            (std::vector<std::uint8_t>{1, 0, 0, 1, 1, 0}));
  // Any nonzero byte is True, as NumPy reads it.
  EXPECT_EQ(to_mask(parse_npy(dict_file(header("|b1", "(2,)"), {0, 5}), "m"), "m"),
            (std::vector<std::uint8_t>{0, 1}));
  EXPECT_THROW((void)from_mask({1, 0}, {3}), UsageError);
}

TEST(NpyRoundTrip, FileOnDisk) {
  const auto dir = std::filesystem::temp_directory_path() / "shardcheck_npy_tests";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "a.npy").string();
  const NpyArray a = from_tensor(Tensor<double>(Shape{2}, {3.0, 4.0}));
  write_npy(path, a);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(read_npy(path).data, a.data);
  write_npy(path, from_tensor(Tensor<float>(Shape{1}, {1.0F})));  // replaces it
  EXPECT_EQ(read_npy(path).descr(), "<f4");
  std::filesystem::remove_all(dir);
}

TEST(NpyRoundTrip, HugeHeaderIsVersion2) {
  // 30,000 dimensions of 1 do not fit a uint16 header length: version 2.0, still 64-aligned.
  NpyArray a;
  a.kind = NpyKind::unsigned_integer;
  a.item_bytes = 1;
  a.shape.assign(30000, 1);
  a.data = {9};
  const Bytes b = serialize_npy(a);
  ASSERT_GT(b.size(), 12U);
  EXPECT_EQ(b[6], 2);
  const std::size_t hlen =
      b[8] | (b[9] << 8) | (b[10] << 16) | (static_cast<std::size_t>(b[11]) << 24);
  EXPECT_GT(hlen, 65535U);
  EXPECT_EQ((12 + hlen) % 64, 0U);
  EXPECT_EQ(b[12 + hlen - 1], '\n');
  EXPECT_EQ(b.back(), 9);
  EXPECT_THAT(parse_error(b), HasSubstr("x.npy: shape: more than 64 dimensions"));
}

// ---- to_tensor ----

TEST(NpyToTensor, Bfloat16FromU2Bits) {
  const NpyArray a =
      parse_npy(dict_file(header("<u2", "(3,)"),
                          le_bytes(std::vector<std::uint16_t>{0x3f80, 0xc040, 0x7fc1})),
                "b.npy");
  const Tensor<bfloat16> t = to_tensor<bfloat16>(a, DType::bfloat16, "b.npy");
  EXPECT_EQ(static_cast<float>(t[0]), 1.0F);
  EXPECT_EQ(static_cast<float>(t[1]), -3.0F);
  EXPECT_EQ(std::bit_cast<std::uint16_t>(t[2]), 0x7fc1);  // a NaN payload, bit for bit
}

TEST(NpyToTensor, IntegersWiden) {
  auto arr = [](const char* d, const Bytes& data) {
    return parse_npy(dict_file(header(d, "(2,)"), data), "i.npy");
  };
  const auto i64 = [](const NpyArray& a) {
    return to_tensor<std::int64_t>(a, DType::int64, "i.npy").values();
  };
  EXPECT_EQ(i64(arr("<i4", le_bytes(std::vector<std::int32_t>{-5, 9}))),
            (std::vector<std::int64_t>{-5, 9}));
  EXPECT_EQ(i64(arr("|u1", {255, 0})), (std::vector<std::int64_t>{255, 0}));
  EXPECT_EQ(i64(arr("|i1", {255, 1})), (std::vector<std::int64_t>{-1, 1}));
  EXPECT_EQ(i64(arr("<u2", le_bytes(std::vector<std::uint16_t>{65535, 1}))),
            (std::vector<std::int64_t>{65535, 1}));
  EXPECT_EQ(i64(arr("<i2", le_bytes(std::vector<std::int16_t>{-32768, 1}))),
            (std::vector<std::int64_t>{-32768, 1}));
  EXPECT_EQ(i64(arr("<u4", le_bytes(std::vector<std::uint32_t>{4294967295U, 1}))),
            (std::vector<std::int64_t>{4294967295LL, 1}));
  EXPECT_EQ(i64(arr("<u8", le_bytes(std::vector<std::uint64_t>{9223372036854775807ULL, 0}))),
            (std::vector<std::int64_t>{9223372036854775807LL, 0}));
  EXPECT_EQ(to_tensor<std::int32_t>(
                arr("<i8", le_bytes(std::vector<std::int64_t>{-2147483648LL, 2147483647LL})),
                DType::int32, "i.npy")
                .values(),
            (std::vector<std::int32_t>{-2147483647 - 1, 2147483647}));
  EXPECT_EQ(to_tensor<std::int32_t>(arr("<u2", le_bytes(std::vector<std::uint16_t>{7, 65535})),
                                    DType::int32, "i.npy")
                .values(),
            (std::vector<std::int32_t>{7, 65535}));
}

TEST(NpyToTensor, Refusals) {
  auto arr = [](const char* d, const Bytes& data) {
    return parse_npy(dict_file(header(d, "(1,)"), data), "i.npy");
  };
  const NpyArray u8_big = arr("<u8", le_bytes(std::vector<std::uint64_t>{9223372036854775808ULL}));
  EXPECT_THAT(error_of([&] { (void)to_tensor<std::int64_t>(u8_big, DType::int64, "i.npy"); }),
              HasSubstr("i.npy: data: item 0 of '<u8' is outside int64's range"));
  const NpyArray i8_big = arr("<i8", le_bytes(std::vector<std::int64_t>{2147483648LL}));
  EXPECT_THAT(error_of([&] { (void)to_tensor<std::int32_t>(i8_big, DType::int32, "i.npy"); }),
              HasSubstr("i.npy: data: item 0 of '<i8' is outside int32's range"));
  const NpyArray i8_small = arr("<i8", le_bytes(std::vector<std::int64_t>{-2147483649LL}));
  EXPECT_THAT(error_of([&] { (void)to_tensor<std::int32_t>(i8_small, DType::int32, "i.npy"); }),
              HasSubstr("outside int32's range"));
  const NpyArray u4_big = arr("<u4", le_bytes(std::vector<std::uint32_t>{2147483648U}));
  EXPECT_THAT(error_of([&] { (void)to_tensor<std::int32_t>(u4_big, DType::int32, "i.npy"); }),
              HasSubstr("outside int32's range"));
  const NpyArray f4 = arr("<f4", Bytes(4));
  EXPECT_THAT(error_of([&] { (void)to_tensor<double>(f4, DType::float64, "f.npy"); }),
              HasSubstr("f.npy: descr: '<f4' is not float64 ('<f8'), the declared type, and is "
                        "not converted"));
  EXPECT_THAT(error_of([&] { (void)to_tensor<float16>(f4, DType::float16, "f.npy"); }),
              HasSubstr("'<f4' is not float16 ('<f2')"));
  EXPECT_THAT(error_of([&] { (void)to_tensor<float>(arr("<i4", Bytes(4)), DType::float32, "f"); }),
              HasSubstr("'<i4' is not float32 ('<f4')"));
  EXPECT_THAT(
      error_of([&] { (void)to_tensor<bfloat16>(arr("<f2", Bytes(2)), DType::bfloat16, "b"); }),
      HasSubstr("b: descr: '<f2' cannot hold bfloat16, which is stored as its raw bits in "
                "uint16 ('<u2')"));
  EXPECT_THAT(
      error_of([&] { (void)to_tensor<bfloat16>(arr("<i2", Bytes(2)), DType::bfloat16, "b"); }),
      HasSubstr("'<i2' cannot hold bfloat16"));
  EXPECT_THAT(error_of([&] { (void)to_tensor<std::int64_t>(f4, DType::int64, "f"); }),
              HasSubstr("f: descr: '<f4' is not an integer type, which int64 needs"));
  EXPECT_THAT(
      error_of([&] { (void)to_tensor<std::int32_t>(arr("|b1", Bytes(1)), DType::int32, "f"); }),
      HasSubstr("'|b1' is not an integer type, which int32 needs"));
  EXPECT_THAT(error_of([&] { (void)to_tensor<float>(f4, DType::float64, "f"); }),
              HasSubstr("f: dtype: the case declares float64 but it is read as float32"));
  EXPECT_THAT(error_of([&] { (void)to_mask(f4, "m.npy"); }),
              HasSubstr("m.npy: descr: '<f4' is not bool ('|b1'), which a mask needs"));
}

// ---- the reader's refusals, one per message ----

struct Refusal {
  const char* name;
  Bytes file;
  const char* message;
};

std::vector<Refusal> refusals() {
  const std::string ok = header("<f4", "(1,)");
  const Bytes f4 = Bytes(4);
  Bytes v1 = dict_file(ok, f4);
  Bytes long_header = v1;  // the length says 200 bytes, 62 follow
  long_header[8] = 200;
  Bytes bad_version = v1;
  bad_version[6] = 4;
  Bytes bad_minor = v1;
  bad_minor[7] = 1;
  std::string dims65;
  for (int k = 0; k < 65; ++k) dims65 += "1, ";
  return {
      {"empty",
       {},
       "x.npy: magic: the file does not start with \\x93NUMPY (not an .npy file); write the file "
       "with numpy.save"},
      {"bad magic", Bytes{'N', 'U', 'M', 'P', 'Y', 0, 1, 0, 0, 0},
       "x.npy: magic: the file does not start with \\x93NUMPY"},
      {"preamble cut", Bytes(v1.begin(), v1.begin() + 7),
       "x.npy: version: the file ends inside the preamble (7 bytes)"},
      {"version 4.0", bad_version,
       "x.npy: version: 4.0 is not a format version shardcheck reads (1.0, 2.0, 3.0)"},
      {"version 1.1", bad_minor, "x.npy: version: 1.1 is not a format version"},
      {"length cut", Bytes(v1.begin(), v1.begin() + 9),
       "x.npy: header: the file ends inside the header length (9 bytes)"},
      {"length cut v2", Bytes{0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 1, 0, 0},
       "the file ends inside the header length (11 bytes)"},
      {"header past end", long_header,
       "x.npy: header: its length 200 runs past the end of the file"},
      {"no newline", npy_file(ok + " ", f4), "x.npy: header: does not end in '\\n'"},
      {"empty header", npy_file(""), "x.npy: header: does not end in '\\n'"},
      {"not a dict", dict_file("['descr']"),
       "x.npy: header: expected '{' opening the header's dict at byte 0, found '['"},
      {"key not a string", dict_file("{descr: '<f4'}"),
       "x.npy: header: expected a key (a quoted string) or '}' at byte 1, found 'd'"},
      {"no colon", dict_file("{'descr' '<f4'}"),
       "x.npy: header: expected ':' after the key 'descr' at byte 9"},
      {"no comma", dict_file("{'descr': '<f4' 'shape': ()}"),
       "x.npy: header: expected ',' or '}' after the value of 'descr' at byte 16"},
      {"cut in dict", npy_file("{'descr': '<f4',\n"),
       "expected a key (a quoted string) or '}' at byte 17, found the end"},
      {"text after dict", dict_file(ok + " x"),
       "x.npy: header: unexpected 'x' at byte 58 after the dict's closing '}'"},
      {"open string", dict_file("{'descr': '<f4}"),
       "x.npy: header: the string starting at byte 10 is not closed"},
      {"duplicate key",
       dict_file("{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': ()}"),
       "x.npy: header: the key 'descr' appears twice (an .npy header names each once)"},
      {"unknown key", dict_file("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}"),
       "x.npy: header: unknown key 'x' (an .npy header has only 'descr', 'fortran_order' and "
       "'shape')"},
      {"missing shape", dict_file("{'descr': '<f4', 'fortran_order': False}"),
       "x.npy: header: 'shape' missing (an .npy header is a dict with 'descr', 'fortran_order' and "
       "'shape'); write the file with numpy.save"},
      {"missing descr", dict_file("{'fortran_order': False, 'shape': ()}"),
       "x.npy: header: 'descr' missing"},
      {"missing fortran_order", dict_file("{'descr': '<f4', 'shape': ()}"),
       "x.npy: header: 'fortran_order' missing"},
      {"structured descr",
       dict_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}"),
       "x.npy: descr: not a string (a list is a structured dtype, which shardcheck does not read)"},
      {"complex", dict_file(header("<c8", "()"), Bytes(8)),
       "x.npy: descr: '<c8' is not an element type shardcheck reads (f8 f4 f2, i1 i2 i4 i8, u1 u2 "
       "u4 u8, b1"},
      {"object", dict_file(header("|O", "()"), Bytes(8)),
       "x.npy: descr: '|O' is not an element type"},
      {"string", dict_file(header("<U4", "()"), Bytes(16)), "'<U4' is not an element type"},
      {"datetime", dict_file(header("<M8[ns]", "()"), Bytes(8)),
       "'<M8[ns]' is not an element type"},
      {"f16", dict_file(header("<f16", "()"), Bytes(16)), "'<f16' is not an element type"},
      {"f1", dict_file(header("|f1", "()"), Bytes(1)), "'|f1' is not an element type"},
      {"b2", dict_file(header("<b2", "()"), Bytes(2)), "'<b2' is not an element type"},
      {"i3", dict_file(header("<i3", "()"), Bytes(3)), "'<i3' is not an element type"},
      {"bad order", dict_file(header("!f4", "()"), Bytes(4)), "'!f4' is not an element type"},
      {"fortran not bool", dict_file("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}"),
       "x.npy: fortran_order: expected True or False at byte 34, found '0'"},
      {"fortran truthy word", dict_file("{'descr': '<f4', 'fortran_order': Trueish, 'shape': ()}"),
       "x.npy: fortran_order: expected True or False"},
      {"shape list", dict_file("{'descr': '<f4', 'fortran_order': False, 'shape': [1]}"),
       "x.npy: shape: expected a tuple '(...)' at byte 50, found '['"},
      {"shape negative", dict_file(header("<f4", "(2, -1)")),
       "x.npy: shape: a negative dimension at byte 54 (dimensions are counts)"},
      {"shape minus alone", dict_file(header("<f4", "(-)")),
       "x.npy: header: expected a dimension (a non-negative integer) at byte 52, found ')'"},
      {"shape float", dict_file(header("<f4", "(1.5,)")),
       "x.npy: header: expected ',' or ')' in the shape at byte 52, found '.'"},
      {"shape word", dict_file(header("<f4", "(n,)")),
       "x.npy: header: expected a dimension (a non-negative integer) or ')' at byte 51, found 'n'"},
      {"shape 1-tuple without comma", dict_file(header("<f4", "(1)"), f4),
       "x.npy: header: expected ',' after the only dimension (Python writes a 1-tuple '(n,)')"},
      {"shape beyond 64 bits", dict_file(header("<f4", "(18446744073709551616,)")),
       "x.npy: shape: the dimension 18446744073709551616 does not fit in 64 bits"},
      {"65 dimensions", dict_file(header("<f4", "(" + dims65 + ")"), f4),
       "x.npy: shape: more than 64 dimensions (NumPy allows at most 64)"},
      {"element count overflow", dict_file(header("<f4", "(4294967296, 4294967296)")),
       "x.npy: shape: (4294967296, 4294967296) has more elements than a size_t counts"},
      {"byte count overflow", dict_file(header("<f8", "(4294967296, 536870912)")),
       "x.npy: shape: (4294967296, 536870912) of 8-byte items has more bytes than a size_t counts"},
      {"data short", dict_file(header("<f4", "(2, 3)"), Bytes(20)),
       "x.npy: data: 20 bytes (too short) where shape (2, 3) of '<f4' needs 24; the file is "
       "truncated, write it again"},
      {"data long", dict_file(header("<f4", "(2,)"), Bytes(9)),
       "x.npy: data: 9 bytes (too long) where shape (2,) of '<f4' needs 8; the file is not one "
       "array"},
      {"huge shape, no data", dict_file(header("<f8", "(1000000000, 1000000000)")),
       "x.npy: data: 0 bytes (too short) where shape (1000000000, 1000000000) of '<f8' needs "
       "8000000000000000000"},
  };
}

TEST(NpyRefusal, EveryMessage) {
  for (const Refusal& r : refusals()) {
    EXPECT_THAT(parse_error(r.file), HasSubstr(r.message)) << r.name;
  }
}

TEST(NpyRefusal, SixtyFourDimensionsAreRead) {
  std::string dims;
  for (int k = 0; k < 64; ++k) dims += "1, ";
  EXPECT_EQ(parse_npy(dict_file(header("<f4", "(" + dims + ")"), Bytes(4)), "x").shape.size(), 64U);
}

TEST(NpyRefusal, ErrorBytesArePrintable) {
  EXPECT_THAT(parse_error(dict_file(header("\x01<f4\xff", "()"))),
              HasSubstr("'\\x01<f4\\xff' is not an element type"));
  EXPECT_THAT(parse_error(dict_file(header(std::string(100, 'z'), "()"))),
              HasSubstr("'" + std::string(40, 'z') + "...' is not"));
}

TEST(NpyRefusal, Files) {
  const auto dir = std::filesystem::temp_directory_path() / "shardcheck_npy_refusals";
  std::filesystem::create_directories(dir / "full" / "inside");
  const std::string missing = (dir / "none.npy").string();
  EXPECT_THAT(error_of([&] { (void)read_npy(missing); }),
              HasSubstr(missing + ": file: cannot be opened (No such file or directory); check the "
                                  "path in the case manifest"));
  const NpyArray a = from_tensor(Tensor<float>(Shape{1}, {1.0F}));
  const std::string no_dir = (dir / "no" / "a.npy").string();
  EXPECT_THAT(error_of([&] { write_npy(no_dir, a); }),
              HasSubstr(no_dir + ": file: cannot be written ("));
  EXPECT_THAT(error_of([&] { write_npy(no_dir, a); }),
              HasSubstr("check that its folder exists and is writable"));
  // The rename onto a non-empty folder fails; the temporary file is removed.
  const std::string onto_dir = (dir / "full").string();
  EXPECT_THAT(error_of([&] { write_npy(onto_dir, a); }),
              HasSubstr(onto_dir + ": file: cannot be replaced ("));
  EXPECT_FALSE(std::filesystem::exists(onto_dir + ".tmp"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace shardcheck::cases
