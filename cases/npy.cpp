// The .npy reader and writer of npy.hpp, without NumPy: the header dict is parsed by hand
// (a tiny Python-literal grammar, below), the data checked against the shape before anything is
// allocated, then byte-swapped to native order and transposed to C order.
//
// Refused, each with a CaseError "<file>: <field>: <what is wrong>; <what to do>": a file shorter
// than the preamble or with a wrong magic; a version other than 1.0, 2.0, 3.0; a header length
// past the end of the file; a header that does not end in '\n'; a header that is not the dict
// {'descr': str, 'fortran_order': True|False, 'shape': (int, ...)} (syntax, a missing, repeated
// or unknown key, a value of the wrong kind, a negative dimension or one beyond 64 bits, more
// than 64 dimensions); a descr other than the ones npy.hpp lists; an element or byte count that
// overflows size_t; data shorter or longer than the shape says. to_tensor and to_mask refuse an
// array whose descr or values do not fit the requested type.
//
// The header grammar (Python's, restricted to what a header can hold; NumPy reads it with
// ast.literal_eval, numpy/lib/format.py):
//   header := ws dict ws            (the last byte '\n', the padding spaces are ws)
//   dict   := '{' ws [item (ws ',' ws item)* ws [',']] ws '}'
//   item   := string ws ':' ws value
//   value  := string | 'True' | 'False' | tuple
//   tuple  := '(' ws ')' | '(' ws int ws ',' ws ')' | '(' ws int (ws ',' ws int)+ ws [','] ws ')'
//   int    := ['-' ws] digit+ ['L' (versions 1.0 and 2.0: Python 2's long suffix, which NumPy
//             also drops)]
//   string := "'" chars "'" | '"' chars '"'   (a backslash escapes the next byte)
//   ws     := (' ' | '\t' | '\n' | '\r' | '\f' | '\v')*
#include "cases/npy.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>

namespace shardcheck::cases {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kMaxDims = 64;       // NumPy 2's NPY_MAXDIMS
constexpr std::size_t kAlign = 64;         // numpy/lib/format.py ARRAY_ALIGN
constexpr std::size_t kGrowthDigits = 21;  // numpy/lib/format.py GROWTH_AXIS_MAX_DIGITS
constexpr const char* kResave = "write the file with numpy.save";

[[noreturn]] void fail(const std::string& what, std::string_view field, const std::string& msg) {
  throw CaseError(what + ": " + std::string(field) + ": " + msg);
}

// `s` for an error message: printable ASCII as is, other bytes as \xNN, at most 40 bytes.
std::string printable(std::string_view s) {
  std::string out;
  const std::size_t n = std::min<std::size_t>(s.size(), 40);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > n) out += "...";
  return out;
}

std::string in_quotes(std::string_view s) { return "'" + printable(s) + "'"; }

std::string shape_repr(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::size_t> shape;
};

