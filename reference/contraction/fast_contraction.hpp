// The fast path of the reference's contractions: the same per-part terms as contract_parts
// (dot.hpp) for a whole matrix product at once, computed with ordinary double GEMMs (Eigen) by
// the error-free splitting of Ozaki, Ogita, Oishi and Rump ("Error-free transformations of matrix
// multiplication by using fast routines of matrix multiplication and its applications", Numer.
// Algorithms 59(1), 2012), followed by one sum per element in R. docs/fast-reference.md explains
// the choice and the measurements.
//
// Shapes: a [m, k], b [k, n] (any strides), the contracted axis k split into parts of lengths
// k_0..k_{p-1} (Σ k_r = k, zeros allowed). For every element (i, j) and part r:
//   partial_r = Σ_{c in part r} a[i,c]·b[c,j]      abs_sum_r = Σ_{c in part r} |a[i,c]·b[c,j]|
//
// Elements: doubles (storage-typed operands, converted exactly) or values of R itself (computed
// in R: an activation, a probability, a gradient of the backward), per operand. An R value has
// up to 113 significant bits and simply needs more slices (about 6 at 22 bits); nothing below
// depends on the operands being doubles except where said.
//
// Method, per part r (length k_r ≥ 1):
//   The part's inner axis is cut into chunks of kc ≤ 2048, and beta = floor((53 − ceil(log2 kc))
//   / 2) bits per slice; plan_part picks kc and the slice counts s_a, s_b by a cost model.
//   Row i of a (restricted to the part) has top exponent E_i (every |a[i,c]| < 2^E_i); an
//   element whose lowest set bit is 2^L needs ceil((E_i − L)/beta) slices. Every element needing
//   at most s_a is cut, by truncation towards zero, into integers A_t[i,c] (t = 1..s_a) with
//   |A_t[i,c]| ≤ 2^beta − 1 and the sign of a[i,c], and a[i,c] = Σ_t A_t[i,c]·2^(E_i − t·beta)
//   EXACTLY (no bit is truncated away); an element needing more (a "rest" element: far below
//   its row's largest, or with bits far below it) is 0 in every slice. Columns of b likewise
//   (exponents F_j, s_b slices). Every product of two slice entries is an integer below
//   2^(2·beta), and kc of them sum to less than 2^53, so each chunk's GEMM A_t·B_u (and
//   |A_t|·|B_u|) is EXACT in double whatever the order of its additions, the blocking, the use
//   of FMA or the number of threads. With Karatsuba's products (products_per_chunk), in their
//   subtractive form, the pairs t ≠ u < s come from
//   A_t·B_u + A_u·B_t = A_t·B_t + A_u·B_u − (A_t − A_u)·(B_t − B_u), in exact integers: the
//   slices of one element share its sign, so |A_t − A_u| ≤ max(|A_t|, |A_u|) ≤ 2^beta − 1 and
//   the GEMMs of slice differences are exact at the same beta and kc.
//   The chunks' results, and the pairs (t, u) of one diagonal
//   d = t + u (one scale), are added EXACTLY as 128-bit integers:
//   P_d[i,j] = Σ_{t+u=d} Σ_chunks (A_t·B_u)[i,j], and
//     partial_r = 2^(E_i+F_j) · Σ_{d=2..s_a+s_b} P_d[i,j]·2^(−d·beta)
//                 + Σ_{c in rest(i,j)} a[i,c]·b[c,j]                          in R, c ascending
//   where rest(i,j) = the positions c where a[i,c] or b[c,j] is a rest element (exactly the
//   products the slices miss); each product is exact in R (106 ≤ 113 bits) when both factors
//   are doubles, and rounds once in R when one is an R value. The first sum is
//   formed EXACTLY as one integer, of 128 bits when it fits (D ≤ 4 for 22-bit slices), else of
//   512 bits (exact_sums.hpp; any D the default max_slices allows), and converted to R with at
//   most one rounding; only beyond 512 bits (max_slices raised far above 8) are its D diagonals
//   summed in R, d ascending.
//   abs_sum_r, with AbsSums::exact, is the same with |A_t|·|B_u| and |a[i,c]·b[c,j]| (|a|'s
//   slices are a's |slices|). With AbsSums::upper_bound (the default) it is one double GEMM per
//   part instead: x[i,c] = |a[i,c]|·2^-E_i and y[c,j] = |b[c,j]|·2^-F_j rounded up to doubles
//   (exact when normal; magnitude_up), Ŝ = fl(Σ_c x·y) in any order (Eigen's GEMM: products
//   and sums of nonnegative numbers, so |Ŝ − Σ x·y| ≤ gamma_k(2^-53)·Σ x·y + k·2^-1074,
//   Higham (3.4) with underflow), and
//     abs_sum_r = 2^(E_i+F_j)·(Ŝ + k_r·2^-1074)·(1 + 2·gamma_{k_r}(2^-53) + 2^-100)     in R
//   (1/(1 − gamma) ≤ 1 + 2·gamma; the 2^-100 covers R's own roundings of that expression), or 0
//   when line i of a or line j of b is all zeros. So Σ|a·b| ≤ abs_sum_r ≤
//   (1 + 2^-52)^q·(1 + 4·gamma_{k_r}(2^-53))·Σ|a·b| + k_r·2^(E_i+F_j−1016), q the number of
//   operands holding R values (magnitude_up raises each of their magnitudes by up to 2^-52
//   relative; a double's is exact): an upper bound, 2^-39 relative at
//   k_r = 11008, which is what bounds.hpp needs (every term of element_bound is nondecreasing in
//   abs_sum), at one GEMM where exact sums take s_a·s_b (with one slice pair: the exact sums).
//
// Accuracy (R with unit roundoff u_R = 2^-113 for hp): everything is exact but rho additions or
// conversions in R: rho = (0 or 1) + |rest(i,j)| with the integer combination (128 or 512
// bits), else D − 1 + |rest(i,j)| (D = s_a + s_b − 1 diagonals; each P_d < 2^113 converts exactly;
// the scalings by powers of two are exact, with no overflow or underflow in R's range), plus 1 when
// an operand holds R values and rest(i,j) is not empty (the rest products' own rounding: one
// more factor 1 + delta on each of them). Lines holding an R value outside double's exponent
// range (sliceable_exponent) are treated like lines holding ±inf or NaN (below). So for every
// term from the fast path
//   |partial_r − exact| ≤ gamma_rho(u_R)·Σ|a·b|,   and with AbsSums::exact
//   |abs_sum_r − Σ|a·b|| ≤ gamma_rho(u_R)·Σ|a·b|   (with upper_bound: the bracket above)
// and, with no rest product and rho ≤ 1, the terms are the exact values correctly rounded to R
// (|err| ≤ u_R·|exact|, under cancellation too);
// and the fast path is used for a term only when rho ≤ k_r − 1. Its terms therefore satisfy the
// very bound dot.hpp states for contract_parts (gamma_{k_r−1}(u_R)·abs_sum_r), which is what
// bounds.hpp's reference term covers, so the bounds stay sound unchanged; and they are within
// 2^-100·Σ|a·b| whenever rho ≤ 8191 (gamma_8191(2^-113) < 2^-100): FastStats::max_roundings
// reports the largest rho (1 plus the rest products with the default max_slices = 8: 0–15 on
// the benchmarks' data). Terms with rho > k_r − 1 (a very short part), and
// every element whose row of a or column of b holds ±inf or NaN, are computed by contract_parts
// itself in R: bit-identical to the plain reference there (NaN, inf and signed-zero conventions
// included). Subnormal inputs and zeros go through the fast path (the slicing is exact for
// them; +0 + (−0) is +0 as in R).
// Short of correct rounding, the claim is not relative to the exact value: under cancellation
// Σ|a·b| ≫ |Σ a·b| and the bound is relative to Σ|a·b|, as the reference's own is.
//
// Thread-count independence: the output is tiled (tile × tile elements, tiles shared among
// OpenMP threads); each element's slice products are exact doubles and their sums exact
// integers, whichever thread or blocking produced them, and each element's sums in R are done by
// one thread in the fixed order above (the plan depends on the data and shapes only). The
// partials (and exact abs sums) are therefore bit-identical for every thread count and tile
// size. The upper-bound abs sum is one floating GEMM per tile, whose rounding follows Eigen's
// blocking of the tile's shape (Eigen runs single-threaded here: EIGEN_DONT_PARALLELIZE): the
// same for every thread count at a given tile size, but a different tile size may change its
// last bits. A property checks 1 against 3 threads at tile 3 and at tile 256, and tile 256
// against tile 3 for the partials.
//
// Cost: products_per_chunk(s_a, s_b) double GEMMs of m×k_r×n per part (s_a·s_b pairwise;
// s(s+1)/2 + s_a·s_b − s^2 with Karatsuba's, s = min(s_a, s_b)) plus one for the abs sums (twice
// the products with AbsSums::exact); s_a = s_b = 1 for bfloat16 and float16 data (1 GEMM), 2 for
// float (3), 3 for double (6) on the benchmarks' normal(0, 1) data; plus per element one exact
// integer combination and conversion, one addition in R per rest product (whose product is
// exact from the doubles' significands) and the abs sum's three operations in R.
#pragma once

