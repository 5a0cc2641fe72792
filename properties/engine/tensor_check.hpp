// Comparing one materialized tensor with the high-precision reference, element by element,
// under the reference's elementwise bound. The numbers a report shows come from here.
//
// Per element i, with a = the implementation's value (type T), e = the exact value and b = the
// a-priori bound (both in the reference's scalar R):
//   err_i   = |a - e|                      (computed in R: exact for every T)
//   ratio_i = err_i / b_i                  (pass <= 1; 0/0 = 0, x/0 = inf)
//   ulp_i   = err_i / ulp_T(e)             (ulp_T: spacing of T at e, subnormal spacing below)
// Special values: where e is NaN, a must be NaN; where e is +-inf, a must be the same inf;
// where e is finite, a may be +-inf only if |e| + b reaches T's overflow threshold (rounding
// may overflow), and never NaN. Anything else is a special-value mismatch (ratio inf).
// Fixed tolerance, for contrast only: torch.testing.assert_close's defaults for T,
// |a - e| <= atol + rtol*|e| (equal_nan=False), per torch.testing.assert_close's documentation.
#pragma once

#include "layout/materialize.hpp"
#include "layout/placement.hpp"
#include "runtime/dtype.hpp"
#include "tensor/tensor.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace shardcheck::check {

// torch.testing.assert_close default (rtol, atol) per dtype.
struct FixedTolerance {
  double rtol;
  double atol;
};
constexpr FixedTolerance torch_default_tolerance(DType t) {
  switch (t) {
    case DType::float64: return {1e-7, 1e-7};
    case DType::float32: return {1.3e-6, 1e-5};
    case DType::bfloat16: return {1.6e-2, 1e-5};
    case DType::float16: return {1e-3, 1e-5};
    default: return {0, 0};
  }
}

// The error of every element along the sharded axis, for the HTML report's plots, pooled to at
// most kMaxCells cells. The tensor of shape [d0, ..., dk] with sharded dimension a (a = 0 when it
// is replicated or partial) is viewed as a matrix [d_a, rest], rest = the product of the other
// dimensions in row-major order (column c of row r is the element whose index along a is r and
// whose other indices, read as one row-major number, are c). Cell (i, j) covers the block of
// row_block x col_block elements starting at (i*row_block, j*col_block) and holds the block's
// largest |error| and largest bound ratio (ratio inf: a NaN/Inf mismatch). A 1-D tensor (or
// rest = 1) gets up to kMaxCells rows; otherwise at most kMaxRows rows and kMaxCells/rows columns.
struct ErrorProfile {
  static constexpr std::size_t kMaxCells = 4096;
  static constexpr std::size_t kMaxRows = 64;
  int axis = -1;           // the sharded dimension; -1: every rank holds every element
  std::size_t length = 0;  // d_a: elements along the axis
  std::size_t rest = 0;    // elements per index along the axis
  std::size_t row_block = 1, col_block = 1;
  std::size_t rows = 0, cols = 0;       // cells
  std::vector<std::size_t> boundaries;  // element offsets along the axis where ranks 1.. begin
  std::vector<double> error;            // rows x cols, row-major
  std::vector<double> ratio;            // rows x cols, row-major

  // Sizes the profile of a tensor of `shape` under `placement` split into `parts`.
  void reset(const Shape& shape, const Placement& placement, int parts);
  // Adds element `flat` (row-major index into the tensor) with its error and ratio.
  void add(std::size_t flat, double err, double bound_ratio) {
    const std::size_t k = flat % inner_;
    const std::size_t outer = flat / (inner_ * length);
    const std::size_t row = (flat / inner_) % length;
    const std::size_t cell = (row / row_block) * cols + (outer * inner_ + k) / col_block;
    error[cell] = std::max(error[cell], err);
    ratio[cell] = std::max(ratio[cell], bound_ratio);
  }

 private:
  std::size_t inner_ = 1;  // product of the dimensions after the axis
};

struct TensorCheck {
  std::string name;       // "y", "dx", ...
  std::string placement;  // "S(1)", "R", ...
  DType dtype = DType::float32;
  Shape shape;
  int parts = 1;

