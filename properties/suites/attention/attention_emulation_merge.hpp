// What the emulated attention kernels of the bound tests share (attention_exp2_emulation.hpp,
// attention_accumulate_emulation.hpp): the visible keys of each block of keys, and the merge of
// the blocks' partial (out_j, lse_j) by their lse, each step through a rounding `round` (the
// identity for a kernel in float, one rounding to a narrower accumulator otherwise).
#pragma once

#include "reference/attention/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace shardcheck::attention_emulation {

// An emulated kernel's outputs: out [batch, Lq, h, d] and dq as q; dk, dv as k; lse
// [batch, h, Lq] in float.
struct KernelRun {
  std::vector<float> out, lse, dq, dk, dv;
};

// The outputs before any row is computed: zeros, lse −inf (an empty row's values).
// Where a kernel departs from the exp2 contract's fused, base-2 form as FlashAttention-2's CUDA
// code does (reference/attention/attention_bound.hpp, (2'u), (3'n), (3o')): the weights'
// argument with its product rounded on its own (PyTorch's UNFUSE_FMA), the lse in natural units
// fl(fl(m·σ̂) + fl(log l)), out scaled by fl(1/l) (online kernels only).
struct KernelForm {
  bool unfused = false;
  bool natural_lse = false;
  bool reciprocal = false;
};

// a·b + c rounded once (fma), or the product rounded first (`unfused`).
inline float fma_or_not(float a, float b, float c, bool unfused) {
  if (!unfused) return std::fma(a, b, c);
  volatile float product = a * b;  // volatile: never contracted into an fma
  return product + c;
}

template <class Dims>
KernelRun empty_run(const Dims& D, std::size_t q_size, std::size_t k_size) {
  KernelRun r;
  r.out.assign(q_size, 0.0F);
  r.lse.assign(D.batch * D.h * D.lq, -std::numeric_limits<float>::infinity());
  r.dq.assign(q_size, 0.0F);
  r.dk.assign(k_size, 0.0F);
  r.dv.assign(k_size, 0.0F);
  return r;
}

// Calls row(b, i, t) for every query row (batch b, query head i, position t) of dims D
// (reference::detail::attention_dims).
template <class Dims, class Row>
void for_each_row(const Dims& D, Row row) {
  for (std::size_t b = 0; b < D.batch; ++b) {
    for (std::size_t i = 0; i < D.h; ++i) {
      for (std::size_t t = 0; t < D.lq; ++t) row(b, i, t);
    }
  }
}

// Query t of batch b: the keys of each block [cuts[j], cuts[j + 1]) its mask lets it see, in
// order; blocks it sees nothing of are left out.
inline std::vector<std::vector<std::size_t>> visible_blocks(const AttentionMask& mask,
                                                            std::size_t b, std::size_t t,
                                                            const std::vector<std::size_t>& cuts) {
  std::vector<std::vector<std::size_t>> blocks;
  for (std::size_t blk = 0; blk + 1 < cuts.size(); ++blk) {
    std::vector<std::size_t> keys;
    for (std::size_t s = cuts[blk]; s < cuts[blk + 1]; ++s) {
      if (reference::mask_visible(mask, b, t, s)) keys.push_back(s);
    }
    if (!keys.empty()) blocks.push_back(std::move(keys));
  }
  return blocks;
}

// The scores score(s) of a block's keys, and their max.
template <class Score>
std::pair<std::vector<float>, float> scores_and_max(const std::vector<std::size_t>& keys,
                                                    Score score) {
  std::vector<float> ss;
  float m = -std::numeric_limits<float>::infinity();
  for (const std::size_t s : keys) {
    ss.push_back(score(s));
    m = std::max(m, ss.back());
  }
  return {std::move(ss), m};
}

// The softmax merge of one row's partials (lib/ops/softmax_merge): m = max lse_j,
// w_j = exp(lse_j − m), l = Σ w, out = Σ (w_j/l)·out_j, lse = m + log l, every operation passed
// through `round`; `normalize` false leaves out the division by l (a mutant). @pre outs nonempty.
template <class Round>
std::pair<std::vector<float>, float> merge_by_lse(const std::vector<std::vector<float>>& outs,
                                                  const std::vector<float>& lses, Round round,
                                                  bool normalize = true) {
  if (outs.size() == 1) return {outs[0], lses[0]};
  const float m = *std::max_element(lses.begin(), lses.end());
  float l = 0;
  std::vector<float> w;
  for (const float x : lses) {
    w.push_back(round(std::exp(round(x - m))));
    l = round(l + w.back());
  }
  std::vector<float> o(outs[0].size(), 0.0F);
  for (std::size_t x = 0; x < outs.size(); ++x) {
    const float c = normalize ? round(w[x] / l) : w[x];
    for (std::size_t e = 0; e < o.size(); ++e) o[e] = round(o[e] + round(c * outs[x][e]));
  }
  return {std::move(o), round(m + round(std::log(l)))};
}

}  // namespace shardcheck::attention_emulation
