#include "suites/linear/linear_case.hpp"

#include "engine/instantiate.hpp"
#include "reference/bounds.hpp"
#include "reference/linear/linear.hpp"

namespace shardcheck::check {
namespace {

ExpectedTensor expect(const reference::Contraction<reference::hp>& c,
                      const reference::Arithmetic& arith,
                      reference::BiasPlacement placement = reference::BiasPlacement::after_sum) {
  auto b = reference::bounds<reference::hp>(c, arith, placement);
  return {c.value, std::move(b.bound)};
}

}  // namespace

template <class T>
LinearExpected expected(const LinearCase& c, const LinearData<T>& d) {
  using reference::hp;
  const bool column = c.layer == LinearLayer::column_parallel;
  // The contracted axis is split over the ranks only for row-parallel y (input features) and
  // column-parallel dx (output features); everything else is one dot on one rank.
  const std::vector<std::size_t> in_parts =
      column ? std::vector<std::size_t>{} : split_sizes(c.row.in_split, c.in, c.world);
  const std::vector<std::size_t> out_parts =
      column ? split_sizes(c.column.out_split, c.out, c.world) : std::vector<std::size_t>{};
  const auto fwd = reference::linear<hp>(d.x, d.w, d.b, in_parts);
  const auto bwd = reference::linear_backward<hp>(d.x, d.w, c.has_bias, d.dy, out_parts);
  // acc_t<T>, or the accumulator the case declares (reference/bounds.hpp: its steps (a), (e)).
  const reference::Arithmetic arith =
      c.accumulate
          ? reference::Arithmetic{reference::format_of<T>(), reference::format_of(*c.accumulate)}
          : reference::arithmetic_of<T>();
  LinearExpected e;
  e.y = expect(fwd, arith, c.bias_placement);  // (c) or (f): where the kernel adds the bias
  e.dx = expect(bwd.dx, arith);
  e.dw = expect(bwd.dw, arith);
  if (c.has_bias) e.db = expect(bwd.db, arith);
  return e;
}

SHARDCHECK_INSTANTIATE_EXPECTED(LinearCase, LinearData, LinearExpected)

}  // namespace shardcheck::check
