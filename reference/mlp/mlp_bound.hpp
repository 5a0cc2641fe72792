// The elementwise a-priori bound of every MLP output under lib/ops/mlp/mlp.hpp's arithmetic,
// in functions named for the derivation's steps (docs/mlp.md, "The bound"):
//   up_projection_error        h = x·w_upᵀ + b_up: exact inputs, one dot per element on one
//                              rank (bounds.hpp's element_bound)
//   activation_error           a = f(ĥ) from the rounded ĥ: |f'(h)|·e_h + S2/2·e_h² (Taylor, S2 ≥
//                              sup|f''|), plus the evaluation in A (activation.hpp) and the
//                              rounding to T; swiglu: silu's error times |u| + e_u, plus
//                              |silu(g)|·e_u
//   down_projection_error      y = â·w_downᵀ + b_down over the ffn axis split into the ranks'
//                              parts: the dot's own rounding (element_bound on the perturbed
//                              magnitudes) plus the propagated Σ|w|·e_a (perturbed_dot_bound)
//   activation_grad_error      dh = f'(ĥ)⊙d̂a: |f'(h)|·e_da + S2·e_h·(|da| + e_da) (the f''
//                              term) plus the evaluation and the rounding; swiglu's products of
//                              three perturbed factors
//   the backward's dots        da (exact inputs, one part), dx = d̂h·w_up over the ffn axis in
//                              the ranks' parts, dw_up = d̂hᵀ·x, db_up = Σ d̂h, dw_down = dyᵀ·â
//                              (one part each, over tokens), db_down = Σ dy (exact inputs)
// Every step's inputs are the previous steps' computed values, so each bound is evaluated at
// magnitudes raised by the previous errors (|v̂| ≤ |v| + e); all the formulas are nondecreasing
// in them. Overflow is outside the derivation: the suite draws values that cannot overflow.
//
// Two arithmetics. The projections (every dot and sum above: up, down, da, dx, the weight and
// bias gradients) take `arith`, whose accumulator A may be a declared one (docs/mlp.md, "A
// declared accumulator"): the storage format itself for 16-bit accumulation, as torch's CPU
// matmuls of small bfloat16 operands do, or a wider one. Each of those dots is then bounded by
// element_bound with that A, exactly as a linear layer's (bounds.hpp: γ_n(u_A) for a dot of n
// terms, products not exact in A when 2·p_T > p_A, the per-part rounding to T vanishing when
// T = A; Higham, ASNA 2nd ed., §3.1), so nothing of the derivation changes but u_A and η_A. The
// elementwise steps (activation_error, activation_grad_error) take `elementwise`, acc_t<T> unless
// given: the kernels that accumulate their matmuls in 16 bits still evaluate gelu and silu in
// float and round once to T (torch's bfloat16 CPU activations do), and value_eval_error's
// constants are checked for float and double evaluations only (mlp_activation_contract_tests).
#pragma once

#include "reference/bounds.hpp"
#include "reference/linear/linear.hpp"
#include "reference/mlp/mlp.hpp"

#include <optional>
#include <span>
#include <vector>

