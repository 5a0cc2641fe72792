// split_policy_fuzz's input format: bytes → a split problem (policy, n, parts). Every byte string
// is valid; missing bytes read as 0.
//
//   byte 0        policy kind % 3: chunk, balanced, explicit
//   byte 1        parts = (int8) b: −128..127 (parts < 1 must be refused)
//   byte 2        how n is made, % 4: 0 n = byte 3; 1 n = bytes 3,4 little-endian; 2 n = bytes
//                 3..10 little-endian (any size_t); 3 n = SIZE_MAX − byte 3
//   then, for explicit: a count byte (bit 7 set: count = parts when parts ≥ 1, else count = b %
//   9), and per size a tag byte, % 4: 0 the next byte; 1 the next 8 bytes (any size_t); 2 what is
//   left of n after the sizes so far (0 when they exceed it: so valid tilings are common);
//   3 SIZE_MAX − next byte (sums that wrap around)
#pragma once

#include "layout/split_policy.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace shardcheck::fuzz {

struct SplitInput {
  SplitPolicy policy = SplitPolicy::chunk();
  std::size_t n = 0;
  int parts = 0;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::uint8_t> b) : b_(b) {}
  std::uint8_t byte() { return pos_ < b_.size() ? b_[pos_++] : 0; }
  // The next byte as a two's complement int8: −128..127.
  int int8() {
    const int b = byte();
    return b < 128 ? b : b - 256;
  }
  std::uint64_t le(int bytes) {
    std::uint64_t v = 0;
    for (int k = 0; k < bytes; ++k) v |= std::uint64_t{byte()} << (8 * k);
    return v;
  }

 private:
  std::span<const std::uint8_t> b_;
  std::size_t pos_ = 0;
};

inline SplitInput decode_split_input(std::span<const std::uint8_t> bytes) {
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  ByteReader r(bytes);
  SplitInput in;
  const int kind = r.byte() % 3;
  in.parts = r.int8();
  switch (r.byte() % 4) {
    case 0: in.n = r.byte(); break;
    case 1: in.n = r.le(2); break;
    case 2: in.n = r.le(8); break;
    default: in.n = max - r.byte(); break;
  }
  if (kind == 0) in.policy = SplitPolicy::chunk();
  if (kind == 1) in.policy = SplitPolicy::balanced();
  if (kind == 2) {
    const std::uint8_t c = r.byte();
    const std::size_t count =
        (c & 0x80) != 0 && in.parts >= 1 ? static_cast<std::size_t>(in.parts) : c % 9;
    std::vector<std::size_t> sizes;
    std::size_t used = 0;  // saturating
    for (std::size_t k = 0; k < count; ++k) {
      std::size_t s = 0;
      switch (r.byte() % 4) {
        case 0: s = r.byte(); break;
        case 1: s = r.le(8); break;
        case 2: s = used < in.n ? in.n - used : 0; break;
        default: s = max - r.byte(); break;
      }
      sizes.push_back(s);
      used = s > max - used ? max : used + s;
    }
    in.policy = SplitPolicy::explicit_sizes(std::move(sizes));
  }
  return in;
}

}  // namespace shardcheck::fuzz