  double max_abs_err = 0;  // over elements compared numerically
  double max_ratio = 0;    // max err/bound; pass <= 1
  double max_ulp = 0;
  std::size_t over_bound = 0;          // elements with ratio > 1
  std::size_t special_mismatches = 0;  // NaN/Inf where the reference has none, or the reverse
  std::size_t fixed_tolerance_failures = 0;
  // What a fixed tolerance would have needed, at assert_close's default atol for the dtype:
  //   tightest_rtol  the smallest rtol that passes every finite element: max (err - atol)/|e|
  //   bound_rtol     the largest rtol the bound justifies: max (bound - atol)/|e|, so
  //                  assert_close(rtol = bound_rtol) accepts every element the bound accepts
  //                  wherever |e| > 0 (elements with e = 0 need atol >= their bound)
  // (both over elements with |e| > 0, 0 when there are none; for tolerance reports).
  double tightest_rtol = 0;
  double bound_rtol = 0;

  // The worst element (largest ratio; special mismatches first).
  Shape worst_index;
  int worst_rank = -1;  // -1: every rank holds it (replicated)
  std::size_t worst_boundary_distance = 0;
  double worst_actual = 0;
  double worst_exact = 0;
  double worst_bound = 0;

  ErrorProfile profile;  // every element's error, pooled (empty when nothing was compared)

  std::vector<int> divergent_ranks;  // replicated tensor whose ranks disagree in some bit
  std::string problem;               // e.g. a piece of the wrong shape: nothing was compared

  // Every element's value as the implementation gave it and its bound, row-major; filled only
  // while a KeepElementValues is alive (compare's diagnosis compares two implementations'
  // outputs element by element), empty otherwise.
  std::vector<double> values, bounds;

  bool fixed_tolerance_pass() const { return problem.empty() && fixed_tolerance_failures == 0; }
  bool pass() const {
    return problem.empty() && over_bound == 0 && special_mismatches == 0 && divergent_ranks.empty();
  }
  // "dx [5, 7] S(0): max err 1.2e-07, 0.31 of the bound, 2 ulp" or the failure in words.
  std::string summary() const;
  // The failure in words: which element, owned by which rank, how far from a shard boundary,
  // the value, the exact value, the bound.
  std::string explain() const;
};

namespace detail {

inline Shape unravel(std::size_t flat, const Shape& shape) {
  Shape idx(shape.size());
  for (std::size_t k = shape.size(); k-- > 0;) {
    idx[k] = shape[k] == 0 ? 0 : flat % shape[k];
    flat = shape[k] == 0 ? 0 : flat / shape[k];
  }
  return idx;
}

// Spacing of T's values at magnitude |v| (v finite): 2^(max(exp(v), emin) - (digits - 1)).
template <Element T>
double ulp_of(double v) {
  constexpr int digits = std::numeric_limits<T>::digits;         // incl. the implicit bit
  constexpr int min_exp = std::numeric_limits<T>::min_exponent;  // 2^(min_exp-1) = min normal
  int e = 0;
  std::frexp(std::fabs(v), &e);  // |v| = m * 2^e, m in [0.5, 1)
  const int exponent = std::max(e - 1, min_exp - 1);
  return std::ldexp(1.0, exponent - (digits - 1));
}

template <Element T>
double overflow_threshold() {
  // Values at or beyond max + ulp(max)/2 round to inf.
  const auto mx = static_cast<double>(std::numeric_limits<T>::max());
  return mx + ulp_of<T>(mx) / 2;
}

}  // namespace detail

// While one is alive, check_tensor keeps each element's value and bound in the TensorCheck
// (TensorCheck::values, bounds). Nests; not for concurrent checks with and without it.
class KeepElementValues {
 public:
  KeepElementValues() : previous_(active_.exchange(true)) {}
  ~KeepElementValues() { active_.store(previous_); }
  KeepElementValues(const KeepElementValues&) = delete;
  KeepElementValues& operator=(const KeepElementValues&) = delete;
  KeepElementValues(KeepElementValues&&) = delete;
  KeepElementValues& operator=(KeepElementValues&&) = delete;
  static bool active() { return active_.load(); }