namespace shardcheck::reference {

// One part of a dot whose factors carry errors: |â − a| ≤ e_a, |b̂ − b| ≤ e_b.
template <class R = hp>
struct PerturbedPart {
  R partial{0};  // Σ a·b, the exact inputs' partial
  R abs_sum{0};  // Σ (|a| + e_a)·(|b| + e_b) ≥ Σ |â·b̂|
  R prop{0};     // Σ (|a| + e_a)·(|b| + e_b) − |a·b| ≥ |Σ â·b̂ − Σ a·b|
  std::size_t length = 0;
  void add(const R& a, const R& ea, const R& b, const R& eb) {
    using std::abs;
    const R m = (abs(a) + ea) * (abs(b) + eb);
    partial += a * b;
    abs_sum += m;
    prop += m - abs(a * b);
    ++length;
  }
};

// The bound of a dot computed from perturbed factors: the computed dot of the computed factors
// is within element_bound of their exact dot (its magnitudes raised: |ŝ_r| ≤ |s_r| + prop_r),
// which is within Σ prop_r of the exact inputs' dot; the bias's rounding sees |ŝ + b| ≤ |s + b| +
// Σ prop_r, and element_bound's |s' + b| is at least |s + b| − Σ prop_r: 2·u'_T·Σ prop_r more.
template <class R = hp>
R perturbed_dot_bound(std::span<const PerturbedPart<R>> parts, const R* bias,
                      const Arithmetic& arith, Operands operands = Operands::general) {
  using std::abs;
  std::vector<PartTerms<R>> raised;
  R prop(0);
  for (const auto& p : parts) {
    const R mag = abs(p.partial) + p.prop;
    raised.push_back({p.partial < 0 ? R(-mag) : mag, p.abs_sum, p.length});
    prop += p.prop;
  }
  const auto b = element_bound<R>(raised, bias, arith, operands);
  const R u_t = unit_roundoff<R>(arith.storage);
  const R margin = 1 + gamma<R>(4 * (parts.size() + 2), unit_roundoff_of<R>());
  return (b.bound + prop * (1 + (bias != nullptr ? 2 * u_t : R(0)))) * margin;
}

// The PerturbedPart terms of every element of a·b, a [m, k] and b [k, n] read through layouts
// over row-major buffers (contract.hpp), with elementwise error bounds e_a (a's shape and layout;
// empty: a is exact) and e_b, the contracted axis cut into `parts`: out[r·m·n + i·n + j] is part r
// of element (i, j). Two paths (contraction_path.hpp):
//   plain  PerturbedPart::add per product, c ascending in each part (the 113-bit loops);
//   fast   two contractions (contract.hpp): C1 = a·b gives partial_r and A_r ≈ Σ|a·b|, and
//          C2 = (|a| + e_a)·(|b| + e_b), nonnegative factors, gives S_r ≈ Σ (|a| + e_a)(|b| + e_b).
//          Each is within g = gamma_{k_r+q}(u_R) relative of its exact value: the contraction's
//          gamma_{k_r} (contract.hpp; R-valued operands included) and one rounding more for each
//          of the q ≤ 2 factors |a| + e_a, |b| + e_b with a nonempty error, so with
//          S_exact ≤ S_r/(1 − g) ≤ S_r·(1 + 2g) (g ≤ 1/2)
//            abs_sum = S_r·(1 + 2g)   and   prop = max(S_r − A_r, 0)·(1 + u_R) + 2g·(S_r + A_r)
//          are upper bounds of the exact Σ (|a| + e_a)(|b| + e_b) and of its excess over Σ|a·b|
//          (to first order in g for prop; the last roundings in R are in perturbed_dot_bound's
//          margin, as the plain path's are).
template <class R>
std::vector<PerturbedPart<R>> perturbed_parts(const Tensor<R>& a, const Tensor<R>& e_a,
                                              const Layout& la, const Tensor<R>& b,
                                              const Tensor<R>& e_b, const Layout& lb,
                                              std::span<const std::size_t> parts,
                                              ContractionPath path = default_contraction_path()) {
  using std::abs;
  const std::size_t m = la.rows, n = lb.cols, mn = m * n;
  std::vector<PerturbedPart<R>> out(parts.size() * mn);
  auto at = [](const Tensor<R>& t, const Layout& l, std::size_t i, std::size_t c) -> R {
    return t.empty() ? R(0)
                     : t.data()[static_cast<std::ptrdiff_t>(i) * l.row_stride +
                                static_cast<std::ptrdiff_t>(c) * l.col_stride];
  };
  const std::size_t k = la.cols;
  if (resolve_path(path, m, n, k, false, false) == ContractionPath::plain) {
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        std::size_t c = 0;
        for (std::size_t r = 0; r < parts.size(); ++r) {
          PerturbedPart<R>& p = out[r * mn + i * n + j];
          for (std::size_t q = 0; q < parts[r]; ++q, ++c) {
            p.add(at(a, la, i, c), at(e_a, la, i, c), at(b, lb, c, j), at(e_b, lb, c, j));
          }
        }
      }
    }
    return out;
  }
  auto raised = [](const Tensor<R>& t, const Tensor<R>& e) {  // |t| + e, elementwise
    Tensor<R> r(t.shape());
    for (std::size_t x = 0; x < t.size(); ++x) r[x] = abs(t[x]) + (e.empty() ? R(0) : e[x]);
    return r;
  };
  // C1's abs sum A is subtracted below, so it must be within g of Σ|ab| (AbsSums::exact); C2's
  // is not used.
  const auto c1 = contraction<R>(a, la, b, lb, parts, path, AbsSums::exact);
  const auto c2 = contraction<R>(raised(a, e_a), la, raised(b, e_b), lb, parts, path);
  const R u = unit_roundoff_of<R>();
  const std::size_t rounded_factors = (e_a.empty() ? 0 : 1) + (e_b.empty() ? 0 : 1);
  for (std::size_t r = 0; r < parts.size(); ++r) {
    const R g = gamma<R>(parts[r] + rounded_factors, u);
    for (std::size_t e = 0; e < mn; ++e) {
      const PartTerms<R>& t1 = c1.terms[r * mn + e];
      const R& s = c2.terms[r * mn + e].partial;
      const R& a_sum = t1.abs_sum;
      const R excess = s - a_sum;
      out[r * mn + e] = {t1.partial, s * (1 + 2 * g),
                         (excess > 0 ? excess : R(0)) * (1 + u) + 2 * g * (s + a_sum), parts[r]};
    }
  }
  return out;
}