// The recursive-descent parser of the grammar in the file comment.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& what, bool python2_longs)
      : s_(text), what_(what), longs_(python2_longs) {}

  Header parse() {
    ws();
    expect('{', "opening the header's dict");
    bool have_descr = false, have_fortran = false, have_shape = false;
    Header h;
    ws();
    while (peek() != '}') {
      const std::size_t key_at = i_;
      if (peek() != '\'' && peek() != '"') {
        syntax("a key (a quoted string) or '}'", key_at);
      }
      const std::string key = string_value();
      ws();
      expect(':', "after the key " + in_quotes(key));
      ws();
      auto once = [&](bool& seen) {
        if (seen) {
          fail(what_, "header",
               "the key " + in_quotes(key) + " appears twice (an .npy header names each once); " +
                   kResave);
        }
        seen = true;
      };
      if (key == "descr") {
        once(have_descr);
        if (peek() != '\'' && peek() != '"') {
          fail(what_, "descr",
               "not a string (a list is a structured dtype, which shardcheck does not read); "
               "save a plain numeric array");
        }
        h.descr = string_value();
      } else if (key == "fortran_order") {
        once(have_fortran);
        h.fortran_order = bool_value();
      } else if (key == "shape") {
        once(have_shape);
        h.shape = tuple_value();
      } else {
        fail(what_, "header",
             "unknown key " + in_quotes(key) +
                 " (an .npy header has only 'descr', 'fortran_order' and 'shape'); " + kResave);
      }
      ws();
      if (peek() == ',') {
        ++i_;
        ws();
      } else if (peek() != '}') {
        syntax("',' or '}' after the value of " + in_quotes(key), i_);
      }
    }
    ++i_;  // '}'
    ws();
    if (i_ != s_.size()) {
      fail(what_, "header",
           "unexpected " + in_quotes(s_.substr(i_, 1)) + " at byte " + std::to_string(i_) +
               " after the dict's closing '}'; " + kResave);
    }
    const char* missing = !have_descr     ? "'descr'"
                          : !have_fortran ? "'fortran_order'"
                          : !have_shape   ? "'shape'"
                                          : nullptr;
    if (missing != nullptr) {
      fail(what_, "header",
           std::string(missing) +
               " missing (an .npy header is a dict with 'descr', 'fortran_order' and 'shape'); " +
               kResave);
    }
    return h;
  }

 private:
  // The next byte, or '\0' at the end (a NUL inside the header is never valid either).
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }

  void ws() {
    while (i_ < s_.size() && std::strchr(" \t\n\r\f\v", s_[i_]) != nullptr && s_[i_] != '\0') {
      ++i_;
    }
  }

  [[noreturn]] void syntax(const std::string& expected, std::size_t at) const {
    const std::string found = at < s_.size() ? in_quotes(s_.substr(at, 1)) : "the end";
    fail(what_, "header",
         "expected " + expected + " at byte " + std::to_string(at) + ", found " + found +
             " (not the Python dict literal of an .npy header); " + kResave);
  }

  void expect(char c, const std::string& context) {
    if (peek() != c) syntax(std::string("'") + c + "' " + context, i_);
    ++i_;
  }

  std::string string_value() {
    const std::size_t start = i_;
    const char q = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) ++i_;
      out += s_[i_++];
    }
    if (i_ >= s_.size()) {
      fail(what_, "header",
           "the string starting at byte " + std::to_string(start) + " is not closed; " + kResave);
    }
    ++i_;
    return out;
  }

  bool word(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    const std::size_t end = i_ + w.size();
    if (end < s_.size() &&
        (std::isalnum(static_cast<unsigned char>(s_[end])) != 0 || s_[end] == '_')) {
      return false;
    }
    i_ = end;
    return true;
  }

  bool bool_value() {
    if (word("True")) return true;
    if (word("False")) return false;
    fail(what_, "fortran_order",
         "expected True or False at byte " + std::to_string(i_) + ", found " +
             (i_ < s_.size() ? in_quotes(s_.substr(i_, 1)) : std::string("the end")) + "; " +
             kResave);
  }

  std::size_t int_value() {
    const std::size_t start = i_;
    if (peek() == '-') {
      ++i_;
      ws();
      if (std::isdigit(static_cast<unsigned char>(peek())) != 0) {
        fail(what_, "shape",
             "a negative dimension at byte " + std::to_string(start) +
                 " (dimensions are counts); " + kResave);
      }
      syntax("a dimension (a non-negative integer)", i_);
    }
    if (std::isdigit(static_cast<unsigned char>(peek())) == 0) {
      syntax("a dimension (a non-negative integer) or ')'", i_);
    }
    std::uint64_t v = 0;
    bool too_big = false;
    while (std::isdigit(static_cast<unsigned char>(peek())) != 0) {
      const auto d = static_cast<std::uint64_t>(s_[i_++] - '0');
      if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) too_big = true;
      v = v * 10 + d;
    }
    if (longs_ && peek() == 'L') ++i_;
    if (too_big || v > std::numeric_limits<std::size_t>::max()) {
      fail(what_, "shape",
           "the dimension " + printable(s_.substr(start, i_ - start)) +
               " does not fit in 64 bits; the array cannot be that large, check the file");
    }
    return static_cast<std::size_t>(v);
  }

  std::vector<std::size_t> tuple_value() {
    if (peek() != '(') {
      fail(what_, "shape",
           "expected a tuple '(...)' at byte " + std::to_string(i_) + ", found " +
               (i_ < s_.size() ? in_quotes(s_.substr(i_, 1)) : std::string("the end")) + "; " +
               kResave);
    }
    ++i_;
    ws();
    std::vector<std::size_t> shape;
    while (peek() != ')') {
      shape.push_back(int_value());
      if (shape.size() > kMaxDims) {
        fail(what_, "shape",
             "more than " + std::to_string(kMaxDims) +
                 " dimensions (NumPy allows at most 64); check the file");
      }
      ws();
      if (peek() == ',') {
        ++i_;
        ws();
      } else if (peek() != ')') {
        syntax("',' or ')' in the shape", i_);
      } else if (shape.size() == 1) {
        syntax("',' after the only dimension (Python writes a 1-tuple '(n,)')", i_);
      }
    }
    ++i_;
    return shape;
  }

  std::string_view s_;
  const std::string& what_;
  bool longs_;
  std::size_t i_ = 0;
};

