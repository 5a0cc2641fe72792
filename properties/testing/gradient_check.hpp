// What the finite-difference checks of the references' gradients share (properties/reference/
// and the families' reference checks): the central difference and its comparison with the
// analytic gradient (reference/finite_difference.hpp), and the high-precision scalar.
#pragma once

#include "reference/finite_difference.hpp"
#include "reference/format.hpp"
#include "reference/precision.hpp"

namespace shardcheck::props::ref {

using reference::central_difference_gradient;
using reference::compare_gradient;
using reference::Evaluation;
using reference::gamma;
using reference::hp;
using reference::to_hp;

// The unit roundoff of hp (113 bits).
inline const hp u_hp = reference::unit_roundoff_of<hp>();

}  // namespace shardcheck::props::ref