// The bounds of out[i, j] = Σ_c â[i, c]·b̂[c, j] (+ bias[j] when `bias` is not empty), each a
// perturbed dot whose contracted axis is cut into `parts` (the ranks' pieces, in rank order):
// perturbed_parts' terms, then perturbed_dot_bound per element.
template <class R>
Tensor<R> dot_over_parts_bounds(const Tensor<R>& a, const Tensor<R>& e_a, const Layout& la,
                                const Tensor<R>& b, const Tensor<R>& e_b, const Layout& lb,
                                const std::vector<std::size_t>& parts, const Tensor<R>& bias,
                                const Arithmetic& arith,
                                ContractionPath path = default_contraction_path()) {
  const std::size_t m = la.rows, n = lb.cols, mn = m * n;
  const auto terms = perturbed_parts<R>(a, e_a, la, b, e_b, lb, parts, path);
  Tensor<R> e({m, n});
  std::vector<PerturbedPart<R>> p(parts.size());
  for (std::size_t x = 0; x < mn; ++x) {
    for (std::size_t r = 0; r < parts.size(); ++r) p[r] = terms[r * mn + x];
    e[x] = perturbed_dot_bound<R>(p, bias.empty() ? nullptr : &bias[x % n], arith);
  }
  return e;
}

namespace detail {
// max(u'_T·m, eta_T/2), or 0 when T = A: the final rounding of a value of magnitude ≤ m.
template <class R>
R rounding_to_storage(const R& m, const Arithmetic& arith) {
  if (arith.storage == arith.accumulate) return R(0);
  const R u = unit_roundoff<R>(arith.storage);
  return max_of<R>(u / (1 + u) * m, smallest_subnormal<R>(arith.storage) / 2);
}
// One product of perturbed factors computed in A and rounded once to T: `perturbed` is the
// product of the factors' bounds (|x̂| ≤ |x| + e_x), `exact` the exact product's magnitude. Its
// error: the perturbation perturbed − exact, the product's rounding in A (u_A relative, and
// eta_A/2 absolute where it underflows), and the rounding to T of a value ≤ exact + those.
template <class R>
R rounded_product_error(const R& perturbed, const R& exact, const Arithmetic& arith) {
  const R u_a = unit_roundoff<R>(arith.accumulate);
  const R eta_a = smallest_subnormal<R>(arith.accumulate);
  const R err = perturbed - exact + u_a * perturbed + eta_a / 2;
  return err + rounding_to_storage(R(exact + err), arith);
}
template <class R>
Tensor<R> bounds_of(const Contraction<R>& c, const Arithmetic& arith) {
  return bounds<R>(c, arith).bound;
}
}  // namespace detail

// e_h: h = x·w_upᵀ + b_up, one part (each rank holds the whole hidden axis).
template <class R = hp>
Tensor<R> up_projection_error(const Tensor<R>& x, const Tensor<R>& w_up, const Tensor<R>& b_up,
                              const Arithmetic& arith,
                              ContractionPath path = default_contraction_path()) {
  return detail::bounds_of(reference::linear<R>(x, w_up, b_up, {}, path), arith);
}

// |f_A(ĥ) − f(h)| for gelu, gelu_tanh or swiglu's silu with |ĥ − h| ≤ e: Taylor to first order
// with the remainder bounded by S2 ≥ sup|f''|, plus f's evaluation in A.
template <class R = hp>
R value_error(Activation act, const R& z, const R& e, const Format& acc) {
  using std::abs;
  return abs(activation_grad(act, z)) * e + second_derivative_bound<R>(act) / 2 * e * e +
         value_eval_error(act, R(abs(z) + e), acc);
}

