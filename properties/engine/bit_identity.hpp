// Bit-exactness against the dense op in the same type, for the properties that hold by
// construction (the deterministic kernel, an op that is local per token): any bit that differs
// is a failure, and the first such element, in words, is the explanation.
#pragma once

#include "engine/tensor_check.hpp"
#include "runtime/dtype.hpp"
#include "tensor/tensor.hpp"

#include <array>
#include <bit>
#include <cstddef>
#include <optional>
#include <string>

namespace shardcheck::check {

// The first element where `got` differs in any bit from `want`, the dense op's result in the
// same type, in words (or the two shapes, when they differ); empty when they are bit-identical.
// `what` names the tensor ("dx"); `rank` is the rank that holds `got`, none for a result put
// together from every rank's pieces; `dense_op` is the dense op as the sentence names it ("the
// dense linear": "dx[0, 3] is 0.5 but the dense linear in bfloat16 gives 0.25: ...").
template <class T>
std::string first_bit_difference(const std::string& what, std::optional<int> rank,
                                 const Tensor<T>& got, const Tensor<T>& want,
                                 const std::string& dense_op) {
  const std::string on_rank = rank ? " on rank " + std::to_string(*rank) : std::string();
  if (got.shape() != want.shape()) {
    return what + on_rank + " is " + format_shape(got.shape()) + " but " + dense_op + " gives " +
           format_shape(want.shape());
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    // The object representations compared as bytes (NaN payloads and the sign of zero count).
    using Bytes = std::array<unsigned char, sizeof(T)>;
    if (std::bit_cast<Bytes>(got[i]) != std::bit_cast<Bytes>(want[i])) {
      // One message, then return: the concatenation is not in a loop that goes on.
      // NOLINTBEGIN(performance-inefficient-string-concatenation)
      return what + format_shape(detail::unravel(i, got.shape())) + on_rank + " is " +
             std::to_string(static_cast<double>(got[i])) + " but " + dense_op + " in " +
             std::string(name(dtype_of<T>)) + " gives " +
             std::to_string(static_cast<double>(want[i])) + ": not bit-identical";
      // NOLINTEND(performance-inefficient-string-concatenation)
    }
  }
  return {};
}

}  // namespace shardcheck::check
