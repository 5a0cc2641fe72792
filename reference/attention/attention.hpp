// Scaled dot-product attention (grouped-query heads, masks, key padding) in the high-precision
// scalar R: the dense reference of lib/ops/attention/attention.hpp and its a-priori elementwise
// error bounds.
//   attention_definition.hpp  the definition in plain loops: attention_forward_loops (s, lse,
//                             out) and attention_backward_loops (FlashAttention-2's D = dout·out
//                             form); the config they take
//   attention_products.hpp    the same formulas with the per-head matrix products on the fast
//                             contraction path, and the entry points attention_forward and
//                             attention_backward (named and ordered as the library's dense op),
//                             which take the path (contraction/contraction_path.hpp)
//   attention_bound.hpp       the bound's derivation, steps (1)–(7), one function of
//                             detail::AttentionModel per step (its loops: the plain path)
//   attention_bound_products.hpp  step (7): the bound's sums of magnitudes as contractions
//                             (the fast and automatic paths), and detail::attention_model,
//                             which picks the evaluation by the path
//   here                      the bounds' entry points: attention_bounds (an implementation's
//                             error, for any partition of the keys and queries) and
//                             attention_reference_error (R's own)
#pragma once

#include "reference/attention/attention_bound.hpp"
#include "reference/attention/attention_bound_products.hpp"
#include "reference/attention/attention_products.hpp"
#include "reference/bounds.hpp"
#include "reference/precision.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace shardcheck::reference {

// ================================================================ the bounds

// Elementwise bounds on |implementation − reference| for every result, for an implementation of
// lib/ops/attention/attention.hpp's contract in `arith` (storage T, accumulator A), with the keys
// (and the queries, for dk/dv) split into at most opt.parts blocks, and inputs within opt's error
// bounds of q, k, v, dout, the weights formed as opt.exp says (natural exp, or the exp2 contract).
// dout empty: forward bounds only. Derivation: attention_bound.hpp. `path`: the evaluation
// (and the reference values it is evaluated at): plain, the loops; fast or automatic (the
// default), the sums as contractions (step (7)), which differ from the loops' by a relative 2^-50
// or less and are never below the exact formula.
// @pre shapes as attention_forward; error tensors empty or of their input's shape.
template <HighPrecision R = hp>
AttentionBounds<R> attention_bounds(const AttentionConfig& cfg, const Tensor<R>& q,
                                    const Tensor<R>& k, const Tensor<R>& v, const Tensor<R>& dout,
                                    const Arithmetic& arith,
                                    const AttentionBoundOptions<R>& opt = {},
                                    ContractionPath path = default_contraction_path()) {
  using std::abs;
  auto check = [](const Tensor<R>& e, const Tensor<R>& x, const char* name) {
    if (!e.empty() && e.shape() != x.shape()) {
      throw std::invalid_argument(std::string("reference::attention_bounds: ") + name +
                                  " must be empty or of its input's shape");
    }
  };
  check(opt.q_error, q, "q_error");
  check(opt.k_error, k, "k_error");
  check(opt.v_error, v, "v_error");
  if (!dout.empty()) check(opt.dout_error, dout, "dout_error");
  detail::ErrorModel<R> em;
  em.u = unit_roundoff<R>(arith.accumulate);
  em.eta = smallest_subnormal<R>(arith.accumulate);
  em.u_t = unit_roundoff<R>(arith.storage);
  em.eta_t = smallest_subnormal<R>(arith.storage);
  em.round_t = !(arith.storage == arith.accumulate);
  const R sigma = R(score_scale(cfg));
  if (arith.accumulate == float64_format) {
    em.scale_error = 0;  // σ is a double
  } else if (arith.accumulate == float32_format) {
    em.scale_error = abs(to_hp<R>(round_to<float>(sigma)) - sigma);
  } else {
    em.scale_error = em.u * abs(sigma) + em.eta / 2;
  }
  if (opt.exp == SoftmaxExp::base2) {  // attention_bound.hpp, "the exp2 contract": (1')
    if (!(sigma > 0)) {
      throw std::invalid_argument(
          "reference::attention_bounds: the exp2 contract needs a positive scale (its kernels "
          "take the raw scores' max as the scaled scores')");
    }
    em.exp2 = true;
    em.mu = smallest_normal<R>(arith.accumulate);
    using std::log;
    const R log2e = 1 / log(R(2));
    em.scale_log2_error =
        log2e * (em.scale_error + 2 * em.u * (abs(sigma) + em.scale_error)) * (1 + em.u);
  }
  em.parts = opt.parts;
  em.exp2_lse = opt.exp2_lse;
  em.online = opt.online;
  em.key_block = opt.key_block;
  em.eq = &opt.q_error;
  em.ek = &opt.k_error;
  em.ev = &opt.v_error;
  em.edo = &opt.dout_error;
  return detail::attention_model<R>(cfg, q, k, v, dout, em, R(1) + pow2<R>(-40), path);
}

// Bounds on the REFERENCE's own error |reference − exact| (its steps (1)–(4) with u = u_R, or
// 16·u_R for the values of the fast or automatic `path` (attention_products.hpp, "Rounding"); no
// input errors, nothing rounded to a storage type; exp and log of R assumed within 2u_R), for the
// finite-difference checks and the suites. Doubled: the magnitudes are themselves R values.
// Evaluated by `path` as attention_bounds is.
template <HighPrecision R = hp>
AttentionBounds<R> attention_reference_error(const AttentionConfig& cfg, const Tensor<R>& q,
                                             const Tensor<R>& k, const Tensor<R>& v,
                                             const Tensor<R>& dout,
                                             ContractionPath path = default_contraction_path()) {
  detail::ErrorModel<R> em;
  em.u = unit_roundoff_of<R>() * (path != ContractionPath::plain ? 16 : 1);
  return detail::attention_model<R>(cfg, q, k, v, dout, em, R(2), path);
}

}  // namespace shardcheck::reference
