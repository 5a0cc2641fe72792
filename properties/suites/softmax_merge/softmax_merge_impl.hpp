// The softmax_merge suite's implementation interface: the n-way merge of attention partials and
// the two-way step a context-parallel ring applies (lib/ops/softmax_merge/softmax_merge.hpp, row
// layout: out [rows, width], lse [rows]). A is float64 or float32 (the attention kernel's
// acc_t<T>).
//
// A user checks their own merge by writing a type with two member templates and registering it
// (as examples/custom_linear/ does for the linear suite):
//
//   struct MyMerge {
//     template <class A> SoftmaxPartial<A> merge(std::span<const SoftmaxPartial<A>> parts,
//                                                std::size_t rows, std::size_t width) const;
//     template <class A> void merge_into(SoftmaxPartial<A>& acc,
//                                        const SoftmaxPartial<A>& part) const;
//   };
//   static Registration<SoftmaxMergeImplementation> reg(
//       {.name = "mine"}, std::make_shared<SoftmaxMergeAdapter<MyMerge>>());
//
// Nothing here runs on ranks: the merge is local arithmetic; the suite plays the ring's order.
#pragma once

#include "engine/implementation.hpp"
#include "engine/registry.hpp"
#include "ops/softmax_merge/softmax_merge.hpp"

#include <cstddef>
#include <span>

namespace shardcheck::check {

// The interface (SoftmaxMergeImplementation) and SoftmaxMergeAdapter<Impl>, which adapts a type
// with member templates merge<A> and merge_into<A>, one method per accumulator type A
// (engine/implementation.hpp).
// NOLINTBEGIN(bugprone-macro-parentheses): A is a template argument, M a macro name.
#define SHARDCHECK_MERGE_METHODS(M, A)                                               \
  M(A, SoftmaxPartial<A>, merge,                                                     \
    (std::span<const SoftmaxPartial<A>> parts, std::size_t rows, std::size_t width), \
    (parts, rows, width))                                                            \
  M(A, void, merge_into, (SoftmaxPartial<A> & acc, const SoftmaxPartial<A>& part), (acc, part))
SHARDCHECK_IMPLEMENTATION_OVER(SHARDCHECK_FOR_EACH_ACC_TYPE_WITH, SoftmaxMergeImplementation,
                               SoftmaxMergeAdapter, SHARDCHECK_MERGE_METHODS)
#undef SHARDCHECK_MERGE_METHODS
// NOLINTEND(bugprone-macro-parentheses)

using SoftmaxMergeRegistry = ImplementationRegistry<SoftmaxMergeImplementation>;

// The library's own merge (lib/ops/softmax_merge/softmax_merge.hpp): "shardcheck".
struct LibrarySoftmaxMerge {
  template <class A>
  SoftmaxPartial<A> merge(std::span<const SoftmaxPartial<A>> parts, std::size_t rows,
                          std::size_t width) const {
    return softmax_merge<A>(parts, rows, width);
  }
  template <class A>
  void merge_into(SoftmaxPartial<A>& acc, const SoftmaxPartial<A>& part) const {
    shardcheck::merge_into<A>(acc, part);
  }
};

// A correct merge built the way FlashAttention-style kernels and ring implementations build it:
// merge() folds merge_into over the partials from the identity, in index order, so the lse is
// rounded once per step rather than once. Registered as "chained-online" with the two_way_tree
// claim (ImplementationInfo): it shows that the merge properties accept a correct evaluation
// order other than the n-way one, under reference/softmax_merge/softmax_merge_tree.hpp's bound.
struct ChainedSoftmaxMerge {
  template <class A>
  SoftmaxPartial<A> merge(std::span<const SoftmaxPartial<A>> parts, std::size_t rows,
                          std::size_t width) const {
    SoftmaxPartial<A> acc = empty_softmax_partial<A>(rows, width);
    for (const auto& p : parts) shardcheck::merge_into<A>(acc, p);
    return acc;
  }
  template <class A>
  void merge_into(SoftmaxPartial<A>& acc, const SoftmaxPartial<A>& part) const {
    shardcheck::merge_into<A>(acc, part);
  }
};

}  // namespace shardcheck::check
