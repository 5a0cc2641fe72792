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
// Method, per part r (length k_r ≥ 1):
//   The part's inner axis is cut into chunks of kc ≤ 256 (plan_part picks kc), and
//   beta = floor((53 − ceil(log2 kc)) / 2) bits per slice.
//   Row i of a (restricted to the part) has top exponent E_i (every |a[i,c]| < 2^E_i) and lowest
//   set bit 2^L_i; it is cut, by truncation towards zero, into s_i = ceil((E_i − L_i)/beta)
//   slices: integers A_t[i,c] with |A_t[i,c]| ≤ 2^beta − 1 and the sign of a[i,c], and
//   a[i,c] = Σ_{t=1..s_a} A_t[i,c]·2^(E_i − t·beta) EXACTLY (nothing is truncated away: the
//   slices continue until every set bit of the row is taken). Columns of b likewise (exponents
//   F_j, s_b slices). Every product of two slice entries is an integer below 2^(2·beta), and kc
//   of them sum to less than 2^53, so each chunk's GEMM A_t·B_u (and |A_t|·|B_u|) is EXACT in
//   double whatever the order of its additions, the blocking, the use of FMA or the number of
//   threads. The chunks' results, and the pairs (t, u) of one diagonal d = t + u (one scale),
//   are added EXACTLY as 128-bit integers: P_d[i,j] = Σ_{t+u=d} Σ_chunks (A_t·B_u)[i,j].
//   partial_r = 2^(E_i+F_j) · Σ_{d=2..s_a+s_b} P_d[i,j]·2^(−d·beta)   summed in R, d ascending
//   abs_sum_r = the same with |A_t|·|B_u| (the slices of |a| are the |slices| of a).
//
// Accuracy (R with unit roundoff u_R = 2^-113 for hp): everything is exact but the D − 1
// additions in R of the D = s_a + s_b − 1 diagonals (each P_d < 2^113 converts exactly; the
// scalings by powers of two are exact: no overflow or underflow in R's range), so
//   |partial_r − exact| ≤ gamma_{D−1}(u_R)·Σ|a·b|,   |abs_sum_r − Σ|a·b|| ≤ gamma_{D−1}(u_R)·Σ|a·b|
// The fast path is used for a part only when D ≤ k_r and s_a, s_b ≤ max_slices (default 8, so
// D ≤ 15 and gamma_14(2^-113) < 2^-109.1 < 2^-100): its terms then satisfy the very bound
// dot.hpp states for contract_parts (gamma_{k_r−1}(u_R)·abs_sum_r), which is what bounds.hpp's
// reference term covers, so the bounds stay sound unchanged. An element whose row of a or
// column of b holds ±inf or NaN, or needs more than max_slices slices (a row spanning more than
// max_slices·beta binades, e.g. 2^-1000 beside 2^1000), and every element of a part with
// D > k_r (a very short part), is computed by contract_parts itself in R: bit-identical to the
// plain reference there (NaN, inf and signed-zero conventions included). Subnormal inputs and
// zeros go through the fast path (the slicing is exact for them; +0 + (−0) is +0 as in R).
// This is not "relative to the exact value": under cancellation Σ|a·b| ≫ |Σ a·b| and the
// bound is relative to Σ|a·b|, as the reference's own is.
//
// Thread-count independence: the output is tiled (tile × tile elements, tiles shared among
// OpenMP threads); each element's slice products are exact doubles and their sums exact
// integers, whichever thread or blocking produced them, and each element's sum in R is done by
// one thread in the fixed order above. The result is therefore bit-identical for every thread
// count and tile size (a property checks 1 against 3 threads and tile 256 against tile 3).
//
// Cost: 2·s_a·s_b double GEMMs of m×k_r×n per part (1 pair for bfloat16/float16 rows spanning
// ≤ beta bits, typically 4 for float, 9–16 for double), plus 2·D additions in R per element.
#pragma once

#include "reference/dot.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace shardcheck::reference {

