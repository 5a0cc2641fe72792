// The local dot-product kernels behind linear() and linear_backward(): internal to lib/ops.
//
// Every product the linear layers need is put in one form, C = A·Bᵀ with the reduction index
// contiguous in both operands:
//   C[i, j] = Σ_k A[i, k]·B[j, k]     A [m, K], B [n, K], C [m, n], all row-major.
// The operands are already in the accumulator type Acc (= acc_t<T>; 16-bit inputs converted to
// float exactly beforehand), each element of C is accumulated in Acc and rounded to T once.
//
// The two orders (the reduction order of each element is what decides its bits):
//   deterministic  acc = 0; acc += A[i,0]·B[j,0]; acc += A[i,1]·B[j,1]; ... k ascending.
//                  Four output elements are computed side by side (four independent chains,
//                  each still in k order), so the order of one element never depends on where
//                  it sits in C: a rank holding rows of B reproduces the dense result's bits.
//   fast           eight lanes: lane q accumulates the products k ≡ q (mod 8) for k below
//                  K8 = 8·floor(K/8), in k order, each lane starting from 0; then
//                  s = ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), then the tail
//                  k = K8, ..., K-1 is added to s one by one. Depends on K only, not on i or j.
//
// Each step is one multiply and one add, each rounded in Acc. No fused multiply-add: the
// default x86-64 target (SSE2) has none. Built with -march flags that enable FMA, the compiler
// (and Eigen's packets) may fuse them: the orders stay, the bits of the order models in
// properties/suites/<family>/ may not.
//
// Measured with linear() (g++-12 -O2, one rank, a loaded 2-core machine; 64x64x64 and
// 128x512x512): deterministic 1.2-1.9 GFLOP/s for every type; fast 2.2-4.8 GFLOP/s for float32,
// bfloat16 and float16, 1.7-2.6 for float64 (SSE2 holds two doubles per register).
#pragma once

#include <Eigen/Core>

#include <array>
#include <cstddef>

namespace shardcheck::kernels {

// The loop both orders share: each row i of C, four outputs at a time (B's rows j..j+3 share
// each load of A's row i), then the last n mod 4 one by one. dot4(a_i, b_j, b_j+1, b_j+2,
// b_j+3) returns the four dots (std::array<Acc, 4>), dot1(a_i, b_j) one; each is rounded to T
// once. The order of one dot is the kernel's, whichever of the two computes it.
template <class T, class Acc, class Dot4, class Dot1>
void abt_by_blocks_of_four(const Acc* a, const Acc* b, std::size_t m, std::size_t n, std::size_t k,
                           T* c, const Dot4& dot4, const Dot1& dot1) {
  for (std::size_t i = 0; i < m; ++i) {
    const Acc* ai = a + i * k;
    T* ci = c + i * n;
    std::size_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const Acc* bj = b + j * k;
      const auto s = dot4(ai, bj, bj + k, bj + 2 * k, bj + 3 * k);
      for (std::size_t q = 0; q < 4; ++q) ci[j + q] = static_cast<T>(s[q]);
    }
    for (; j < n; ++j) ci[j] = static_cast<T>(dot1(ai, b + j * k));
  }
}

// C[i, j] = T(Σ_k A[i,k]·B[j,k]) in the deterministic order (see above).
template <class T, class Acc>
void abt_deterministic(const Acc* a, const Acc* b, std::size_t m, std::size_t n, std::size_t k,
                       T* c) {
  abt_by_blocks_of_four(
      a, b, m, n, k, c,
      [k](const Acc* ai, const Acc* b0, const Acc* b1, const Acc* b2, const Acc* b3) {
        Acc s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (std::size_t q = 0; q < k; ++q) {
          const Acc av = ai[q];
          s0 += av * b0[q];
          s1 += av * b1[q];
          s2 += av * b2[q];
          s3 += av * b3[q];
        }
        return std::array<Acc, 4>{s0, s1, s2, s3};
      },
      [k](const Acc* ai, const Acc* bj) {
        Acc s = 0;
        for (std::size_t q = 0; q < k; ++q) s += ai[q] * bj[q];
        return s;
      });
}

// The fixed tree over the eight lanes.
template <class Acc>
Acc sum_lanes(const Eigen::Array<Acc, 8, 1>& l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// C[i, j] = T(Σ_k A[i,k]·B[j,k]) in the fast order. The eight lanes are one Eigen array (SIMD
// packets: lane q only ever meets lane q, so the packets change no bit), and four outputs
// share each load of A's row. Eigen sees float or double only, never the 16-bit types.
template <class T, class Acc>
void abt_fast(const Acc* a, const Acc* b, std::size_t m, std::size_t n, std::size_t k, T* c) {
  using Lanes = Eigen::Array<Acc, 8, 1>;
  using Load = Eigen::Map<const Lanes, Eigen::Unaligned>;
  const std::size_t k8 = k - k % 8;
  abt_by_blocks_of_four(
      a, b, m, n, k, c,
      [k, k8](const Acc* ai, const Acc* b0, const Acc* b1, const Acc* b2, const Acc* b3) {
        Lanes l0 = Lanes::Zero(), l1 = Lanes::Zero(), l2 = Lanes::Zero(), l3 = Lanes::Zero();
        for (std::size_t q = 0; q < k8; q += 8) {
          const Lanes av = Load(ai + q);
          l0 += av * Load(b0 + q);
          l1 += av * Load(b1 + q);
          l2 += av * Load(b2 + q);
          l3 += av * Load(b3 + q);
        }
        Acc s0 = sum_lanes(l0), s1 = sum_lanes(l1), s2 = sum_lanes(l2), s3 = sum_lanes(l3);
        for (std::size_t q = k8; q < k; ++q) {
          s0 += ai[q] * b0[q];
          s1 += ai[q] * b1[q];
          s2 += ai[q] * b2[q];
          s3 += ai[q] * b3[q];
        }
        return std::array<Acc, 4>{s0, s1, s2, s3};
      },
      [k, k8](const Acc* ai, const Acc* bj) {
        Lanes l = Lanes::Zero();
        for (std::size_t q = 0; q < k8; q += 8) l += Load(ai + q) * Load(bj + q);
        Acc s = sum_lanes(l);
        for (std::size_t q = k8; q < k; ++q) s += ai[q] * bj[q];
        return s;
      });
}

// s[j] = T(Σ_k A[j, k]) for A [n, K], k ascending from 0: the bias gradient's order whatever
// the kernel (a sum of one operand, no products).
template <class T, class Acc>
void row_sums(const Acc* a, std::size_t n, std::size_t k, T* s) {
  for (std::size_t j = 0; j < n; ++j) {
    Acc acc = 0;
    for (std::size_t q = 0; q < k; ++q) acc += a[j * k + q];
    s[j] = static_cast<T>(acc);
  }
}

}  // namespace shardcheck::kernels
