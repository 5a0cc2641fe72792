// What the finite-difference checks of the references' gradients share (properties/reference/
// and the families' reference checks): the central difference and its comparison with the
// analytic gradient (reference/finite_difference.hpp), the high-precision scalar, and θ, the
// point the differences perturb, made of the inputs and back.
#pragma once

#include "reference/finite_difference.hpp"
#include "reference/format.hpp"
#include "reference/precision.hpp"
#include "tensor/tensor.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <utility>
#include <vector>

namespace shardcheck::props::ref {

using reference::central_difference_gradient;
using reference::compare_gradient;
using reference::Evaluation;
using reference::gamma;
using reference::hp;
using reference::to_hp;

// The unit roundoff of hp (113 bits).
inline const hp u_hp = reference::unit_roundoff_of<hp>();

// θ: the elements of `parts`, one part after another, as one flat tensor (the analytic gradient
// is the parts' gradients in the same order).
inline Tensor<hp> pack(std::initializer_list<const Tensor<hp>*> parts) {
  std::vector<hp> v;
  for (const auto* p : parts) v.insert(v.end(), p->values().begin(), p->values().end());
  const std::size_t n = v.size();  // not in the call: argument evaluation order is unspecified
  return Tensor<hp>({n}, std::move(v));
}

// The parts back from θ, in pack's order: copies of `like` (their shapes, an empty part empty)
// holding θ's elements.
template <std::size_t N>
std::array<Tensor<hp>, N> unpack(const Tensor<hp>& theta,
                                 const std::array<const Tensor<hp>*, N>& like) {
  std::array<Tensor<hp>, N> parts;
  std::size_t at = 0;
  for (std::size_t k = 0; k < N; ++k) {
    parts[k] = *like[k];
    std::copy_n(theta.data() + at, parts[k].size(), parts[k].data());
    at += parts[k].size();
  }
  return parts;
}

}  // namespace shardcheck::props::ref
