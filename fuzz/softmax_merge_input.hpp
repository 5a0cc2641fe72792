// softmax_merge_fuzz's input format: bytes → a merge problem. Every byte string is valid.
//
//   byte 0   bit 0: A = float32 (else float64); bit 1: the ring's accumulator starts empty
//   byte 1   rows  = 1 + b % 4
//   byte 2   width = b % 5                    (0: lse only)
//   byte 3   parts = b % 7                    (0: no partials at all)
//   byte 4   ring start = b % max(parts, 1)   (the rank whose ring order is replayed)
//   byte 5,6 the group of part j (nested merge) = ((b5 | b6 << 8) >> 2j) & 3
//   then per part j: its lse for each row, then its out row by row; each value is a tag byte
//   and its payload, by tag % 8:
//     0, 1  RAW BITS: sizeof(A) bytes memcpy'd into A (NaN payloads, ±inf, subnormals, any
//           magnitude: what FuzzedDataProvider::ConsumeFloatingPoint never yields)
//     2     −inf (an empty partial's lse)
//     3     int8 / 8
//     4     lse: the previous part's lse of this row + int8 / 4 (comparable weights);
//           out: as 3
//     5     table[byte % size]: NaN, ±inf, ±0, subnormal/normal extremes, ±max, ±1e30, exp's
//           overflow/underflow thresholds, ...
//     6     int16 / 16
//     7     +0
//   Missing bytes read as 0 (so a short input is a row of zeros with lse 0, or raw zero bits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shardcheck::fuzz {

struct MergeInput {
  bool is_float = false;
  bool ring_from_empty = false;
  std::size_t rows = 1, width = 0, parts = 0, ring_start = 0;
  std::vector<std::size_t> group_of_part;  // [parts], each < 4
  // Values as double (exact for float32 inputs): lse [parts][rows], out [parts][rows][width].
  std::vector<double> lse, out;

  double lse_at(std::size_t j, std::size_t i) const { return lse[j * rows + i]; }
  double out_at(std::size_t j, std::size_t i, std::size_t e) const {
    return out[(j * rows + i) * width + e];
  }
};

MergeInput decode_merge_input(const std::uint8_t* data, std::size_t size);

// Bytes that decode to `in` (every value written with the raw-bits tag, so the values come
// back bit for bit; float32 inputs must hold float values).
std::vector<std::uint8_t> encode_merge_input(const MergeInput& in);

// The input in words, every value in %a and %g.
std::string describe(const MergeInput& in);

}  // namespace shardcheck::fuzz