// A read-only strided view of a matrix of doubles: element (i, j) is
// data[i·row_stride + j·col_stride]. Every float, bfloat16 and float16 value is a double, so
// storage-typed operands are converted exactly before (to_double_matrix below).
struct MatrixView {
  const double* data = nullptr;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::ptrdiff_t row_stride = 0;
  std::ptrdiff_t col_stride = 0;

  double operator()(std::size_t i, std::size_t j) const {
    return data[static_cast<std::ptrdiff_t>(i) * row_stride +
                static_cast<std::ptrdiff_t>(j) * col_stride];
  }
};

// A row-major [rows, cols] block of doubles seen as a MatrixView.
inline MatrixView row_major_view(const double* data, std::size_t rows, std::size_t cols) {
  return {data, rows, cols, static_cast<std::ptrdiff_t>(cols), 1};
}

// The same block read transposed: element (i, j) of the view is data[j·rows_of_data + i], i.e. a
// row-major [cols, rows] block seen as [rows, cols] (w [out, in] as the [in, out] of x·Wᵀ).
inline MatrixView transposed_view(const double* data, std::size_t rows, std::size_t cols) {
  return {data, rows, cols, 1, static_cast<std::ptrdiff_t>(rows)};
}

// What the fast path did, for tests and benchmarks.
struct FastStats {
  std::size_t gemms = 0;          // double GEMMs run (over all parts)
  std::size_t max_pairs = 0;      // largest number of slice pairs s_a·s_b of a part
  std::size_t max_diagonals = 0;  // largest D = s_a + s_b − 1 of a part (D − 1 sums in R)
  std::size_t hp_elements = 0;    // (element, part) terms computed by contract_parts instead
  std::size_t fast_elements = 0;  // (element, part) terms from the slices
};

struct FastOptions {
  int threads = 0;             // OpenMP threads; 0: the OpenMP default (omp_get_max_threads)
  std::size_t tile = 256;      // output tile edge (rows and columns of one GEMM call)
  std::size_t max_slices = 8;  // per operand and part; rows/columns needing more use R
  FastStats* stats = nullptr;  // filled when not null
  // For the properties' self-test only (the mutant that proves they can fail): drops the last
  // slice of a, which makes the result wrong whenever a needs more than one slice.
  bool mutant_drop_last_slice = false;
};

namespace detail {

// ceil(log2 k) for k ≥ 1.
inline int ceil_log2(std::size_t k) { return k <= 1 ? 0 : static_cast<int>(std::bit_width(k - 1)); }

// Bits per slice for GEMMs of inner length kc: kc·(2^beta − 1)^2 < 2^53.
inline int slice_bits(std::size_t kc) { return (53 - ceil_log2(kc)) / 2; }

// The binades a row (or column) spans: every nonzero |v| < 2^top, every v a multiple of 2^low.
struct Span {
  int top = 0;
  int low = 0;
  bool nonzero = false;
  bool finite = true;

