// Reduction operators of reduce, all_reduce and reduce_scatter, and their exact semantics.
//
// Every binary step is one operation in the element type: for bfloat16 and float16 that is
// Eigen's arithmetic (compute in float, round to the storage type once), so a reduction over
// p ranks rounds p - 1 times, as NCCL's ring does at each hop. The order of the steps is the
// algorithm's and is documented with each collective (communicator.hpp); the sequential
// model in properties/ follows the same documentation.
//
//   sum      a + b; integers wrap around in two's complement (as NCCL), never undefined.
//   product  a * b; integers wrap around likewise.
//   max/min  NaN-propagating (as torch.maximum): if either operand is NaN the result is NaN
//            (the first NaN operand); otherwise the larger/smaller, and on a tie (+0 vs -0
//            included) the left operand.
//   avg      the sum in the algorithm's order, then one division by the group size in the
//            element type. Floating-point types only: integers have no exact average, and
//            asking for one is a UsageError.
#pragma once

#include "runtime/dtype.hpp"

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace shardcheck {

enum class ReduceOp : std::uint8_t { sum, avg, max, min, product };

inline constexpr ReduceOp all_reduce_ops[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max,
                                              ReduceOp::min, ReduceOp::product};

SHARDCHECK_ENUM_NAMES(ReduceOp, "sum", "avg", "max", "min", "product");

// Calls f(std::integral_constant<ReduceOp, op>{}): `op` as a compile-time value, for the kernels
// compiled once per op (omp/fold.hpp).
template <class F>
decltype(auto) visit_reduce_op(ReduceOp op, F&& f) {
  using enum ReduceOp;
  switch (op) {
    case sum: return f(std::integral_constant<ReduceOp, sum>{});
    case avg: return f(std::integral_constant<ReduceOp, avg>{});
    case max: return f(std::integral_constant<ReduceOp, max>{});
    case min: return f(std::integral_constant<ReduceOp, min>{});
    case product: break;
  }
  return f(std::integral_constant<ReduceOp, product>{});
}

// True when `op` is defined for element type `t` (avg needs a floating-point type).
constexpr bool supports(ReduceOp op, DType t) noexcept {
  return op != ReduceOp::avg || is_floating(t);
}

// One binary step of `op` (avg combines like sum; finish_avg divides at the end).
template <Element T>
T combine(ReduceOp op, T a, T b) noexcept {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      case ReduceOp::product: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case ReduceOp::max: return a < b ? b : a;
      case ReduceOp::min: return b < a ? b : a;
    }
    return a;
  } else {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return static_cast<T>(a + b);
      case ReduceOp::product: return static_cast<T>(a * b);
      case ReduceOp::max:
        if (Eigen::numext::isnan(a)) return a;
        if (Eigen::numext::isnan(b)) return b;
        return a < b ? b : a;
      case ReduceOp::min:
        if (Eigen::numext::isnan(a)) return a;
        if (Eigen::numext::isnan(b)) return b;
        return b < a ? b : a;
    }
    return a;
  }
}

// The last step of avg: divide the sum by the group size, one rounding in T.
template <Element T>
T finish_avg(T sum, int group_size) noexcept {
  if constexpr (std::is_integral_v<T>) {
    return sum;  // unreachable: avg on integers is refused before any data moves
  } else {
    return static_cast<T>(sum / static_cast<T>(group_size));
  }
}

}  // namespace shardcheck
