// The shared part of ops_attention_unit_tests (attention_unit_support.hpp): the ratio record and
// its summary at the end of the program, the test configurations.
#include "attention_unit_support.hpp"

#include "testing/ratio_summary.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>

namespace shardcheck::test::attention_unit {

namespace {

// Largest |err|/bound per "dtype / what", printed at the end of the program.
test::WorstRatios& ratios() {
  static test::WorstRatios r("attention: largest |err|/bound (<= 1 passes; mutants must exceed 1)");
  return r;
}

}  // namespace

void record(const std::string& key, double ratio) { ratios().add(key, ratio); }

AttentionConfig make_config(const Case& c, std::uint64_t seed) {
  AttentionConfig cfg;
  cfg.q_heads = c.h;
  cfg.kv_heads = c.g;
  cfg.head_dim = c.d;
  cfg.mask.kind = c.kind;
  cfg.mask.q_len = c.lq;
  cfg.mask.k_len = c.lk;
  if (c.padding) {
    // The first sequence fully padded (its rows are empty), the others partly.
    for (std::size_t b = 0; b < c.batch; ++b) cfg.mask.key_lengths.push_back(b == 0 ? 0 : c.lk - b);
  }
  if (c.kind == MaskKind::explicit_mask) {
    Rng rng(seed);
    cfg.mask.allowed = Tensor<std::uint8_t>(Shape{c.batch, c.lq, c.lk});
    for (auto& a : cfg.mask.allowed.values()) a = rng.below(3) != 0 ? 1 : 0;
    // One fully masked row.
    for (std::size_t s = 0; s < c.lk; ++s) cfg.mask.allowed[s] = 0;
  }
  return cfg;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"mha_none", 2, 6, 6, 2, 2, 8, MaskKind::none, false},
      {"gqa_causal_lq<lk", 2, 5, 9, 4, 2, 8, MaskKind::causal, false},
      {"gqa_causal_lq>lk", 1, 9, 5, 4, 2, 6, MaskKind::causal, false},
      {"mqa_causal_padding", 3, 7, 7, 3, 1, 5, MaskKind::causal, true},
      {"gqa_explicit", 2, 6, 8, 6, 3, 4, MaskKind::explicit_mask, false},
      {"mha_none_padding", 2, 4, 12, 2, 2, 16, MaskKind::none, true},
  };
  return c;
}

std::vector<std::size_t> range_positions(std::size_t offset, std::size_t len) {
  auto p = iota_positions(len);
  for (auto& x : p) x += offset;
  return p;
}

}  // namespace shardcheck::test::attention_unit