// e_a: a = f(ĥ) (swiglu: silu(ĝ)·û), evaluated in A and rounded once to T.
template <class R = hp>
Tensor<R> activation_error(Activation act, const Tensor<R>& h, const Tensor<R>& e_h,
                           const Arithmetic& arith) {
  using std::abs;
  const std::size_t n = h.dim(0), kf = h.dim(1), f = kf / mlp_up_rows(act);
  Tensor<R> e({n, f});
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t j = 0; j < f; ++j) {
      const R& z = h(t, j);
      const R ev = value_error(act, z, e_h(t, j), arith.accumulate);
      if (act != Activation::swiglu) {
        e(t, j) = ev + detail::rounding_to_storage(R(abs(activation_value(act, z)) + ev), arith);
        continue;
      }
      const R& up = h(t, f + j);
      const R& eu = e_h(t, f + j);
      const R s = silu(z);
      const R& es = ev;  // |silu_A(ĝ) − silu(g)|
      // ŝ·û − s·u, plus the product's rounding in A, then the rounding to T.
      e(t, j) =
          detail::rounded_product_error<R>((abs(s) + es) * (abs(up) + eu), R(abs(s * up)), arith);
    }
  }
  return e;
}

// The bound of a perturbed dot over the ffn axis in the ranks' parts, for y and dx.
//   y[t, o]  = Σ_j â[t, j]·w_down[o, j] + b_down[o]: parts = the ranks' ffn features.
// `ffn_parts`: F's shard sizes in rank order (empty: one part).
template <class R = hp>
Tensor<R> down_projection_error(const Tensor<R>& a, const Tensor<R>& e_a, const Tensor<R>& w_down,
                                const Tensor<R>& b_down, std::span<const std::size_t> ffn_parts,
                                const Arithmetic& arith,
                                ContractionPath path = default_contraction_path()) {
  const std::size_t n = a.dim(0), f = a.dim(1), hid = w_down.dim(0);
  const auto parts = normalize_parts(ffn_parts, f, "ffn (mlp down projection)");
  return dot_over_parts_bounds<R>(a, e_a, row_major_layout(n, f), w_down, Tensor<R>(),
                                  transposed_layout(f, hid), parts, b_down, arith, path);
}

// e_dh: dh = f'(ĥ)⊙d̂a (swiglu: dĝ = d̂a·û·silu'(ĝ), dû = d̂a·silu(ĝ)), in A, rounded once to T.
template <class R = hp>
Tensor<R> activation_grad_error(Activation act, const Tensor<R>& h, const Tensor<R>& e_h,
                                const Tensor<R>& da, const Tensor<R>& e_da,
                                const Arithmetic& arith) {
  using std::abs;
  const std::size_t n = h.dim(0), kf = h.dim(1), f = kf / mlp_up_rows(act);
  const R s2 = second_derivative_bound<R>(act);
  const R u_a = unit_roundoff<R>(arith.accumulate);
  const R eta_a = smallest_subnormal<R>(arith.accumulate);
  Tensor<R> e({n, kf});
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t j = 0; j < f; ++j) {
      const R& z = h(t, j);
      const R& ez = e_h(t, j);
      const R d = abs(da(t, j)) + e_da(t, j);  // ≥ |d̂a|
      const R fp = abs(activation_grad(act, z));
      // |f'_A(ĝ) − f'(g)| ≤ S2·e (the f'' term) + the evaluation of f' in A.
      const R efp = s2 * ez + grad_eval_error(act, R(abs(z) + ez), arith.accumulate);
      if (act != Activation::swiglu) {
        // (fp + efp)·d − fp·|da|, the product's rounding in A, then to T.
        e(t, j) = detail::rounded_product_error<R>((fp + efp) * d, R(fp * abs(da(t, j))), arith);
        continue;
      }
      const R& up = h(t, f + j);
      const R uu = abs(up) + e_h(t, f + j);
      // dg: three perturbed factors d̂a·û·silu'_A(ĝ), two products in A.
      const R prod_g = d * uu * (fp + efp);
      const R exact_g = abs(da(t, j) * up) * fp;
      // The first product's underflow (eta_A/2) is scaled by |silu'| ≤ 1.1, the second's is not.
      const R err_g = prod_g - exact_g + 2 * u_a * prod_g * (1 + u_a) + eta_a * 21 / 20;
      e(t, j) = err_g + detail::rounding_to_storage(R(exact_g + err_g), arith);
      // du: d̂a·silu_A(ĝ), one product in A.
      const R s = abs(silu(z));
      const R es = value_error(act, z, ez, arith.accumulate);
      e(t, f + j) = detail::rounded_product_error<R>(d * (s + es), R(abs(da(t, j)) * s), arith);
    }
  }
  return e;
}

template <class R = hp>
struct MlpBounds {
  Tensor<R> y, dx, dw_up, db_up, dw_down, db_down;  // the biases' empty without bias
};