struct Descr {
  NpyKind kind;
  int item_bytes;
  bool swap;  // the file's byte order is not the machine's
};

Descr parse_descr(const std::string& d, const std::string& what) {
  std::string_view s = d;
  char order = '=';
  if (!s.empty() && std::strchr("<>|=", s[0]) != nullptr && s[0] != '\0') {
    order = s[0];
    s.remove_prefix(1);
  }
  std::optional<Descr> r;
  if (s == "?") s = "b1";
  if (s.size() == 2 && s[1] >= '1' && s[1] <= '8') {
    const int n = s[1] - '0';
    const bool pow2 = n == 1 || n == 2 || n == 4 || n == 8;
    if (s[0] == 'f' && pow2 && n >= 2) r = Descr{NpyKind::floating, n, false};
    if (s[0] == 'i' && pow2) r = Descr{NpyKind::signed_integer, n, false};
    if (s[0] == 'u' && pow2) r = Descr{NpyKind::unsigned_integer, n, false};
    if (s[0] == 'b' && n == 1) r = Descr{NpyKind::boolean, 1, false};
  }
  if (!r) {
    fail(what, "descr",
         in_quotes(d) +
             " is not an element type shardcheck reads (f8 f4 f2, i1 i2 i4 i8, u1 u2 u4 u8, b1; "
             "no complex, object, string, structured or datetime types); save the array as one "
             "of those");
  }
  constexpr bool little = std::endian::native == std::endian::little;
  r->swap = r->item_bytes > 1 && ((order == '<' && !little) || (order == '>' && little));
  return *r;
}

std::uint32_t read_le(std::span<const unsigned char> b, std::size_t at, std::size_t n) {
  std::uint32_t v = 0;
  for (std::size_t k = 0; k < n; ++k) v |= static_cast<std::uint32_t>(b[at + k]) << (8 * k);
  return v;
}

void swap_items(std::vector<unsigned char>& data, std::size_t item) {
  for (std::size_t off = 0; off + item <= data.size(); off += item) {
    std::reverse(data.begin() + static_cast<std::ptrdiff_t>(off),
                 data.begin() + static_cast<std::ptrdiff_t>(off + item));
  }
}

// Fortran order (first index fastest) to C order (last index fastest), any rank.
std::vector<unsigned char> fortran_to_c(const std::vector<unsigned char>& f,
                                        const std::vector<std::size_t>& shape, std::size_t item,
                                        std::size_t count) {
  std::vector<unsigned char> c(f.size());
  const std::size_t rank = shape.size();
  std::vector<std::size_t> c_stride(rank, 1), index(rank, 0);
  for (std::size_t k = rank; k-- > 1;) c_stride[k - 1] = c_stride[k] * shape[k];
  std::size_t c_off = 0;  // in items, of `index`
  for (std::size_t src = 0; src < count; ++src) {
    std::memcpy(c.data() + c_off * item, f.data() + src * item, item);
    for (std::size_t k = 0; k < rank; ++k) {  // the next index, first one fastest
      if (++index[k] < shape[k]) {
        c_off += c_stride[k];
        break;
      }
      c_off -= (shape[k] - 1) * c_stride[k];
      index[k] = 0;
    }
  }
  return c;
}

std::string type_of(const NpyArray& a) { return in_quotes(a.descr()); }

