#include "softmax_merge_input.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace shardcheck::fuzz {
namespace {

class Reader {
 public:
  Reader(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  std::uint8_t byte() { return pos_ < n_ ? d_[pos_++] : 0; }
  template <class T>
  T raw() {
    unsigned char b[sizeof(T)] = {};
    for (auto& c : b) c = byte();
    T v;
    std::memcpy(&v, b, sizeof(T));
    return v;
  }

 private:
  const std::uint8_t* d_;
  std::size_t n_, pos_ = 0;
};

template <class A>
const std::vector<A>& table() {
  constexpr A inf = std::numeric_limits<A>::infinity();
  static const std::vector<A> t = {
      std::numeric_limits<A>::quiet_NaN(),
      -std::numeric_limits<A>::quiet_NaN(),
      std::numeric_limits<A>::signaling_NaN(),
      inf,
      -inf,
      A(0),
      -A(0),
      std::numeric_limits<A>::denorm_min(),
      -std::numeric_limits<A>::denorm_min(),
      std::numeric_limits<A>::min(),
      std::numeric_limits<A>::max(),
      std::numeric_limits<A>::lowest(),
      A(1e30),
      A(-1e30),
      A(88.72283935546875),    // expf overflows above
      A(-103.97208404541016),  // expf's smallest subnormal result
      A(709.782712893384),     // exp overflows above
      A(-745.1332191019412),   // exp's smallest subnormal result
      A(1),
      A(-1),
      A(0.5),
      A(1e4),
      A(-1e4),
      std::numeric_limits<A>::epsilon(),
  };
  return t;
}

template <class A>
double value(Reader& r, bool is_lse, double previous_lse) {
  const std::uint8_t tag = r.byte();
  switch (tag % 8) {
    case 0:
    case 1: return static_cast<double>(r.raw<A>());
    case 2: return -std::numeric_limits<double>::infinity();
    case 3: return static_cast<double>(static_cast<std::int8_t>(r.byte())) / 8;
    case 4: {
      const auto d = static_cast<double>(static_cast<std::int8_t>(r.byte()));
      return is_lse ? static_cast<double>(static_cast<A>(previous_lse + d / 4)) : d / 8;
    }
    case 5: {
      const auto& t = table<A>();
      return static_cast<double>(t[r.byte() % t.size()]);
    }
    case 6: {
      const auto lo = r.byte();
      const auto hi = r.byte();
      return static_cast<double>(static_cast<std::int16_t>(lo | (hi << 8))) / 16;
    }
    default: return 0.0;
  }
}

template <class A>
void values(Reader& r, MergeInput& in) {
  in.lse.assign(in.parts * in.rows, 0.0);
  in.out.assign(in.parts * in.rows * in.width, 0.0);
  for (std::size_t j = 0; j < in.parts; ++j) {
    for (std::size_t i = 0; i < in.rows; ++i) {
      const double prev = j == 0 ? 0.0 : in.lse_at(j - 1, i);
      in.lse[j * in.rows + i] = value<A>(r, true, std::isfinite(prev) ? prev : 0.0);
    }
    for (std::size_t k = 0; k < in.rows * in.width; ++k) {
      in.out[j * in.rows * in.width + k] = value<A>(r, false, 0.0);
    }
  }
}

template <class A>
void put_raw(std::vector<std::uint8_t>& b, double v) {
  const A a = static_cast<A>(v);
  unsigned char c[sizeof(A)];
  std::memcpy(c, &a, sizeof(A));
  b.push_back(0);  // tag 0: raw bits
  b.insert(b.end(), c, c + sizeof(A));
}

}  // namespace

MergeInput decode_merge_input(const std::uint8_t* data, std::size_t size) {
  Reader r(data, size);
  MergeInput in;
  const std::uint8_t flags = r.byte();
  in.is_float = (flags & 1) != 0;
  in.ring_from_empty = (flags & 2) != 0;
  in.rows = 1 + r.byte() % 4;
  in.width = r.byte() % 5;
  in.parts = r.byte() % 7;
  in.ring_start = r.byte() % (in.parts == 0 ? 1 : in.parts);
  const unsigned groups = r.byte() | (static_cast<unsigned>(r.byte()) << 8);
  for (std::size_t j = 0; j < in.parts; ++j) in.group_of_part.push_back((groups >> (2 * j)) & 3);
  if (in.is_float) {
    values<float>(r, in);
  } else {
    values<double>(r, in);
  }
  return in;
}

std::vector<std::uint8_t> encode_merge_input(const MergeInput& in) {
  std::vector<std::uint8_t> b;
  b.push_back(static_cast<std::uint8_t>((in.is_float ? 1 : 0) | (in.ring_from_empty ? 2 : 0)));
  b.push_back(static_cast<std::uint8_t>(in.rows - 1));
  b.push_back(static_cast<std::uint8_t>(in.width));
  b.push_back(static_cast<std::uint8_t>(in.parts));
  b.push_back(static_cast<std::uint8_t>(in.ring_start));
  unsigned groups = 0;
  for (std::size_t j = 0; j < in.parts; ++j)
    groups |= static_cast<unsigned>(in.group_of_part[j] & 3) << (2 * j);
  b.push_back(static_cast<std::uint8_t>(groups & 0xff));
  b.push_back(static_cast<std::uint8_t>(groups >> 8));
  for (std::size_t j = 0; j < in.parts; ++j) {
    for (std::size_t i = 0; i < in.rows; ++i) {
      in.is_float ? put_raw<float>(b, in.lse_at(j, i)) : put_raw<double>(b, in.lse_at(j, i));
    }
    for (std::size_t k = 0; k < in.rows * in.width; ++k) {
      const double v = in.out[j * in.rows * in.width + k];
      in.is_float ? put_raw<float>(b, v) : put_raw<double>(b, v);
    }
  }
  return b;
}

std::string describe(const MergeInput& in) {
  std::string s;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s rows=%zu width=%zu parts=%zu ring_start=%zu%s groups=[",
                in.is_float ? "float32" : "float64", in.rows, in.width, in.parts, in.ring_start,
                in.ring_from_empty ? " ring_from_empty" : "");
  s += buf;
  for (std::size_t j = 0; j < in.parts; ++j)
    s += (j ? "," : "") + std::to_string(in.group_of_part[j]);
  s += "]\n";
  for (std::size_t j = 0; j < in.parts; ++j) {
    for (std::size_t i = 0; i < in.rows; ++i) {
      std::snprintf(buf, sizeof buf, "  part %zu row %zu: lse %a (%.17g) out", j, i,
                    in.lse_at(j, i), in.lse_at(j, i));
      s += buf;
      for (std::size_t e = 0; e < in.width; ++e) {
        std::snprintf(buf, sizeof buf, " %a (%.9g)", in.out_at(j, i, e), in.out_at(j, i, e));
        s += buf;
      }
      s += "\n";
    }
  }
  return s;
}

}  // namespace shardcheck::fuzz