  void add(double v) {
    if (!std::isfinite(v)) {
      finite = false;
      return;
    }
    if (v == 0) return;
    int e = 0;
    const double f = std::frexp(std::abs(v), &e);  // |v| = f·2^e, f in [0.5, 1): |v| < 2^e
    const auto mantissa = static_cast<std::uint64_t>(std::ldexp(f, 53));  // exact integer
    const int lowest = e - 53 + std::countr_zero(mantissa);
    top = nonzero ? std::max(top, e) : e;
    low = nonzero ? std::min(low, lowest) : lowest;
    nonzero = true;
  }
  // Slices of beta bits needed to take every set bit (0 for an all-zero line); more than
  // max_slices (the line goes to R) for a line with ±inf or NaN.
  std::size_t slices(int beta, std::size_t max_slices) const {
    if (!finite) return max_slices + 1;
    if (!nonzero) return 0;
    return static_cast<std::size_t>((top - low + beta - 1) / beta);
  }
};

// The spans of lines [0, lines) of a part: element (l, c) = at(l, c), c < k_r.
template <class At>
std::vector<Span> spans_of(std::size_t lines, std::size_t k_r, const At& at) {
  std::vector<Span> out(lines);
  for (std::size_t l = 0; l < lines; ++l) {
    for (std::size_t c = 0; c < k_r; ++c) out[l].add(at(l, c));
  }
  return out;
}

// Slices per line at beta: the largest need among the lines that stay on the fast path.
inline std::size_t slice_count(const std::vector<Span>& spans, int beta, std::size_t max_slices) {
  std::size_t count = 0;
  for (const Span& sp : spans) {
    const std::size_t need = sp.slices(beta, max_slices);
    if (need <= max_slices) count = std::max(count, need);
  }
  return count;
}

// How a part is cut: GEMMs of inner length `chunk` (the last one shorter), beta bits per slice.
struct Plan {
  std::size_t chunk = 1;
  int beta = 26;
  std::size_t slices_a = 0, slices_b = 0;
};

// The chunk among min(k_r, 256), its halves down to 16 (and k_r itself when shorter) with the
// least modelled cost pairs·(1 + 32/chunk): shorter chunks give more bits per slice (fewer slice
// pairs) but shorter GEMMs. Any choice is exact; this only sets the speed.
inline Plan plan_part(const std::vector<Span>& a, const std::vector<Span>& b, std::size_t k_r,
                      std::size_t max_slices) {
  Plan best;
  double best_cost = -1;
  for (std::size_t chunk = std::min<std::size_t>(std::max<std::size_t>(k_r, 1), 256);; chunk /= 2) {
    Plan p;
    p.chunk = chunk;
    p.beta = slice_bits(chunk);
    p.slices_a = slice_count(a, p.beta, max_slices);
    p.slices_b = slice_count(b, p.beta, max_slices);
    const double cost =
        static_cast<double>(p.slices_a * p.slices_b) * (1.0 + 32.0 / static_cast<double>(chunk));
    if (best_cost < 0 || cost < best_cost) {
      best = p;
      best_cost = cost;
    }
    if (chunk <= 16) break;
  }
  return best;
}

// One operand of one part, cut into `count` slices: for line l (a row of a or a column of b),
// value = Σ_t slice_t·2^(top_l − t·beta); `fast[l]` is false where the line goes to R.
struct Sliced {
  std::vector<int> top;                           // per line
  std::vector<char> fast;                         // per line
  std::vector<Eigen::MatrixXd> slice, magnitude;  // [lines × k_r] each, |slice| beside
};

template <class At>
Sliced slice_lines(const std::vector<Span>& spans, std::size_t k_r, int beta, std::size_t count,
                   std::size_t max_slices, const At& at) {
  const std::size_t lines = spans.size();
  Sliced s;
  s.top.assign(lines, 0);
  s.fast.assign(lines, 0);
  s.slice.assign(count, Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(lines),
                                              static_cast<Eigen::Index>(k_r)));
  for (std::size_t l = 0; l < lines; ++l) {
    const std::size_t need = spans[l].slices(beta, max_slices);
    if (need > max_slices) continue;
    s.fast[l] = 1;
    s.top[l] = spans[l].top;
    for (std::size_t c = 0; c < k_r; ++c) {
      const double v = at(l, c);
      double previous = 0;  // trunc(v·2^((t−1)·beta − top)): the bits taken so far, as an integer
      for (std::size_t t = 1; t <= need; ++t) {
        // v·2^(t·beta − top) is exact when ≥ 1 in magnitude (a power-of-two scaling of a double
        // that does not underflow); below 1 it may round but truncates to 0 either way.
        const double taken = std::trunc(std::ldexp(v, static_cast<int>(t) * beta - s.top[l]));
        // The difference is an integer below 2^beta in magnitude: exact.
        s.slice[t - 1](static_cast<Eigen::Index>(l), static_cast<Eigen::Index>(c)) =
            taken - std::ldexp(previous, beta);
        previous = taken;
      }
    }
  }
  s.magnitude.reserve(count);
  for (const auto& m : s.slice) s.magnitude.emplace_back(m.cwiseAbs());
  return s;
}

