// What the softmax_merge suite expects: the case's exact partials (the softmax over each part of
// the keys, in high precision), the partials the implementation receives (rounded once to A;
// an empty partial's out filled with 0, NaN or +inf as the case says), and the expected value
// and elementwise bound of each merge (reference/softmax_merge/softmax_merge.hpp derives the
// bounds).
#pragma once

#include "engine/expected.hpp"
#include "ops/softmax_merge/softmax_merge.hpp"
#include "reference/softmax_merge/softmax_merge.hpp"
#include "suites/softmax_merge/softmax_merge_case.hpp"

#include <vector>

namespace shardcheck::check {

using Rows = reference::SoftmaxRows<reference::hp>;

template <class A>
struct MergeInputs {
  std::vector<SoftmaxPartial<A>> parts;  // what the implementation merges
  std::vector<Rows> rounded;      // the same values in hp, err: bound against the exact partials
  std::vector<Rows> exact_given;  // the same values in hp taken as exact inputs (err 0)
  Rows full;                      // the softmax over all keys, in hp (err: its own rounding)
};

template <class A>
MergeInputs<A> merge_inputs(const MergeCase& c, const MergeData<A>& d);

// The implementation's A partials as exact hp inputs.
template <class A>
Rows exact_rows(const SoftmaxPartial<A>& p);

// How an implementation's merge() evaluates (its declared contract, ImplementationInfo::
// two_way_tree): the n-way form of lib/ops/softmax_merge/softmax_merge.hpp, or any tree of
// two-way steps (chained online merges in any order).
enum class MergeForm { nway, two_way_tree };

// A merge in A of `inputs` (values with their bounds) of the given form is within .err of the
// exact merge of the exact inputs: reference::softmax_merge (n-way) or
// reference::softmax_merge_tree (any tree of two-way steps) with A's format.
template <class A>
Rows bounded_merge(const std::vector<Rows>& inputs, std::size_t rows, std::size_t width,
                   MergeForm form = MergeForm::nway);

// The exact merge of `inputs` (err: their propagated errors and hp's own rounding).
Rows exact_merge(const std::vector<Rows>& inputs, std::size_t rows, std::size_t width);

// value: the expected value; bound: bound.err + value.err (value's own error added to the
// implementation's bound). out or lse.
ExpectedTensor expect_out(const Rows& value, const Rows& bound);
ExpectedTensor expect_lse(const Rows& value, const Rows& bound);

}  // namespace shardcheck::check
