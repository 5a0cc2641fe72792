#include "suites/softmax_merge/softmax_merge_expected.hpp"

#include "reference/bounds.hpp"
#include "reference/softmax_merge/softmax_merge_tree.hpp"

#include <limits>

namespace shardcheck::check {
namespace {

using reference::hp;

Tensor<hp> plus(const Tensor<hp>& a, const Tensor<hp>& b, const Shape& shape) {
  Tensor<hp> out(shape);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = (a.empty() ? hp(0) : a[i]) + (b.empty() ? hp(0) : b[i]);
  }
  return out;
}

}  // namespace

template <class A>
MergeInputs<A> merge_inputs(const MergeCase& c, const MergeData<A>& d) {
  constexpr auto f = reference::format_of<A>();
  MergeInputs<A> in;
  const auto scores = reference::to_hp<hp>(d.scores);
  const auto values = reference::to_hp<hp>(d.values);
  in.full = reference::softmax_rows<hp>(scores, values);
  const auto exact = reference::softmax_partials<hp>(scores, values, c.part_of_key, c.parts);
  for (std::size_t j = 0; j < c.parts; ++j) {
    SoftmaxPartial<A> p{reference::round_to<A>(exact[j].out), reference::round_to<A>(exact[j].lse)};
    for (std::size_t i = 0; i < c.rows; ++i) {
      if (p.lse[i] != -std::numeric_limits<A>::infinity()) continue;
      for (std::size_t e = 0; e < c.width; ++e) {
        p.out(i, e) = c.empty_fill[j] == EmptyFill::zero  ? A(0)
                      : c.empty_fill[j] == EmptyFill::nan ? std::numeric_limits<A>::quiet_NaN()
                                                          : std::numeric_limits<A>::infinity();
      }
    }
    in.exact_given.push_back(exact_rows(p));
    in.rounded.push_back(reference::with_rounding_error<hp>(exact[j], reference::to_hp<hp>(p.out),
                                                            reference::to_hp<hp>(p.lse), f));
    in.parts.push_back(std::move(p));
  }
  return in;
}

template <class A>
Rows exact_rows(const SoftmaxPartial<A>& p) {
  return reference::rows_of<hp>(p.out, p.lse);
}

template <class A>
Rows bounded_merge(const std::vector<Rows>& inputs, std::size_t rows, std::size_t width,
                   MergeForm form) {
  constexpr auto f = reference::format_of<A>();
  if (form == MergeForm::two_way_tree) {
    return reference::softmax_merge_tree<hp>(inputs, rows, width, f);
  }
  return reference::softmax_merge<hp>(inputs, rows, width, &f);
}

Rows exact_merge(const std::vector<Rows>& inputs, std::size_t rows, std::size_t width) {
  return reference::softmax_merge<hp>(inputs, rows, width, nullptr);
}

ExpectedTensor expect_out(const Rows& value, const Rows& bound) {
  return {value.out, plus(bound.out_err, value.out_err, value.out.shape())};
}

ExpectedTensor expect_lse(const Rows& value, const Rows& bound) {
  return {value.lse, plus(bound.lse_err, value.lse_err, value.lse.shape())};
}

#define SHARDCHECK_INSTANTIATE(A)                                                 \
  template MergeInputs<A> merge_inputs<A>(const MergeCase&, const MergeData<A>&); \
  template Rows exact_rows<A>(const SoftmaxPartial<A>&);                          \
  template Rows bounded_merge<A>(const std::vector<Rows>&, std::size_t, std::size_t, MergeForm);
SHARDCHECK_INSTANTIATE(double)
SHARDCHECK_INSTANTIATE(float)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck::check