// Exact integer sums of exact GEMM results (each an integer below 2^53 in magnitude).
__extension__ using wide_int = __int128;

// v as R, exactly (|v| < 2^113).
template <class R>
R to_r(wide_int v) {
  const auto hi = static_cast<std::int64_t>(v >> 64);
  const auto lo = static_cast<std::uint64_t>(v);
  using std::ldexp;
  return ldexp(R(hi), 64) + R(lo);
}

inline int thread_count(int requested) {
#if defined(_OPENMP)
  return requested > 0 ? requested : omp_get_max_threads();
#else
  (void)requested;
  return 1;
#endif
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
#pragma omp parallel for schedule(static) num_threads(nt)
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
template <class R = hp>
Contraction<R> fast_contraction(const MatrixView& a, const MatrixView& b,
                                std::span<const std::size_t> part_lengths = {},
                                const FastOptions& options = {}) {
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

  std::size_t k0 = 0;
  for (std::size_t r = 0; r < c.parts(); ++r) {
    const std::size_t kr = c.part_lengths[r];
    PartTerms<R>* out = c.terms.data() + r * mn;
    auto at_a = [&](std::size_t i, std::size_t q) { return a(i, k0 + q); };
    auto at_b = [&](std::size_t j, std::size_t q) { return b(k0 + q, j); };
    const auto spans_a = detail::spans_of(m, kr, at_a), spans_b = detail::spans_of(n, kr, at_b);
    const detail::Plan plan = detail::plan_part(spans_a, spans_b, kr, options.max_slices);
    const int beta = plan.beta;
    auto sa = detail::slice_lines(spans_a, kr, beta, plan.slices_a, options.max_slices, at_a);
    const auto sb = detail::slice_lines(spans_b, kr, beta, plan.slices_b, options.max_slices, at_b);
    if (options.mutant_drop_last_slice && sa.slice.size() > 1) {
      sa.slice.pop_back();
      sa.magnitude.pop_back();
    }
    const std::size_t na = sa.slice.size(), nb = sb.slice.size();
    // Slice pair (t, u), t, u ≥ 1, lies on diagonal t + u; diagonals 2..na+nb.
    const std::size_t diagonals = na + nb == 0 ? 0 : na + nb - 1;
    const bool part_fast = diagonals <= kr;  // else every element of the part goes to R
    stats.max_pairs = std::max(stats.max_pairs, na * nb);
    stats.max_diagonals = std::max(stats.max_diagonals, diagonals);
    const int total = static_cast<int>(plan.slices_a + plan.slices_b) * beta;

    if (part_fast && kr > 0) {
      const std::size_t chunks = (kr + plan.chunk - 1) / plan.chunk;
      stats.gemms += 2 * na * nb * chunks;
      // pw[d] = 2^((s_a + s_b − d)·beta): diagonal d's products at one common scale (exact).
      std::vector<R> pw(diagonals, R(0));
      using std::ldexp;
      for (std::size_t d = 0; d < diagonals; ++d) {
        pw[d] = ldexp(R(1), total - static_cast<int>(d + 2) * beta);
      }
      for_each_tile(
          m, n, options.tile, options.threads,
          [&](std::size_t r0, std::size_t rows, std::size_t c0, std::size_t cols) {
            const auto er0 = static_cast<Eigen::Index>(r0), erows = static_cast<Eigen::Index>(rows);
            const auto ec0 = static_cast<Eigen::Index>(c0), ecols = static_cast<Eigen::Index>(cols);
            const std::size_t cells = rows * cols;
            // Per diagonal and element, the exact integer sums of its slice products.
            std::vector<detail::wide_int> partial(diagonals * cells, 0),
                abs_sum(diagonals * cells, 0);
            Eigen::MatrixXd prod(erows, ecols);
            auto add = [&](detail::wide_int* acc) {
              for (Eigen::Index j = 0; j < ecols; ++j) {
                for (Eigen::Index i = 0; i < erows; ++i) {
                  acc[static_cast<std::size_t>(i) * cols + static_cast<std::size_t>(j)] +=
                      static_cast<std::int64_t>(prod(i, j));  // an integer below 2^53: exact
                }
              }
            };
            for (std::size_t q0 = 0; q0 < kr; q0 += plan.chunk) {
              const auto eq0 = static_cast<Eigen::Index>(q0);
              const auto len = static_cast<Eigen::Index>(std::min(plan.chunk, kr - q0));
              for (std::size_t t = 0; t < na; ++t) {
                for (std::size_t u = 0; u < nb; ++u) {
                  const std::size_t off = (t + u) * cells;
                  prod.noalias() = sa.slice[t].block(er0, eq0, erows, len) *
                                   sb.slice[u].block(ec0, eq0, ecols, len).transpose();
                  add(partial.data() + off);
                  prod.noalias() = sa.magnitude[t].block(er0, eq0, erows, len) *
                                   sb.magnitude[u].block(ec0, eq0, ecols, len).transpose();
                  add(abs_sum.data() + off);
                }
              }
            }
            for (std::size_t i = 0; i < rows; ++i) {
              for (std::size_t j = 0; j < cols; ++j) {
                R p(0), s(0);
                for (std::size_t d = 0; d < diagonals;
                     ++d) {  // fixed order: the bound's D − 1 sums
                  p += detail::to_r<R>(partial[d * cells + i * cols + j]) * pw[d];
                  s += detail::to_r<R>(abs_sum[d * cells + i * cols + j]) * pw[d];
                }
                const int shift = sa.top[r0 + i] + sb.top[c0 + j] - total;
                out[(r0 + i) * n + c0 + j] = PartTerms<R>{ldexp(p, shift), ldexp(s, shift), kr};
              }
            }
          });
    }

    // The elements the slices do not cover: contract_parts in R, as the plain reference does.
    std::vector<std::size_t> slow_rows, slow_cols;
    for (std::size_t i = 0; i < m; ++i) {
      if (!part_fast || sa.fast[i] == 0) slow_rows.push_back(i);
    }
    for (std::size_t j = 0; j < n; ++j) {
      if (part_fast && sb.fast[j] == 0) slow_cols.push_back(j);
    }
    const std::size_t one[] = {kr};
    auto plain = [&](std::size_t i, std::size_t j) {
      std::vector<R> x(kr), y(kr);
      for (std::size_t q = 0; q < kr; ++q) {
        x[q] = R(a(i, k0 + q));
        y[q] = R(b(k0 + q, j));
      }
      contract_parts<R>(x.data(), 1, y.data(), 1, one, &out[i * n + j]);
    };
    const std::size_t slow_row_elements = slow_rows.size() * n;
    const std::size_t slow = slow_row_elements + slow_cols.size() * (m - slow_rows.size());
    std::vector<char> row_is_slow(m, 0);
    for (std::size_t i : slow_rows) row_is_slow[i] = 1;
    std::vector<std::size_t> fast_rows;
    for (std::size_t i = 0; i < m; ++i) {
      if (row_is_slow[i] == 0) fast_rows.push_back(i);
    }
    const int nt = detail::thread_count(options.threads);
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (std::ptrdiff_t q = 0; q < static_cast<std::ptrdiff_t>(slow); ++q) {
      const auto uq = static_cast<std::size_t>(q);
      if (uq < slow_row_elements) {
        plain(slow_rows[uq / n], uq % n);
      } else {
        const std::size_t v = uq - slow_row_elements;
        plain(fast_rows[v / slow_cols.size()], slow_cols[v % slow_cols.size()]);
      }
    }
    stats.hp_elements += slow;
    stats.fast_elements += mn - slow;
    k0 += kr;
  }
  finish_values(c);
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