// Every output's bound for the case: `ffn_parts` the ranks' shares of F (ParallelMLP's split;
// empty: one rank), `arith` the storage and accumulator formats of the projections, `path` the
// contraction path of every product and perturbed dot (contraction_path.hpp), `elementwise` the
// arithmetic of the activation and its gradient (absent: `arith`). Values from
// mlp()/mlp_backward().
template <HighPrecision R = hp>
MlpBounds<R> mlp_bounds(const Tensor<R>& x, const Tensor<R>& w_up, const Tensor<R>& b_up,
                        const Tensor<R>& w_down, const Tensor<R>& b_down, const Tensor<R>& dy,
                        Activation act, const MlpForward<R>& fwd, const MlpGrads<R>& grads,
                        std::span<const std::size_t> ffn_parts, const Arithmetic& arith,
                        ContractionPath path = default_contraction_path(),
                        const std::optional<Arithmetic>& elementwise = std::nullopt) {
  const Arithmetic& ew = elementwise ? *elementwise : arith;
  const std::size_t n = x.dim(0), hid = x.dim(1), f = w_down.dim(1), k = mlp_up_rows(act);
  const bool has_bias = !b_down.empty();
  const auto parts = normalize_parts(ffn_parts, f, "ffn (mlp)");
  MlpBounds<R> out;
  const Tensor<R> e_h = up_projection_error(x, w_up, b_up, arith, path);
  const Tensor<R> e_a = activation_error(act, fwd.h, e_h, ew);
  out.y = down_projection_error(fwd.a, e_a, w_down, b_down, parts, arith, path);

  // da and db_down: exact inputs (dy, w_down), one part each.
  const auto lin = reference::linear_backward<R>(fwd.a, w_down, has_bias, dy, {}, path);
  const Tensor<R> e_da = detail::bounds_of(lin.dx, arith);
  if (has_bias) out.db_down = detail::bounds_of(lin.db, arith);
  const Tensor<R> e_dh = activation_grad_error(act, fwd.h, e_h, grads.da, e_da, ew);

  // dx over the fused ffn axis: rank r's part is its gate and up columns, so the axis is read in
  // rank order (rank r's k·F_r columns together: gate then up), through copies of dh, e_dh and
  // w_up with their ffn axis permuted that way.
  const std::size_t kf = k * f;
  std::vector<std::size_t> order, dx_parts;
  for (std::size_t r = 0, off = 0; r < parts.size(); off += parts[r], ++r) {
    for (std::size_t c = 0; c < k; ++c) {
      for (std::size_t q = 0; q < parts[r]; ++q) order.push_back(c * f + off + q);
    }
    dx_parts.push_back(k * parts[r]);
  }
  Tensor<R> dh_p({n, kf}), e_dh_p({n, kf}), w_up_p({kf, hid});
  for (std::size_t c = 0; c < kf; ++c) {
    for (std::size_t t = 0; t < n; ++t) {
      dh_p(t, c) = grads.dh(t, order[c]);
      e_dh_p(t, c) = e_dh(t, order[c]);
    }
    for (std::size_t i = 0; i < hid; ++i) w_up_p(c, i) = w_up(order[c], i);
  }
  out.dx = dot_over_parts_bounds<R>(dh_p, e_dh_p, row_major_layout(n, kf), w_up_p, Tensor<R>(),
                                    row_major_layout(kf, hid), dx_parts, Tensor<R>(), arith, path);
  // Sums over tokens, one part: dw_up = d̂hᵀ·x, db_up = Σ d̂h, dw_down = dyᵀ·â.
  const std::vector<std::size_t> all_tokens = {n};
  out.dw_up =
      dot_over_parts_bounds<R>(grads.dh, e_dh, transposed_layout(kf, n), x, Tensor<R>(),
                               row_major_layout(n, hid), all_tokens, Tensor<R>(), arith, path);
  out.dw_down =
      dot_over_parts_bounds<R>(dy, Tensor<R>(), transposed_layout(hid, n), fwd.a, e_a,
                               row_major_layout(n, f), all_tokens, Tensor<R>(), arith, path);
  if (has_bias) {
    out.db_up = Tensor<R>({kf});
    for (std::size_t j = 0; j < kf; ++j) {
      PerturbedPart<R> q;
      for (std::size_t t = 0; t < n; ++t) q.add(grads.dh(t, j), e_dh(t, j), R(1), R(0));
      out.db_up[j] = perturbed_dot_bound<R>({&q, 1}, nullptr, arith, Operands::unit);
    }
  }
  return out;
}

}  // namespace shardcheck::reference
