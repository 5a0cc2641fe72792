#include "suites/mlp/mlp_case.hpp"

#include "engine/instantiate.hpp"
#include "reference/mlp/mlp_bound.hpp"

namespace shardcheck::check {
namespace {

using reference::hp;

// Rows [first, first + count) of a [rows, ...] tensor in hp.
Tensor<hp> hp_rows(const Tensor<hp>& t, std::size_t first, std::size_t count) {
  Shape shape = t.shape();
  const std::size_t row = t.size() / shape[0];
  shape[0] = count;
  Tensor<hp> out(shape);
  for (std::size_t i = 0; i < count * row; ++i) out[i] = t[first * row + i];
  return out;
}

// The fused fc1's gate and up rows (gate empty unless swiglu).
void unfuse(const Tensor<hp>& value, const Tensor<hp>& bound, Activation act, std::size_t f,
            ExpectedTensor& gate, ExpectedTensor& up) {
  if (value.empty()) return;
  if (act != Activation::swiglu) {
    up = {value, bound};
    return;
  }
  gate = {hp_rows(value, 0, f), hp_rows(bound, 0, f)};
  up = {hp_rows(value, f, f), hp_rows(bound, f, f)};
}

}  // namespace

template <class T>
MlpExpected expected(const MlpCase& c, const MlpData<T>& d) {
  using reference::to_hp;
  const Activation act = c.cfg.activation;
  const auto x = to_hp<hp>(d.x), w_up = to_hp<hp>(d.w_up), b_up = to_hp<hp>(d.b_up),
             w_down = to_hp<hp>(d.w_down), b_down = to_hp<hp>(d.b_down), dy = to_hp<hp>(d.dy);
  const auto fwd = reference::mlp<hp>(x, w_up, b_up, w_down, b_down, act);
  const auto g = reference::mlp_backward<hp>(x, w_up, w_down, fwd, c.has_bias, dy, act);
  const auto parts = split_sizes(c.cfg.ffn_split, c.ffn(), c.world);
  // The projections in acc_t<T> or the declared accumulator; the activation in acc_t<T>.
  const auto elementwise = reference::arithmetic_of<T>();
  const reference::Arithmetic projections =
      c.accumulate ? reference::Arithmetic{elementwise.storage, reference::format_of(*c.accumulate)}
                   : elementwise;
  const auto b =
      reference::mlp_bounds<hp>(x, w_up, b_up, w_down, b_down, dy, act, fwd, g, parts, projections,
                                reference::default_contraction_path(), elementwise);
  MlpExpected e;
  e.y = {fwd.y, b.y};
  e.dx = {g.dx, b.dx};
  unfuse(g.dw_up, b.dw_up, c.cfg.activation, c.ffn(), e.dw_gate, e.dw_up);
  unfuse(g.db_up, b.db_up, c.cfg.activation, c.ffn(), e.db_gate, e.db_up);
  e.dw_down = {g.dw_down, b.dw_down};
  if (c.has_bias) e.db_down = {g.db_down, b.db_down};
  return e;
}

SHARDCHECK_INSTANTIATE_EXPECTED(MlpCase, MlpData, MlpExpected)

}  // namespace shardcheck::check