#include "reference/contraction/double_bits.hpp"
#include "reference/contraction/exact_sums.hpp"
#include "reference/dot.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace shardcheck::reference {

// A read-only strided view of a matrix whose elements are V: element (i, j) is
// data[i·row_stride + j·col_stride]. V is double for storage-typed operands (every float,
// bfloat16 and float16 value is a double, converted exactly by to_double_matrix below) or the
// reference's scalar R for values computed in R (an activation, a softmax probability); the
// slicing below is exact for either.
template <class V = double>
struct MatrixViewOf {
  const V* data = nullptr;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::ptrdiff_t row_stride = 0;
  std::ptrdiff_t col_stride = 0;

  const V& operator()(std::size_t i, std::size_t j) const {
    return data[static_cast<std::ptrdiff_t>(i) * row_stride +
                static_cast<std::ptrdiff_t>(j) * col_stride];
  }
};
using MatrixView = MatrixViewOf<double>;

// A row-major [rows, cols] block seen as a MatrixViewOf.
template <class V>
MatrixViewOf<V> row_major_view(const V* data, std::size_t rows, std::size_t cols) {
  return {data, rows, cols, static_cast<std::ptrdiff_t>(cols), 1};
}

// The same block read transposed: element (i, j) of the view is data[j·rows_of_data + i], i.e. a
// row-major [cols, rows] block seen as [rows, cols] (w [out, in] as the [in, out] of x·Wᵀ).
template <class V>
MatrixViewOf<V> transposed_view(const V* data, std::size_t rows, std::size_t cols) {
  return {data, rows, cols, 1, static_cast<std::ptrdiff_t>(rows)};
}

// What the fast path did, for tests and benchmarks.
struct FastStats {
  std::size_t gemms = 0;  // double GEMMs run (over all parts; an abs GEMM over a whole part: one)
  std::size_t max_pairs = 0;        // largest number of slice pairs s_a·s_b of a part
  std::size_t max_diagonals = 0;    // largest D = s_a + s_b − 1 of a part
  std::size_t rest_products = 0;    // products of rest elements added in R (over all terms)
  std::size_t max_roundings = 0;    // largest rho of a fast term: its roundings in R
  std::size_t hp_elements = 0;      // (element, part) terms computed by contract_parts instead
  std::size_t fast_elements = 0;    // (element, part) terms from the slices
  std::size_t karatsuba_parts = 0;  // parts whose slice pairs took Karatsuba's products
};

// How abs_sum_r = Σ|a·b| over a part is computed (docs/fast-reference.md, "Σ|a·b| as an upper
// bound"):
//   upper_bound  one double GEMM of |a|·|b| per part on magnitudes scaled by the lines' top
//                exponents and rounded up, its rounding error then added back: a guaranteed
//                upper bound, Σ|a·b| ≤ abs_sum_r ≤ (1 + 2^-52)^q·(1 + 4·gamma_{k_r}(2^-53))·
//                Σ|a·b| + k_r·2^(E_i + F_j − 1016) (q: operands holding R values), which is
//                all bounds.hpp needs (its terms are
//                nondecreasing in abs_sum); s_a·s_b − 1 fewer GEMMs than `exact`. A part with
//                one slice pair (bfloat16 and float16 data) takes the exact sums instead: no
//                dearer there, and within the bracket too
//   exact        the slices' GEMMs |A_t|·|B_u|, summed exactly: within gamma_rho(u_R)·Σ|a·b|,
//                as partial_r is; for callers that subtract it (mlp_bound.hpp's perturbed
//                parts) or compare it bit for bit
enum class AbsSums : std::uint8_t { upper_bound, exact };