 private:
  inline static std::atomic<bool> active_{false};
  bool previous_;
};

// Compares `actual` (materialized from the ranks) with `exact` under `bound` (same shape).
// `placement` and `parts` locate the worst element's owner; `divergent` comes from
// materialize (replicated pieces that disagree).
template <Element T, class R>
TensorCheck check_tensor(std::string name, const Tensor<T>& actual, const Tensor<R>& exact,
                         const Tensor<R>& bound, const Placement& placement, int parts,
                         std::vector<int> divergent = {}) {
  TensorCheck c;
  c.name = std::move(name);
  c.placement = placement.to_string();
  c.dtype = dtype_of<T>;
  c.shape = exact.shape();
  c.parts = parts;
  c.divergent_ranks = std::move(divergent);
  if (actual.shape() != exact.shape()) {
    c.problem = "the implementation's " + c.name + " is " + format_shape(actual.shape()) +
                " but the reference's is " + format_shape(exact.shape());
    return c;
  }
  const auto tol = torch_default_tolerance(c.dtype);
  const double overflow = detail::overflow_threshold<T>();
  double worst = -1;
  c.profile.reset(c.shape, placement, parts);
  const bool keep = KeepElementValues::active();
  if (keep) {
    c.values.reserve(exact.size());
    c.bounds.reserve(exact.size());
  }
  for (std::size_t i = 0; i < exact.size(); ++i) {
    const T a_t = actual[i];
    const auto a = static_cast<double>(a_t);
    const R& e = exact[i];
    const R& b = bound[i];
    const auto e_d = static_cast<double>(e);
    const auto b_d = static_cast<double>(b);
    if (keep) {
      c.values.push_back(a);
      c.bounds.push_back(b_d);
    }
    double ratio = 0;
    double err = 0;
    bool special = false;
    if (std::isnan(e_d) || std::isinf(e_d) || std::isnan(a) || std::isinf(a)) {
      bool ok = false;
      if (std::isnan(e_d)) ok = std::isnan(a);
      else if (std::isinf(e_d)) ok = a == e_d;
      else if (std::isinf(a)) ok = std::fabs(e_d) + b_d >= overflow && (a > 0) == (e_d > 0);
      special = !ok;
      ratio = ok ? 0 : std::numeric_limits<double>::infinity();
      // assert_close: NaN never equals (equal_nan=False); equal infinities pass.
      if (!(std::isinf(a) && a == e_d)) ++c.fixed_tolerance_failures;
    } else {
      const R diff = R(a) - e;
      const R abs_err = diff < 0 ? R(-diff) : diff;
      err = static_cast<double>(abs_err);
      ratio = b > 0 ? static_cast<double>(abs_err / b)
                    : (abs_err == 0 ? 0.0 : std::numeric_limits<double>::infinity());
      c.max_abs_err = std::max(c.max_abs_err, err);
      c.max_ulp = std::max(c.max_ulp, err / detail::ulp_of<T>(e_d));
      if (err > tol.atol + tol.rtol * std::fabs(e_d)) ++c.fixed_tolerance_failures;
      if (e_d != 0) {
        c.tightest_rtol = std::max(c.tightest_rtol, (err - tol.atol) / std::fabs(e_d));
        c.bound_rtol = std::max(c.bound_rtol, (b_d - tol.atol) / std::fabs(e_d));
      }
    }
    c.profile.add(i, err, ratio);
    if (special) ++c.special_mismatches;
    if (ratio > 1) ++c.over_bound;
    c.max_ratio = std::max(c.max_ratio, ratio);
    if (ratio > worst) {
      worst = ratio;
      c.worst_index = detail::unravel(i, c.shape);
      c.worst_actual = a;
      c.worst_exact = e_d;
      c.worst_bound = b_d;
    }
  }
  if (!exact.empty()) {
    const Owner o = owner_of(c.shape, c.worst_index, placement, parts);
    c.worst_rank = o.rank;
    c.worst_boundary_distance = o.boundary_distance;
  }
  return c;
}

}  // namespace shardcheck::check
