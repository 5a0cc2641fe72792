// What the runtime's properties and the collectives fuzz harness share to check the runtime
// against the sequential model (collective_model.hpp): the runtime's reduction op and algorithm
// as the model's, and how a result is compared with the model's.
#pragma once

#include "collective_model.hpp"
#include "runtime/ledger.hpp"
#include "runtime/reduce_op.hpp"

#include <limits>
#include <type_traits>

namespace shardcheck::model {

inline Op to_model(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return Op::sum;
    case ReduceOp::avg: return Op::avg;
    case ReduceOp::max: return Op::max;
    case ReduceOp::min: return Op::min;
    case ReduceOp::product: return Op::product;
  }
  return Op::sum;
}

inline Order to_model(Algorithm a) {
  return a == Algorithm::sequential ? Order::sequential : Order::ring;
}

// How results are compared. IEEE 754 leaves the payload of a NaN produced by an arithmetic
// operation on two NaN operands unspecified (x86 keeps the first source, and a compiler may
// swap a commutative operation's operands), so after sum/product/avg "both NaN" is equal.
// max/min pick an operand: the NaN they return must be the documented one (same sign and
// payload), but a signaling NaN may come back quieted (its quiet bit set) when the compiler
// moves it through an arithmetic or conversion instruction, as clang-14 does for the model.
// Data movement copies bits and must match bit for bit.
enum class Match { bits, nan_quiet_bit_free, nan_payload_free };

template <Element T>
bool same(T e, T a, Match m) {
  if (model::bits_of(e) == model::bits_of(a)) return true;
  if (!model::is_nan(e) || !model::is_nan(a)) return false;
  if (m == Match::nan_payload_free) return true;
  if (m == Match::nan_quiet_bit_free) {
    if constexpr (std::is_integral_v<T>) {
      return false;
    } else {
      using Bits = decltype(model::bits_of(e));
      const auto quiet = static_cast<Bits>(Bits{1} << (std::numeric_limits<T>::digits - 2));
      return (model::bits_of(e) | quiet) == (model::bits_of(a) | quiet);
    }
  }
  return false;
}

}  // namespace shardcheck::model