struct FastOptions {
  int threads = 0;  // OpenMP threads; 0: the OpenMP default (omp_get_max_threads)
  AbsSums abs_sums = AbsSums::upper_bound;
  std::size_t tile = 256;      // output tile edge (rows and columns of one GEMM call)
  std::size_t max_slices = 8;  // per operand and part; elements needing more are rest elements
  FastStats* stats = nullptr;  // filled when not null
  // For the properties' self-test only (the mutant that proves they can fail): drops the last
  // slice of a, which makes the result wrong whenever a needs more than one slice.
  bool mutant_drop_last_slice = false;
  // Likewise: Karatsuba's cross terms add only A_u·B_u, not A_t·B_t (t < u): wrong whenever a
  // part takes Karatsuba's products.
  bool mutant_karatsuba_keeps_a_square = false;
  // Whether the plan may take Karatsuba's products for the slice pairs (products_per_chunk);
  // false: every pair its own GEMM. Exact either way; for the benchmarks and tests.
  bool karatsuba = true;
};

namespace detail {

// ceil(log2 k) for k ≥ 1.
inline int ceil_log2(std::size_t k) { return k <= 1 ? 0 : static_cast<int>(std::bit_width(k - 1)); }

// Bits per slice for GEMMs of inner length kc: kc·(2^beta − 1)^2 < 2^53.
inline int slice_bits(std::size_t kc) { return (53 - ceil_log2(kc)) / 2; }

// Double GEMMs per chunk for s_a × s_b slices. Pairwise: one per slice pair. Karatsuba (Knuth,
// TAOCP vol. 2, 4.3.3, subtractive form, applied to the slices as digits): with
// s = min(s_a, s_b), one product A_t·B_t per t < s and one (A_t − A_u)·(B_t − B_u) per
// t < u < s, from which A_t·B_u + A_u·B_t = A_t·B_t + A_u·B_u − (A_t − A_u)·(B_t − B_u) exactly
// (integers; the differences stay within beta bits, the slices of an element sharing its sign),
// and the pairs with t or u ≥ s on their own: s(s+1)/2 + s_a·s_b − s^2.
inline std::size_t products_per_chunk(std::size_t sa, std::size_t sb, bool karatsuba) {
  const std::size_t s = karatsuba ? std::min(sa, sb) : 0;
  return s * (s + 1) / 2 + sa * sb - s * s;
}

// The longest chunk the plan considers (beta = 21 there; 22 up to 512, 24 up to 32).
constexpr std::size_t max_chunk = 2048;

// The binary exponent of a finite nonzero v: v = f·2^e with |f| in [0.5, 1).
template <class V>
int exponent_of(const V& v) {
  using std::frexp;
  int e = 0;
  (void)V(frexp(v, &e));
  return e;
}

// The lowest set bit of a finite nonzero v: v is an odd multiple of 2^lowest_bit(v).
template <class V>
int lowest_bit(const V& v) {
  using std::abs;
  using std::frexp;
  using std::ldexp;
  using std::trunc;
  constexpr int digits = std::numeric_limits<V>::digits;
  int e = 0;
  V mantissa = ldexp(V(frexp(V(abs(v)), &e)), digits);  // an integer below 2^digits: exact
  // Its trailing zeros, 32 bits at a time (each chunk below 2^32 is exact as a double).
  for (int zeros = 0;; zeros += 32) {
    const V high = trunc(ldexp(mantissa, -32));
    const auto low = static_cast<std::uint64_t>(static_cast<double>(V(mantissa - ldexp(high, 32))));
    if (low != 0) return e - digits + zeros + std::countr_zero(low);
    mantissa = high;
  }
}

// Nonzero values v = f·2^e (|f| in [0.5, 1)) are sliced when |e| ≤ sliceable_exponent: every
// double (e in [−1073, 1024]) and R values of the same range. Their lowest bits are then above
// 2^-1214 and their products above 2^-2428, so no scaling, product or sum of the fast path
// underflows or overflows in R (hp's normal range is 2^±16382).
constexpr int sliceable_exponent = 1100;

// One operand of one part, lines [0, lines) (rows of a or columns of b), element (l, c) =
// at(l, c), c < k_r: per line the top exponent (every |v| < 2^top) and whether it is sliced
// (`finite`: every value finite and, for R values, within sliceable_exponent);
// per element its depth top − lowest_bit(v) (0 for a zero): it needs ceil(depth / beta) slices.
struct Operand {
  std::size_t lines = 0, k_r = 0;
  std::vector<int> top;
  std::vector<char> finite;
  std::vector<int> depth;  // [lines × k_r]
  // depth_count[x]: how many elements of the finite lines have depth x (the plan's input)
  std::vector<std::size_t> depth_count;