// The value of item i of an integer array, widened; nothing when it is above int64's range.
std::optional<std::int64_t> int_item(const NpyArray& a, std::size_t i) {
  const unsigned char* p = a.data.data() + i * static_cast<std::size_t>(a.item_bytes);
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  const bool s = a.kind == NpyKind::signed_integer;
  switch (a.item_bytes) {
    case 1: return s ? load(std::int8_t{}) : load(std::uint8_t{});
    case 2: return s ? load(std::int16_t{}) : load(std::uint16_t{});
    case 4: return s ? load(std::int32_t{}) : static_cast<std::int64_t>(load(std::uint32_t{}));
    default: break;
  }
  if (s) return load(std::int64_t{});
  const std::uint64_t u = load(std::uint64_t{});
  if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(u);
}

template <class T>
std::vector<T> items_of(const NpyArray& a) {
  std::vector<T> v(a.size());
  if (!v.empty()) std::memcpy(v.data(), a.data.data(), v.size() * sizeof(T));
  return v;
}

// The descr from_tensor writes for T.
template <class T>
std::pair<NpyKind, int> npy_type_of() {
  if constexpr (std::is_same_v<T, bfloat16>) {
    return {NpyKind::unsigned_integer, 2};
  } else if constexpr (std::is_integral_v<T>) {
    return {NpyKind::signed_integer, static_cast<int>(sizeof(T))};
  } else {
    return {NpyKind::floating, static_cast<int>(sizeof(T))};
  }
}

}  // namespace

std::size_t NpyArray::size() const {
  std::size_t n = 1;
  for (const std::size_t d : shape) n *= d;
  return n;
}

std::string NpyArray::descr() const {
  const char kinds[] = {'f', 'i', 'u', 'b'};
  std::string s(1, item_bytes == 1 ? '|' : '<');
  s += kinds[static_cast<int>(kind)];
  s += std::to_string(item_bytes);
  return s;
}

NpyArray parse_npy(std::span<const unsigned char> bytes, const std::string& what) {
  if (bytes.size() < kMagic.size() ||
      std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) {
    fail(what, "magic",
         "the file does not start with \\x93NUMPY (not an .npy file); " + std::string(kResave));
  }
  if (bytes.size() < kMagic.size() + 2) {
    fail(what, "version",
         "the file ends inside the preamble (" + std::to_string(bytes.size()) +
             " bytes); the file is truncated, write it again");
  }
  const int major = bytes[6], minor = bytes[7];
  if (!((major == 1 || major == 2 || major == 3) && minor == 0)) {
    fail(what, "version",
         std::to_string(major) + "." + std::to_string(minor) +
             " is not a format version shardcheck reads (1.0, 2.0, 3.0); " + kResave);
  }
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  const std::size_t header_at = 8 + len_bytes;
  if (bytes.size() < header_at) {
    fail(what, "header",
         "the file ends inside the header length (" + std::to_string(bytes.size()) +
             " bytes); the file is truncated, write it again");
  }
  const std::size_t header_len = read_le(bytes, 8, len_bytes);
  if (header_len > bytes.size() - header_at) {
    fail(what, "header",
         "its length " + std::to_string(header_len) + " runs past the end of the file (" +
             std::to_string(bytes.size() - header_at) +
             " bytes follow the length); the file is truncated, write it again");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + header_at), header_len);
  if (text.empty() || text.back() != '\n') {
    fail(what, "header",
         "does not end in '\\n' (an .npy header is padded with spaces and ends in a newline); " +
             std::string(kResave));
  }
  Header h = HeaderParser(text, what, major <= 2).parse();
  const Descr d = parse_descr(h.descr, what);

  // The counts, checked before anything is allocated: zero dimensions aside, the product of the
  // others must fit (as NumPy requires), and so must its bytes.
  std::size_t nonzero = 1;
  bool zero = false;
  for (const std::size_t n : h.shape) {
    if (n == 0) {
      zero = true;
    } else if (nonzero > std::numeric_limits<std::size_t>::max() / n) {
      fail(what, "shape",
           shape_repr(h.shape) + " has more elements than a size_t counts; check the file");
    } else {
      nonzero *= n;
    }
  }
  const auto item = static_cast<std::size_t>(d.item_bytes);
  if (nonzero > std::numeric_limits<std::size_t>::max() / item) {
    fail(what, "shape",
         shape_repr(h.shape) + " of " + std::to_string(item) +
             "-byte items has more bytes than a size_t counts; check the file");
  }
  const std::size_t count = zero ? 0 : nonzero;
  const std::size_t nbytes = count * item;
  const std::size_t have = bytes.size() - header_at - header_len;
  if (have != nbytes) {
    fail(what, "data",
         std::to_string(have) + " bytes " + (have < nbytes ? "(too short)" : "(too long)") +
             " where shape " + shape_repr(h.shape) + " of " + in_quotes(h.descr) + " needs " +
             std::to_string(nbytes) + "; the file is " +
             (have < nbytes ? "truncated" : "not one array") + ", write it again");
  }

  NpyArray a;
  a.kind = d.kind;
  a.item_bytes = d.item_bytes;
  a.shape = std::move(h.shape);
  const auto* first = bytes.data() + header_at + header_len;
  a.data.assign(first, first + nbytes);
  if (d.swap) swap_items(a.data, item);
  if (h.fortran_order && a.shape.size() > 1 && count > 1) {
    a.data = fortran_to_c(a.data, a.shape, item, count);
  }
  return a;
}

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fail(path, "file",
         std::string("cannot be opened (") + std::strerror(errno) +
             "); check the path in the case manifest");
  }
  const std::vector<unsigned char> bytes{std::istreambuf_iterator<char>(in),
                                         std::istreambuf_iterator<char>()};
  return parse_npy(bytes, path);
}

