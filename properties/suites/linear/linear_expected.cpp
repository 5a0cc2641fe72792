#include "suites/linear/linear_case.hpp"

#include "engine/instantiate.hpp"
#include "reference/bounds.hpp"
#include "reference/linear/linear.hpp"

namespace shardcheck::check {
namespace {

template <class T>
ExpectedTensor expect(const reference::Contraction<reference::hp>& c) {
  auto b = reference::bounds<reference::hp>(c, reference::arithmetic_of<T>());
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
  LinearExpected e;
  e.y = expect<T>(fwd);
  e.dx = expect<T>(bwd.dx);
  e.dw = expect<T>(bwd.dw);
  if (c.has_bias) e.db = expect<T>(bwd.db);
  return e;
}

SHARDCHECK_INSTANTIATE_EXPECTED(LinearCase, LinearData, LinearExpected)

}  // namespace shardcheck::check
