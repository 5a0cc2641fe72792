// The contraction kernel of the reference: a dot product evaluated in the high-precision scalar R,
// split into the parts a partitioned implementation computes separately, with the quantities the
// error bounds need beside each part's value. Every reference op that contracts an axis (linear
// today; attention and norms later) builds its results from this, so the bounds (bounds.hpp) see
// the same partition the implementation used.
//
// For one output element, contracted axis of length k split into parts of lengths k_0..k_{p-1}
// (Σ k_r = k, zeros allowed: an empty shard):
//   partial_r = Σ_{i in part r} a_i·b_i     (evaluated in R)
//   abs_sum_r = Σ_{i in part r} |a_i·b_i|   (evaluated in R; Higham's |x|ᵀ|y| restricted to the
//   part)
// In R every product of two float64 values is exact (106 ≤ 113 bits), so partial_r is within
// gamma_{k_r−1}(u_R)·abs_sum_r of the exact value; bounds.hpp adds that term.
// contraction/fast_contraction.hpp computes the same terms for whole matrix products with double
// GEMMs and meets the same bound (docs/fast-reference.md).
#pragma once

#include "reference/precision.hpp"

#include <cstddef>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardcheck::reference {

// What the factors of the contraction's products are.
enum class Operands {
  general,  // a_i·b_i with both factors data: products may round or underflow in the accumulator
  unit,     // every b_i is exactly 1 (a plain sum, e.g. db = Σ_tokens dy): products are exact
};

// One part of one element's contraction.
template <class R = hp>
struct PartTerms {
  R partial{0};            // Σ a_i·b_i over the part
  R abs_sum{0};            // Σ |a_i·b_i| over the part
  std::size_t length = 0;  // k_r, the number of products in the part
};

// A contracted axis of length k, partitioned into parts (the shard sizes along that axis, in rank
// order). Empty `part_lengths` means one part: the whole axis on one rank.
// @throws std::invalid_argument when the lengths do not sum to k.
inline std::vector<std::size_t> normalize_parts(std::span<const std::size_t> part_lengths,
                                                std::size_t k, const char* what) {
  if (part_lengths.empty()) return {k};
  const std::size_t total =
      std::accumulate(part_lengths.begin(), part_lengths.end(), std::size_t{0});
  if (total != k) {
    throw std::invalid_argument(
        std::string("reference: the parts of ") + what + " sum to " + std::to_string(total) +
        " but the contracted axis has length " + std::to_string(k) +
        "; pass the shard sizes of that axis (one per rank, zeros allowed)");
  }
  return {part_lengths.begin(), part_lengths.end()};
}

// The parts of Σ_i a[i·stride_a]·b[i·stride_b]. b == nullptr means Operands::unit (every b_i = 1).
// `out` receives one PartTerms per part.
template <class R>
void contract_parts(const R* a, std::ptrdiff_t stride_a, const R* b, std::ptrdiff_t stride_b,
                    std::span<const std::size_t> parts, PartTerms<R>* out) {
  using std::abs;
  std::ptrdiff_t i = 0;
  for (std::size_t r = 0; r < parts.size(); ++r) {
    R partial(0);
    R abs_sum(0);
    for (std::size_t n = 0; n < parts[r]; ++n, ++i) {
      const R prod = b == nullptr ? a[i * stride_a] : R(a[i * stride_a] * b[i * stride_b]);
      partial += prod;
      abs_sum += abs(prod);
    }
    out[r] = PartTerms<R>{partial, abs_sum, parts[r]};
  }
}

// A contraction's result tensor with, per element, its parts' terms: what bounds.hpp needs.
//   value   [shape]           Σ_r partial_r (+ bias along the last axis, when present)
//   terms   [parts × numel]   terms[r·numel + e] is part r of element e
//   bias    empty or [shape.back()]: added once, after the parts are summed
template <class R = hp>
struct Contraction {
  Tensor<R> value;
  std::vector<std::size_t> part_lengths;
  std::vector<PartTerms<R>> terms;
  Tensor<R> bias;
  Operands operands = Operands::general;

  std::size_t parts() const noexcept { return part_lengths.size(); }
  std::size_t length() const {
    return std::accumulate(part_lengths.begin(), part_lengths.end(), std::size_t{0});
  }
  // Element e's parts (copies; parts() of them).
  std::vector<PartTerms<R>> parts_of(std::size_t e) const {
    std::vector<PartTerms<R>> out;
    out.reserve(parts());
    for (std::size_t r = 0; r < parts(); ++r) out.push_back(terms[r * value.size() + e]);
    return out;
  }
  // The bias added to element e, or nullptr.
  const R* bias_of(std::size_t e) const {
    if (bias.empty()) return nullptr;
    return &bias[e % bias.size()];
  }
};

// Sets value[e] = Σ_r partial_r (+ bias): the parts are summed in R in rank order, then the
// bias is added (the reference's own rounding is bounded in bounds.hpp, whatever the order).
template <class R>
void finish_values(Contraction<R>& c) {
  const std::size_t n = c.value.size();
  for (std::size_t e = 0; e < n; ++e) {
    R s(0);
    for (std::size_t r = 0; r < c.parts(); ++r) s += c.terms[r * n + e].partial;
    if (const R* b = c.bias_of(e)) s += *b;
    c.value[e] = s;
  }
}

}  // namespace shardcheck::reference