std::vector<unsigned char> serialize_npy(const NpyArray& a) {
  // What numpy/lib/format.py writes: the dict with sorted keys, then room for the first
  // dimension to grow to 21 digits, then spaces so that the data starts at a multiple of 64
  // bytes, then '\n'.
  std::string dict = "{'descr': '" + a.descr() +
                     "', 'fortran_order': False, 'shape': " + shape_repr(a.shape) + ", }";
  if (!a.shape.empty()) {
    dict.append(kGrowthDigits - std::min(kGrowthDigits, std::to_string(a.shape[0]).size()), ' ');
  }
  int major = 1;
  std::size_t len_bytes = 2;
  auto padded = [&] {
    const std::size_t hlen = dict.size() + 1;
    return hlen + kAlign - ((kMagic.size() + 2 + len_bytes + hlen) % kAlign);
  };
  std::size_t header_len = padded();
  if (header_len > 0xffff) {
    major = 2;
    len_bytes = 4;
    header_len = padded();
  }
  std::vector<unsigned char> out(kMagic.begin(), kMagic.end());
  out.push_back(static_cast<unsigned char>(major));
  out.push_back(0);
  for (std::size_t k = 0; k < len_bytes; ++k) {
    out.push_back(static_cast<unsigned char>((header_len >> (8 * k)) & 0xff));
  }
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), header_len - dict.size() - 1, ' ');
  out.push_back('\n');
  if constexpr (std::endian::native == std::endian::big) {
    std::vector<unsigned char> d = a.data;
    swap_items(d, static_cast<std::size_t>(a.item_bytes));
    out.insert(out.end(), d.begin(), d.end());
  } else {
    out.insert(out.end(), a.data.begin(), a.data.end());
  }
  return out;
}

void write_npy(const std::string& path, const NpyArray& a) {
  const std::vector<unsigned char> bytes = serialize_npy(a);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (out) {
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
    }
    if (!out) {
      const std::string why = std::strerror(errno);
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      fail(path, "file",
           "cannot be written (" + why + "); check that its folder exists and is writable");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    fail(path, "file",
         "cannot be replaced (" + ec.message() + "); check that its folder is writable");
  }
}