  // rest[s] = the elements needing more than s slices at beta (rest elements), over the
  // finite lines, for s = 0..max_slices.
  std::vector<std::size_t> rest(int beta, std::size_t max_slices) const {
    std::vector<std::size_t> needing(max_slices + 2, 0);  // needing[s]: exactly s (last: more)
    for (std::size_t x = 0; x < depth_count.size(); ++x) {
      const std::size_t need =
          (x + static_cast<std::size_t>(beta) - 1) / static_cast<std::size_t>(beta);
      needing[std::min(need, max_slices + 1)] += depth_count[x];
    }
    std::vector<std::size_t> out(max_slices + 1, 0);
    std::size_t above = needing[max_slices + 1];
    for (std::size_t s = max_slices + 1; s-- > 0;) {
      out[s] = above;
      above += needing[s];
    }
    return out;
  }
};

int thread_count(int requested);

// Below this many elements a loop over lines runs on the calling thread (a team costs more).
constexpr std::size_t parallel_work = std::size_t{1} << 16;

template <class V, class At>
Operand analyse(std::size_t lines, std::size_t k_r, int threads, const At& at) {
  Operand o;
  o.lines = lines;
  o.k_r = k_r;
  o.top.assign(lines, 0);
  o.finite.assign(lines, 1);
  o.depth.assign(lines * k_r, 0);
  const int nt = thread_count(threads);
  (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (lines * k_r >= parallel_work)
  for (std::size_t l = 0; l < lines; ++l) {
    bool nonzero = false;
    for (std::size_t c = 0; c < k_r; ++c) {
      const V& v = at(l, c);
      using std::isfinite;
      if (!isfinite(v)) {
        o.finite[l] = 0;
      } else if (v != 0) {
        const int e = exponent_of(v);
        // An R value outside double's exponent range may make a scaling or a rest product
        // underflow in R: its line takes the plain path (as a non-finite one does).
        if (e > sliceable_exponent || e < -sliceable_exponent) o.finite[l] = 0;
        o.top[l] = nonzero ? std::max(o.top[l], e) : e;
        nonzero = true;
      }
    }
    if (o.finite[l] == 0) continue;
    for (std::size_t c = 0; c < k_r; ++c) {
      const V& v = at(l, c);
      if (v != 0) o.depth[l * k_r + c] = o.top[l] - lowest_bit(v);
    }
  }
  for (std::size_t l = 0; l < lines; ++l) {
    if (o.finite[l] == 0) continue;
    for (std::size_t c = 0; c < k_r; ++c) {
      const auto x = static_cast<std::size_t>(o.depth[l * k_r + c]);
      if (x >= o.depth_count.size()) o.depth_count.resize(x + 1, 0);
      ++o.depth_count[x];
    }
  }
  return o;
}

// How a part is cut: GEMMs of inner length `chunk` (the last one shorter), beta bits per slice,
// s_a and s_b slices; the elements needing more (rest elements) are left out of the slices and
// their products added in R.
struct Plan {
  std::size_t chunk = 1;
  int beta = 26;
  std::size_t slices_a = 0, slices_b = 0;
  bool karatsuba = false;  // the slice pairs by Karatsuba's products (products_per_chunk)
};

// The plan of least modelled cost, in multiply-adds of double GEMM:
//   g·P·m·n·k_r·(1 + 32/chunk)              the GEMMs, P = products_per_chunk (short chunks run
//                                           slower; g = 2 with exact abs sums, 1 when one GEMM
//                                           bounds them)
//   + 1024·(rest_a·n + rest_b·m)             the rest products in R (measured at 1024³ on the
//                                           2-core machine: 150–250 ns each, mostly a cache miss
//                                           on the other factor and one addition in R, against
//                                           about 0.16 ns per multiply-add of Eigen's GEMM)
// over chunk = min(k_r, max_chunk) and its halves down to 16 (more bits per slice, fewer slices),
// pairwise or (when allowed) Karatsuba's products (the same slices, fewer GEMMs),
// s_a, s_b = 0..max_slices. Any plan is exact; this only sets the speed.
inline Plan plan_part(const Operand& a, const Operand& b, std::size_t max_slices,
                      double gemms_per_pair = 2, bool allow_karatsuba = true) {
  Plan best;
  double best_cost = -1;
  const auto mnk =
      static_cast<double>(a.lines) * static_cast<double>(b.lines) * static_cast<double>(a.k_r);
  for (std::size_t chunk = std::min<std::size_t>(std::max<std::size_t>(a.k_r, 1), max_chunk);;
       chunk /= 2) {
    for (const bool karatsuba : {false, true}) {
      if (karatsuba && !allow_karatsuba) continue;
      const int beta = slice_bits(chunk);
      const std::vector<std::size_t> ra = a.rest(beta, max_slices), rb = b.rest(beta, max_slices);
      std::vector<double> rest_a(max_slices + 1), rest_b(max_slices + 1);
      for (std::size_t s = 0; s <= max_slices; ++s) {
        rest_a[s] = static_cast<double>(ra[s]) * static_cast<double>(b.lines);
        rest_b[s] = static_cast<double>(rb[s]) * static_cast<double>(a.lines);
      }
      for (std::size_t sa = 0; sa <= max_slices; ++sa) {
        for (std::size_t sb = 0; sb <= max_slices; ++sb) {
          const double cost = gemms_per_pair *
                                  static_cast<double>(products_per_chunk(sa, sb, karatsuba)) * mnk *
                                  (1.0 + 32.0 / static_cast<double>(chunk)) +
                              1024 * (rest_a[sa] + rest_b[sb]);
          if (best_cost < 0 || cost < best_cost) {
            best = Plan{chunk, beta, sa, sb, karatsuba && std::min(sa, sb) >= 2};
            best_cost = cost;
          }
        }
      }
    }
    if (chunk <= 16) break;
  }
  return best;
}

// Calls f(l) for every line l of `o`, the lines shared statically among OpenMP threads: each
// line is handled by one thread, the same way whatever the thread count.
template <class F>
void for_each_line(const Operand& o, int threads, const F& f) {
  const int nt = thread_count(threads);
  (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (o.lines * o.k_r >= parallel_work)
  for (std::size_t l = 0; l < o.lines; ++l) f(l);
}

// One operand cut into `count` slices of beta bits: for an element of line l that needs at most
// `count` slices, value = Σ_t slice_t·2^(top_l − t·beta); the others (rest) are 0 in every
// slice and listed, in increasing c, in rest[l]. Lines taking the plain path (not finite) are 0.
struct Sliced {
  // [k_r × lines] each, column l holding line l (a row of a or a column of b) contiguously: b's
  // slices as the GEMM's right-hand side, a's transposed as its left-hand side; |slice| beside
  // (only for AbsSums::exact).
  std::vector<Eigen::MatrixXd> slice, magnitude;
  std::vector<std::vector<std::size_t>> rest;  // per line
};

template <class V, class At>
Sliced slice_lines(const Operand& o, int beta, std::size_t count, int threads, const At& at,
                   bool with_magnitudes = true) {
  Sliced s;
  const auto lines = static_cast<Eigen::Index>(o.lines), k_r = static_cast<Eigen::Index>(o.k_r);
  s.rest.resize(o.lines);
  // Not zeroed (nor copied) here: every column is written whole below, by the thread that owns
  // the line, so each page is first touched there.
  s.slice.resize(count);
  for (auto& m : s.slice) m.resize(k_r, lines);
  for_each_line(o, threads, [&](std::size_t l) {
    const auto el = static_cast<Eigen::Index>(l);
    std::vector<double*> column(count);
    for (std::size_t t = 0; t < count; ++t) column[t] = s.slice[t].col(el).data();
    for (std::size_t c = 0; c < o.k_r; ++c) {
      for (std::size_t t = 0; t < count; ++t) column[t][c] = 0.0;
      if (o.finite[l] == 0) continue;
      const V& v = at(l, c);
      const auto need = static_cast<std::size_t>((o.depth[l * o.k_r + c] + beta - 1) / beta);
      if (need > count) {
        s.rest[l].push_back(c);
        continue;
      }
      if constexpr (std::is_same_v<V, double>) {  // the same integers, from the bits
        for (std::size_t t = 1; t <= need; ++t) {
          column[t - 1][c] = slice_of(v, o.top[l], static_cast<int>(t), beta);
        }
        continue;
      }
      using std::ldexp;
      using std::trunc;
      V previous(0);  // trunc(v·2^((t−1)·beta − top)): the bits taken so far, as an integer
      for (std::size_t t = 1; t <= need; ++t) {
        // v·2^(t·beta − top) is exact when ≥ 1 in magnitude (a power-of-two scaling that does
        // not underflow, in double or in R); below 1 it may round but truncates to 0 either way.
        const V taken = trunc(V(ldexp(v, static_cast<int>(t) * beta - o.top[l])));
        // The difference is an integer below 2^beta in magnitude: exact, in V and as a double.
        column[t - 1][c] = static_cast<double>(V(taken - ldexp(previous, beta)));
        previous = taken;
      }
    }
  });
  if (!with_magnitudes) return s;
  s.magnitude.reserve(count);
  for (const auto& m : s.slice) s.magnitude.emplace_back(m.cwiseAbs());
  return s;
}

// |v|·2^-top as a double no smaller than it (v finite and nonzero, |v| < 2^top): exact when the
// scaled value is a normal double, else rounded up (a double v whose scaled value would be
// subnormal takes 2^max(e − top, −1074) ≥ |v|·2^-top, e its exponent; an R value is scaled
// exactly in R and converted, then raised by one ulp if the conversion went down). So the result
// is ≤ |v|·2^-top·(1 + 2^-52) when the scaled value is a normal double, else ≤ 2^-1020.
template <class V>
double magnitude_up(const V& v, int top) {
  using std::abs;
  using std::ldexp;
  if constexpr (std::is_same_v<V, double>) {
    const int e = exponent_of(v);
    if (e - top >= -1021) {  // a normal double: exact
      return top >= -1022 && top <= 1022 ? std::abs(v) * pow2_normal(-top)
                                         : std::ldexp(std::abs(v), -top);
    }
    return std::ldexp(1.0, std::max(e - top, -1074));
  } else {
    const V x = ldexp(V(abs(v)), -top);  // exact in R (sliceable_exponent keeps it in range)
    auto d = static_cast<double>(x);
    if (V(d) < x) d = std::nextafter(d, std::numeric_limits<double>::infinity());
    return d;
  }
}

// One operand's magnitudes for the abs GEMM: element (l, c) = magnitude_up(at(l, c), top_l) at
// (c, l) of a [k_r × lines] matrix (the slices' layout); lines taking the plain path (not
// finite) are 0. `nonzero[l]`: whether line l holds a nonzero value.
struct Magnitudes {
  Eigen::MatrixXd m;
  std::vector<char> nonzero;
};

template <class V, class At>
Magnitudes magnitudes_up(const Operand& o, int threads, const At& at) {
  Magnitudes g;
  const auto lines = static_cast<Eigen::Index>(o.lines), k_r = static_cast<Eigen::Index>(o.k_r);
  g.m = Eigen::MatrixXd(k_r, lines);  // every column written whole below
  g.nonzero.assign(o.lines, 0);
  for_each_line(o, threads, [&](std::size_t l) {
    double* column = g.m.col(static_cast<Eigen::Index>(l)).data();
    for (std::size_t c = 0; c < o.k_r; ++c) {
      column[c] = 0.0;
      if (o.finite[l] == 0) continue;
      const V& v = at(l, c);
      if (v == 0) continue;
      g.nonzero[l] = 1;
      column[c] = magnitude_up(v, o.top[l]);
    }
  });
  return g;
}

inline int thread_count(int requested) {
#if defined(_OPENMP)
  return requested > 0 ? requested : omp_get_max_threads();
#else
  (void)requested;
  return 1;
#endif
}

inline void raise_to(std::atomic<std::size_t>& x, std::size_t v) {
  std::size_t cur = x.load();
  while (cur < v && !x.compare_exchange_weak(cur, v)) {
  }
}

}  // namespace detail

// Calls f(row0, rows, col0, cols) for every tile of an [m, n] output cut into tile × tile
// blocks (the last ones smaller), the tiles shared statically among `threads` OpenMP threads
// (0: the default). Every tile is visited by exactly one thread. f must not throw.
template <class F>
void for_each_tile(std::size_t m, std::size_t n, std::size_t tile, int threads, const F& f) {
  if (m == 0 || n == 0) return;
  const std::size_t t = std::max<std::size_t>(tile, 1);
  const std::size_t tr = (m + t - 1) / t, tc = (n + t - 1) / t;
  const auto tiles = static_cast<std::ptrdiff_t>(tr * tc);
  const int nt = detail::thread_count(threads);
  (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (tiles > 1)
  for (std::ptrdiff_t q = 0; q < tiles; ++q) {
    const auto uq = static_cast<std::size_t>(q);
    const std::size_t r0 = (uq / tc) * t, c0 = (uq % tc) * t;
    f(r0, std::min(t, m - r0), c0, std::min(t, n - c0));
  }
}

// The parts' terms of a·b, a [m, k], b [k, n], in R: what contract_parts gives element by
// element (dot.hpp), with the accuracy stated at the top of this file. The result's value is
// [m, n], Σ_r partial_r (no bias: set c.bias and call finish_values to add one); terms[r·m·n +
// i·n + j] is part r of element (i, j). Empty `part_lengths`: one part.
// @throws std::invalid_argument when a's columns differ from b's rows, or the parts do not sum
// to k (normalize_parts).
template <class R = hp, class Va, class Vb>
Contraction<R> fast_contraction(const MatrixViewOf<Va>& a, const MatrixViewOf<Vb>& b,
                                std::span<const std::size_t> part_lengths = {},
                                const FastOptions& options = {}) {
  static_assert(std::is_same_v<Va, double> || std::is_same_v<Va, R>,
                "fast_contraction: a's elements are doubles or R");
  static_assert(std::is_same_v<Vb, double> || std::is_same_v<Vb, R>,
                "fast_contraction: b's elements are doubles or R");
  // A product of two doubles is exact in R (106 ≤ 113 bits); one with an R factor rounds once.
  constexpr bool exact_products = std::is_same_v<Va, double> && std::is_same_v<Vb, double>;
  if (a.cols != b.rows) {
    throw std::invalid_argument("reference::fast_contraction: a is [" + std::to_string(a.rows) +
                                ", " + std::to_string(a.cols) + "] and b is [" +
                                std::to_string(b.rows) + ", " + std::to_string(b.cols) +
                                "]: a's columns must equal b's rows (the contracted axis)");
  }
  const std::size_t m = a.rows, n = b.cols, mn = m * n;
  Contraction<R> c;
  c.value = Tensor<R>({m, n});
  c.part_lengths = normalize_parts(part_lengths, a.cols, "the contracted axis (fast_contraction)");
  c.terms.resize(c.parts() * mn);
  FastStats stats;
  std::atomic<std::size_t> hp_elements{0}, rest_products{0}, max_roundings{0};

  std::size_t k0 = 0;
  for (std::size_t r = 0; r < c.parts(); ++r) {
    const std::size_t kr = c.part_lengths[r];
    PartTerms<R>* out = c.terms.data() + r * mn;
    auto at_a = [&](std::size_t i, std::size_t q) -> const Va& { return a(i, k0 + q); };
    auto at_b = [&](std::size_t j, std::size_t q) -> const Vb& { return b(k0 + q, j); };
    const detail::Operand oa = detail::analyse<Va>(m, kr, options.threads, at_a),
                          ob = detail::analyse<Vb>(n, kr, options.threads, at_b);
    const bool asked_exact = options.abs_sums == AbsSums::exact;
    const detail::Plan plan =
        detail::plan_part(oa, ob, options.max_slices, asked_exact ? 2 : 1, options.karatsuba);
    // With one slice pair the exact abs sums cost one GEMM too (and no magnitudes to convert):
    // the upper bound is then the exact sum.
    const bool exact_abs = asked_exact || plan.slices_a * plan.slices_b <= 1;
    const int beta = plan.beta;
    auto sa = detail::slice_lines<Va>(oa, beta, plan.slices_a, options.threads, at_a, exact_abs);
    const auto sb =
        detail::slice_lines<Vb>(ob, beta, plan.slices_b, options.threads, at_b, exact_abs);
    // With AbsSums::upper_bound: |a| and |b| scaled by their lines' tops, rounded up, for one
    // GEMM per tile over the whole part.
    detail::Magnitudes ma, mb;
    if (!exact_abs) {
      ma = detail::magnitudes_up<Va>(oa, options.threads, at_a);
      mb = detail::magnitudes_up<Vb>(ob, options.threads, at_b);
    }
    // (Ŝ + k_r·2^-1074)·abs_factor·2^(E_i + F_j) ≥ Σ|a·b| (see the file's header).
    R abs_factor(1), abs_underflow(0);
    if (!exact_abs && kr > 0) {
      using std::ldexp;
      const R nu = R(kr) * ldexp(R(1), -53);
      abs_factor = 1 + 2 * (nu / (1 - nu)) + ldexp(R(1), -100);
      abs_underflow = R(kr) * ldexp(R(1), -1074);  // exact
    }
    if (options.mutant_drop_last_slice && sa.slice.size() > 1) {
      sa.slice.pop_back();
      if (!sa.magnitude.empty()) sa.magnitude.pop_back();
    }
    const std::size_t na = sa.slice.size(), nb = sb.slice.size();
    // Slice pair (t, u), t, u ≥ 1, lies on diagonal t + u; diagonals 2..na+nb.
    const std::size_t diagonals = na == 0 || nb == 0 ? 0 : na + nb - 1;
    const std::size_t chunks = kr == 0 ? 0 : (kr + plan.chunk - 1) / plan.chunk;
    // Karatsuba over the first ks slices of each operand: their differences A_t − A_u
    // (t < u < ks), exact integers of at most beta bits (a slice has its element's sign, so
    // |A_t − A_u| ≤ max(|A_t|, |A_u|)); for the exact abs sums |A_t| − |A_u| likewise.
    const std::size_t ks = plan.karatsuba ? std::min(na, nb) : 0;
    std::vector<Eigen::MatrixXd> diff_a, diff_b, diff_abs_a, diff_abs_b;  // pair (t, u), t < u
    for (std::size_t t = 0; t < ks; ++t) {
      for (std::size_t u = t + 1; u < ks; ++u) {
        diff_a.emplace_back(sa.slice[t] - sa.slice[u]);
        diff_b.emplace_back(sb.slice[t] - sb.slice[u]);
        if (exact_abs) {
          diff_abs_a.emplace_back(sa.magnitude[t] - sa.magnitude[u]);
          diff_abs_b.emplace_back(sb.magnitude[t] - sb.magnitude[u]);
        }
      }
    }
    if (ks >= 2) ++stats.karatsuba_parts;
    stats.gemms += (exact_abs ? 2 : 1) * detail::products_per_chunk(na, nb, ks >= 2) * chunks +
                   (!exact_abs && kr > 0 ? 1 : 0);
    stats.max_pairs = std::max(stats.max_pairs, na * nb);
    stats.max_diagonals = std::max(stats.max_diagonals, diagonals);
    const int total = static_cast<int>(plan.slices_a + plan.slices_b) * beta;
    // pw[d] = 2^((s_a + s_b − d − 2)·beta): diagonal d + 2's products at one scale (exact).
    std::vector<R> pw(diagonals, R(0));
    using std::ldexp;
    for (std::size_t d = 0; d < diagonals; ++d) {
      pw[d] = ldexp(R(1), total - static_cast<int>(d + 2) * beta);
    }
    // The diagonals combine exactly in 128 bits when every P_d < 2^bits_d (min(na, nb) pairs
    // of chunks·kc products below 2^(2·beta) each: below 2^53 per chunk) and
    // Σ_d |P_d|·2^((D−1−d)·beta) < 2^(bits_d + (D−1)·beta + 1) ≤ 2^127; else in a WideSum
    // (512 bits, exact_sums.hpp) when that holds with 2^511; else (more slices than the default
    // max_slices allows) the diagonals are summed in R.
    const int bits_d = 53 + detail::ceil_log2(std::max<std::size_t>(std::min(na, nb) * chunks, 1));
    const bool integer_combine =
        diagonals > 0 && bits_d + static_cast<int>(diagonals - 1) * beta + 1 <= 127;
    const bool wide_combine =
        diagonals > 0 && !integer_combine && detail::fits_wide_sum(bits_d, diagonals, beta);
    const detail::wide_int radix = detail::wide_int{1} << beta;
    // value = (Σ_d P_d·2^((D−1−d)·beta))·2^(E_i + F_j − integer_scale)
    const int integer_scale = static_cast<int>(diagonals + 1) * beta;
    const std::size_t one[] = {kr};
    // contract_parts in R, as the plain reference does, for what the slices do not cover.
    auto plain = [&](std::size_t i, std::size_t j) {
      std::vector<R> x(kr), y(kr);
      for (std::size_t q = 0; q < kr; ++q) {
        x[q] = R(a(i, k0 + q));
        y[q] = R(b(k0 + q, j));
      }
      contract_parts<R>(x.data(), 1, y.data(), 1, one, &out[i * n + j]);
    };

    for_each_tile(
        m, n, options.tile, options.threads,
        [&](std::size_t r0, std::size_t rows, std::size_t c0, std::size_t cols) {
          const auto er0 = static_cast<Eigen::Index>(r0), erows = static_cast<Eigen::Index>(rows);
          const auto ec0 = static_cast<Eigen::Index>(c0), ecols = static_cast<Eigen::Index>(cols);
          const std::size_t cells = rows * cols;
          // Per diagonal and element (column-major, as Eigen's product), the exact integer sums
          // of its slice products.
          std::vector<detail::wide_int> partial(diagonals * cells, 0),
              abs_sum(exact_abs ? diagonals * cells : 0, 0);
          // Karatsuba's squares A_t·B_t over the chunks, per t < ks, before they are spread over
          // the diagonals (once per tile rather than once per chunk).
          std::vector<detail::wide_int> square(ks * cells, 0),
              abs_square(exact_abs ? ks * cells : 0, 0);
          Eigen::MatrixXd prod(erows, ecols);
          // acc += sign·prod, element by element (exact: integers below 2^53).
          auto add = [&](detail::wide_int* acc, int sign = 1) {
            for (Eigen::Index j = 0; j < ecols; ++j) {
              for (Eigen::Index i = 0; i < erows; ++i) {
                const auto v = static_cast<std::int64_t>(prod(i, j));  // below 2^53: exact
                acc[static_cast<std::size_t>(j) * rows + static_cast<std::size_t>(i)] +=
                    sign > 0 ? v : -v;
              }
            }
          };
          for (std::size_t q0 = 0; q0 < chunks * plan.chunk; q0 += plan.chunk) {
            const auto eq0 = static_cast<Eigen::Index>(q0);
            const auto len = static_cast<Eigen::Index>(std::min(plan.chunk, kr - q0));
            // prod = x's block (a side, transposed) times y's block (b side).
            auto gemm = [&](const Eigen::MatrixXd& x, const Eigen::MatrixXd& y) {
              prod.noalias() =
                  x.block(eq0, er0, len, erows).transpose() * y.block(eq0, ec0, len, ecols);
            };
            // The slices' products (x_t, y_u: slices or their magnitudes) into acc's diagonals.
            auto products = [&](const std::vector<Eigen::MatrixXd>& x,
                                const std::vector<Eigen::MatrixXd>& y,
                                const std::vector<Eigen::MatrixXd>& x_diffs,
                                const std::vector<Eigen::MatrixXd>& y_diffs, detail::wide_int* acc,
                                detail::wide_int* sq) {
              for (std::size_t t = 0; t < na; ++t) {
                for (std::size_t u = 0; u < nb; ++u) {
                  if (t < ks && u < ks) continue;  // Karatsuba's, below
                  gemm(x[t], y[u]);
                  add(acc + (t + u) * cells);
                }
              }
              for (std::size_t t = 0; t < ks; ++t) {  // A_t·B_t, spread after the chunks
                gemm(x[t], y[t]);
                add(sq + t * cells);
              }
              std::size_t pair = 0;
              for (std::size_t t = 0; t < ks; ++t) {  // (A_t − A_u)·(B_t − B_u) less on t + u
                for (std::size_t u = t + 1; u < ks; ++u, ++pair) {
                  gemm(x_diffs[pair], y_diffs[pair]);
                  add(acc + (t + u) * cells, -1);
                }
              }
            };
            products(sa.slice, sb.slice, diff_a, diff_b, partial.data(), square.data());
            if (exact_abs) {
              products(sa.magnitude, sb.magnitude, diff_abs_a, diff_abs_b, abs_sum.data(),
                       abs_square.data());
            }
          }
          // Each square on its own diagonal 2t and on every cross diagonal t + u (u ≠ t < ks).
          auto spread = [&](const detail::wide_int* sq, detail::wide_int* acc) {
            for (std::size_t t = 0; t < ks; ++t) {
              for (std::size_t u = 0; u < ks; ++u) {
                if (u > t && options.mutant_karatsuba_keeps_a_square) continue;
                detail::wide_int* to = acc + (t + u) * cells;
                const detail::wide_int* from = sq + t * cells;
                for (std::size_t e = 0; e < cells; ++e) to[e] += from[e];
              }
            }
          };
          spread(square.data(), partial.data());
          if (exact_abs) spread(abs_square.data(), abs_sum.data());
          // The upper bound of Σ|a·b|: one GEMM of the magnitudes over the whole part (its
          // rounding depends on Eigen's blocking of this tile's shape, never on the thread).
          Eigen::MatrixXd abs_prod;
          if (!exact_abs && kr > 0) {
            const auto ekr = static_cast<Eigen::Index>(kr);
            abs_prod.noalias() =
                ma.m.block(0, er0, ekr, erows).transpose() * mb.m.block(0, ec0, ekr, ecols);
          }
          std::vector<std::size_t> rest;
          std::size_t tile_plain = 0, tile_rest = 0, tile_roundings = 0;
          for (std::size_t j = 0; j < cols; ++j) {
            for (std::size_t i = 0; i < rows; ++i) {
              const std::size_t gi = r0 + i, gj = c0 + j, cell = j * rows + i;
              // The rest positions of this element: c where a[i,c] or b[c,j] is left out of the
              // slices (a_sliced·b_sliced misses exactly the products a[i,c]·b[c,j] there).
              rest.clear();
              if (!sa.rest[gi].empty() || !sb.rest[gj].empty()) {
                std::set_union(sa.rest[gi].begin(), sa.rest[gi].end(), sb.rest[gj].begin(),
                               sb.rest[gj].end(), std::back_inserter(rest));
              }
              // The slices' part, exactly as an integer of 128 or 512 bits (then one rounding to
              // R at most), else (beyond 512 bits) D − 1 sums in R of the diagonals.
              // Each rest product adds one sum in R; with an R factor the products themselves
              // round once more (a factor 1 + delta on each of them, so one more overall).
              std::size_t roundings = rest.size() + (!exact_products && !rest.empty() ? 1 : 0);
              R p(0), s(0);
              const int scale = oa.top[gi] + ob.top[gj] - integer_scale;
              if (integer_combine) {
                detail::wide_int ip = 0, is = 0;
                for (std::size_t d = 0; d < diagonals; ++d) {  // Horner: Σ P_d·2^((D−1−d)·beta)
                  ip = ip * radix + partial[d * cells + cell];
                  if (exact_abs) is = is * radix + abs_sum[d * cells + cell];
                }
                roundings += detail::fits_r<R>(ip) && detail::fits_r<R>(is) ? 0 : 1;
                p = detail::to_r_scaled<R>(ip, scale);
                if (exact_abs) s = detail::to_r_scaled<R>(is, scale);
              } else if (wide_combine) {
                detail::WideSum ip, is;
                for (std::size_t d = 0; d < diagonals; ++d) {  // the same, in 512 bits
                  ip.shift_add(d == 0 ? 0 : beta, partial[d * cells + cell]);
                  if (exact_abs) is.shift_add(d == 0 ? 0 : beta, abs_sum[d * cells + cell]);
                }
                roundings += 1;  // at most one: the conversion of the exact sum
                p = detail::to_r_scaled<R>(ip, scale);
                if (exact_abs) s = detail::to_r_scaled<R>(is, scale);
              } else {
                roundings += diagonals == 0 ? 0 : diagonals - 1;
                for (std::size_t d = 0; d < diagonals; ++d) {  // fixed order: D − 1 sums in R
                  p += detail::to_r<R>(partial[d * cells + cell]) * pw[d];
                  if (exact_abs) s += detail::to_r<R>(abs_sum[d * cells + cell]) * pw[d];
                }
                p = detail::scaled_by_pow2(p, oa.top[gi] + ob.top[gj] - total);
                s = detail::scaled_by_pow2(s, oa.top[gi] + ob.top[gj] - total);
              }
              if (oa.finite[gi] == 0 || ob.finite[gj] == 0 || (kr > 0 && roundings > kr - 1)) {
                plain(gi, gj);
                ++tile_plain;
                continue;
              }
              for (const std::size_t q : rest) {  // increasing q: one more sum in R each
                using std::abs;
                // exact for two doubles (106 bits), else rounded once (counted above)
                R prod_q;
                if constexpr (exact_products) {
                  prod_q = detail::exact_product<R>(a(gi, k0 + q), b(k0 + q, gj));
                } else {
                  prod_q = R(a(gi, k0 + q)) * R(b(k0 + q, gj));
                }
                p += prod_q;
                if (exact_abs) s += abs(prod_q);
              }
              if (!exact_abs) {
                s = R(0);
                if (kr > 0 && ma.nonzero[gi] != 0 && mb.nonzero[gj] != 0) {
                  const auto ei = static_cast<Eigen::Index>(i), ej = static_cast<Eigen::Index>(j);
                  s = detail::scaled_by_pow2((R(abs_prod(ei, ej)) + abs_underflow) * abs_factor,
                                             oa.top[gi] + ob.top[gj]);
                }
              }
              tile_rest += rest.size();
              tile_roundings = std::max(tile_roundings, roundings);
              out[gi * n + gj] = PartTerms<R>{p, s, kr};
            }
          }
          hp_elements.fetch_add(tile_plain);
          rest_products.fetch_add(tile_rest);
          detail::raise_to(max_roundings, tile_roundings);
        });
    k0 += kr;
  }
  finish_values(c);
  stats.hp_elements = hp_elements.load();
  stats.fast_elements = c.parts() * mn - stats.hp_elements;
  stats.rest_products = rest_products.load();
  stats.max_roundings = max_roundings.load();
  if (options.stats != nullptr) *options.stats = stats;
  return c;
}

// A storage-typed row-major [rows, cols] tensor's values as doubles (exact).
template <StorageFloat T>
std::vector<double> to_double_matrix(const Tensor<T>& t) {
  std::vector<double> out;
  out.reserve(t.size());
  for (const T& v : t.values()) out.push_back(static_cast<double>(v));
  return out;
}

}  // namespace shardcheck::reference
