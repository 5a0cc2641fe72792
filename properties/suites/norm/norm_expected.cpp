#include "suites/norm/norm_case.hpp"

#include "engine/instantiate.hpp"
#include "reference/norm/norm.hpp"

namespace shardcheck::check {
namespace {

using reference::hp;
using reference::Propagator;
using reference::Tracked;
using reference::TrackedTensor;

ExpectedTensor expect(const TrackedTensor<hp>& t, const Propagator<hp>& P) {
  return {t.values(), t.bounds(P)};
}

// out[i, j] = Σ_k a[i, k]·b[j, k] (a [m, k], b [n, k] given with strides), k cut into `parts`:
// per part a sum in A rounded to T, parts summed in T. One part: a dot rounded once.
struct Operand {
  const TrackedTensor<hp>* t;
  bool transposed;  // read t(k, i) instead of t(i, k)
  const Tracked<hp>& at(std::size_t i, std::size_t k) const {
    return transposed ? (*t)(k, i) : (*t)(i, k);
  }
};

TrackedTensor<hp> contract(const Propagator<hp>& P, Operand a, Operand b, std::size_t m,
                           std::size_t n, const std::vector<std::size_t>& parts) {
  TrackedTensor<hp> out(Shape{m, n});
  std::vector<Tracked<hp>> terms, partials;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      partials.clear();
      std::size_t k0 = 0;
      for (const std::size_t len : parts) {
        terms.clear();
        for (std::size_t k = k0; k < k0 + len; ++k) terms.push_back(P.mul(a.at(i, k), b.at(j, k)));
        partials.push_back(P.to_storage(P.sum(terms)));
        k0 += len;
      }
      out(i, j) = parts.size() == 1 ? partials[0] : P.sum_in_storage(partials);
    }
  }
  return out;
}

}  // namespace

template <class T>
NormExpected expected(const NormCase& c, const NormData<T>& d) {
  using A = acc_t<T>;
  const auto arith = reference::arithmetic_of<T>();
  const Propagator<hp> P(arith);
  const auto kind = c.kind();
  const hp eps = reference::to_hp<hp>(static_cast<A>(c.norm().norm.eps));
  const auto token_parts = split_sizes(c.norm().token_split, c.tokens(), c.world);
  const auto gamma = reference::to_hp<hp>(d.gamma);
  const auto beta = reference::to_hp<hp>(d.beta);
  NormExpected e;
  if (c.op == NormOp::norm) {
    // The definition's values, the propagation's bounds.
    auto r =
        reference::norm_expected<hp>(kind, reference::to_hp<hp>(d.x), gamma, beta,
                                     reference::to_hp<hp>(d.dy), eps, arith, token_parts, c.forms);
    e.y = {std::move(r.y), std::move(r.y_bound)};
    e.dx = {std::move(r.dx), std::move(r.dx_bound)};
    e.dgamma = {std::move(r.dgamma), std::move(r.dgamma_bound)};
    if (!r.dbeta.empty()) e.dbeta = {std::move(r.dbeta), std::move(r.dbeta_bound)};
    return e;
  }
  // The Megatron block: the bound's propagation through the whole block, which carries the
  // values in R (the definition's, for the norm: norm_reference_props checks it), once per
  // evaluation order of the norm the case covers (c.forms; empty: the library's), each element's
  // bound the largest of theirs (the values are the same in every order).
  const auto x = TrackedTensor<hp>::exact(reference::to_hp<hp>(d.x));
  const auto dy = TrackedTensor<hp>::exact(reference::to_hp<hp>(d.dy));
  const std::size_t tokens = c.tokens(), h = c.hidden, ffn = c.block.ffn;
  const auto ffn_parts = split_sizes(c.block.ffn_split, ffn, c.world);
  const std::vector<std::size_t> whole_h{h}, whole_t{tokens};
  const auto w1 = TrackedTensor<hp>::exact(reference::to_hp<hp>(d.w1));  // [ffn, h]
  const auto w2 = TrackedTensor<hp>::exact(reference::to_hp<hp>(d.w2));  // [h, ffn]
  const auto block = [&](const reference::NormForm& form) {
    NormExpected o;
    const auto z = reference::propagate_norm_forward<hp>(kind, x, gamma, beta, eps, P, form).y;
    // a [tokens, ffn] = z·W1ᵀ: one dot over hidden.
    const auto a = contract(P, {&z, false}, {&w1, false}, tokens, ffn, whole_h);
    // y [tokens, h] = a·W2ᵀ over ffn, split by the ffn shards.
    const auto y = contract(P, {&a, false}, {&w2, false}, tokens, h, ffn_parts);
    // da [tokens, ffn] = dy·W2: one dot over hidden (W2 read transposed: W2ᵀ[f, j] = W2[j, f]).
    const auto da = contract(P, {&dy, false}, {&w2, true}, tokens, ffn, whole_h);
    // dW2 [h, ffn] = dyᵀ·a over tokens; dW1 [ffn, h] = daᵀ·z over tokens.
    const auto dw2 = contract(P, {&dy, true}, {&a, true}, h, ffn, whole_t);
    const auto dw1 = contract(P, {&da, true}, {&z, true}, ffn, h, whole_t);
    // dz [tokens, h] = da·W1 over ffn, split by the ffn shards (reduce_scatter of partials).
    const auto dz = contract(P, {&da, false}, {&w1, true}, tokens, h, ffn_parts);
    const auto b =
        reference::propagate_norm_backward<hp>(kind, x, gamma, dz, eps, P, token_parts, form);
    o.y = expect(y, P);
    o.dx = expect(b.dx, P);
    o.dgamma = expect(b.dgamma, P);
    if (!b.dbeta.empty()) o.dbeta = expect(b.dbeta, P);
    o.dw1 = expect(dw1, P);
    o.dw2 = expect(dw2, P);
    return o;
  };
  const std::vector<reference::NormForm> library(1);
  bool first = true;
  for (const auto& form : c.forms.empty() ? library : c.forms) {
    auto o = block(form);
    if (first) {
      e = std::move(o);
      first = false;
      continue;
    }
    for (auto [into, from] :
         {std::pair{&e.y, &o.y}, std::pair{&e.dx, &o.dx}, std::pair{&e.dgamma, &o.dgamma},
          std::pair{&e.dbeta, &o.dbeta}, std::pair{&e.dw1, &o.dw1}, std::pair{&e.dw2, &o.dw2}}) {
      for (std::size_t k = 0; k < from->bound.size(); ++k) {
        if (into->bound[k] < from->bound[k]) into->bound[k] = from->bound[k];
      }
    }
  }
  return e;
}

SHARDCHECK_INSTANTIATE_EXPECTED(NormCase, NormData, NormExpected)

}  // namespace shardcheck::check