template <Element T>
Tensor<T> to_tensor(const NpyArray& a, DType declared, const std::string& what) {
  constexpr DType mine = dtype_of<T>;
  const std::string tname(name(mine));
  if (declared != mine) {
    fail(what, "dtype",
         "the case declares " + std::string(name(declared)) + " but it is read as " + tname +
             " (a bug in the caller); read it with to_tensor of the declared type");
  }
  if constexpr (std::is_same_v<T, bfloat16>) {
    if (a.kind != NpyKind::unsigned_integer || a.item_bytes != 2) {
      fail(what, "descr",
           type_of(a) +
               " cannot hold bfloat16, which is stored as its raw bits in uint16 ('<u2'); save "
               "the tensor's bits, e.g. t.view(torch.int16).numpy().view(numpy.uint16)");
    }
    std::vector<bfloat16> v;
    v.reserve(a.size());
    for (const std::uint16_t bits : items_of<std::uint16_t>(a)) {
      v.push_back(std::bit_cast<bfloat16>(bits));
    }
    return Tensor<T>(a.shape, std::move(v));
  } else if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16>) {
    if (a.kind != NpyKind::floating || a.item_bytes != static_cast<int>(sizeof(T))) {
      fail(what, "descr",
           type_of(a) + " is not " + tname + " ('<f" + std::to_string(sizeof(T)) +
               "'), the declared type, and is not converted (the values would not be the ones "
               "the implementation saw); save the array as " +
               tname);
    }
    return Tensor<T>(a.shape, items_of<T>(a));
  } else {
    if (a.kind != NpyKind::signed_integer && a.kind != NpyKind::unsigned_integer) {
      fail(what, "descr",
           type_of(a) + " is not an integer type, which " + tname +
               " needs (i1 i2 i4 i8 u1 u2 u4 u8); save the array as " + tname);
    }
    std::vector<T> v;
    v.reserve(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::optional<std::int64_t> x = int_item(a, i);
      if (!x || *x < std::numeric_limits<T>::min() || *x > std::numeric_limits<T>::max()) {
        fail(what, "data",
             "item " + std::to_string(i) + " of " + type_of(a) + " is outside " + tname +
                 "'s range; save values that fit, or declare a wider type");
      }
      v.push_back(static_cast<T>(*x));
    }
    return Tensor<T>(a.shape, std::move(v));
  }
}

std::vector<std::uint8_t> to_mask(const NpyArray& a, const std::string& what) {
  if (a.kind != NpyKind::boolean) {
    fail(what, "descr",
         type_of(a) +
             " is not bool ('|b1'), which a mask needs; save the mask as a numpy bool "
             "array");
  }
  std::vector<std::uint8_t> m(a.data.begin(), a.data.end());
  for (auto& b : m) b = b != 0 ? 1 : 0;  // NumPy reads any nonzero byte as True
  return m;
}

template <Element T>
NpyArray from_tensor(const Tensor<T>& t) {
  NpyArray a;
  std::tie(a.kind, a.item_bytes) = npy_type_of<T>();
  a.shape = t.shape();
  a.data.resize(t.size() * sizeof(T));
  if (!a.data.empty()) std::memcpy(a.data.data(), t.data(), a.data.size());
  return a;
}

NpyArray from_mask(const std::vector<std::uint8_t>& mask, std::vector<std::size_t> shape) {
  NpyArray a;
  a.kind = NpyKind::boolean;
  a.item_bytes = 1;
  a.shape = std::move(shape);
  if (a.size() != mask.size()) {
    throw UsageError("from_mask: shape " + shape_repr(a.shape) + " needs " +
                     std::to_string(a.size()) + " values but the mask has " +
                     std::to_string(mask.size()) + "; pass one byte per element");
  }
  a.data.reserve(mask.size());
  for (const std::uint8_t b : mask) a.data.push_back(b != 0 ? 1 : 0);
  return a;
}

#define SHARDCHECK_NPY_INSTANTIATE(T)                                                       \
  template Tensor<T> to_tensor<T>(const NpyArray&, DType, const std::string&); /* NOLINT */ \
  template NpyArray from_tensor<T>(const Tensor<T>&);
SHARDCHECK_NPY_INSTANTIATE(double)
SHARDCHECK_NPY_INSTANTIATE(float)
SHARDCHECK_NPY_INSTANTIATE(bfloat16)
SHARDCHECK_NPY_INSTANTIATE(float16)
SHARDCHECK_NPY_INSTANTIATE(std::int32_t)
SHARDCHECK_NPY_INSTANTIATE(std::int64_t)
#undef SHARDCHECK_NPY_INSTANTIATE

}  // namespace shardcheck::cases
