// vocab_cross_entropy_fuzz's input format: bytes → a cross-entropy problem. Every byte string is
// valid; missing bytes read as 0.
//
//   byte 0   bit 0: T = float32 (else float64); bits 1-2: reduction none/sum/mean (3: mean);
//            bits 3-4: label smoothing 0, 1/8, 1/2, 1; bit 5: class weights; bit 6: token
//            weights; bit 7: ignore_index none (else PyTorch's −100)
//   byte 1   tokens = 1 + b % 4          byte 2   V = 1 + b % 8
//   byte 3   P = 1 + b % 3 (ranks)       byte 4   vocabulary split: chunk, balanced, or (else)
//            explicit sizes: each rank's size is the next byte % (V + 1), the last rank the rest
//            (a wrong explicit split is the splitter's own harness's business)
//   per token: a target byte, by b % 8: 0-4 b % V (valid), 5 −100, 6 V + b (out of range),
//            7 −1 − b (negative)
//   logits [tokens, V] row by row, then the class weights [V], the token weights [tokens], then
//   dloss ([tokens] for none, else [1]); each a VALUE: a tag byte and its payload, by tag % 4:
//     0  RAW BITS: sizeof(T) bytes memcpy'd into T (NaN payloads, ±inf, subnormals, any size)
//     1  specials[byte % size]: NaN, ±inf, ±0, ±max, ±1e30, ±1e300, subnormals, exp's
//        overflow and underflow thresholds of both types
//     2  int8 / 4
//     3  int16 · 64 (large but finite logits)
//   Weights and dloss are the same values, raw bits included (a non-finite weight must be
//   refused). Until issue 16 they were never raw bits: raw-bit weights and dloss such as 2^−271
//   and 1e255 made dloss/D overflow while the exact gradient is finite
//   (regressions-pending/README.md); the bound now gives up exactly there (the overflow rule of
//   reference/vocab/vocab_cross_entropy_bound.hpp), and raw bits are back.
// The custom mutator (vocab_cross_entropy_fuzz.cpp) writes tag-1 specials and raw-bit specials
// at random places, where libFuzzer's byte mutations rarely make a NaN or an infinity.
#pragma once

#include "ops/vocab/vocab_cross_entropy.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace shardcheck::fuzz {

struct VocabInput {
  bool is_float = false;
  VocabCrossEntropyConfig cfg;  // options, vocab, split
  std::size_t tokens = 1;
  int ranks = 1;
  std::vector<std::int64_t> targets;  // [tokens]
  std::vector<double> logits;         // [tokens, V], values of T
  std::vector<double> dloss;          // [tokens] (none) or [1]
};

// The special values of the value tag 1, as double (rounded to float for float32 inputs).
std::span<const double> vocab_specials();

VocabInput decode_vocab_input(std::span<const std::uint8_t> bytes);

// The problem in words (every value in %a).
std::string describe(const VocabInput& in);

}  // namespace shardcheck::fuzz
