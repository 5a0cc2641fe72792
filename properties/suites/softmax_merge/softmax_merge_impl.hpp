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

#include "engine/registry.hpp"
#include "ops/softmax_merge/softmax_merge.hpp"

#include <cstddef>
#include <span>

namespace shardcheck::check {

class SoftmaxMergeImplementation {
 public:
  virtual ~SoftmaxMergeImplementation() = default;
// A is a type here (the macros declare one method per accumulator type): no parentheses.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SHARDCHECK_MERGE_IMPL_METHODS(A)                                                      \
  virtual SoftmaxPartial<A> merge(std::span<const SoftmaxPartial<A>> parts, std::size_t rows, \
                                  std::size_t width) const = 0;                               \
  virtual void merge_into(SoftmaxPartial<A>& acc, const SoftmaxPartial<A>& part) const = 0;
  SHARDCHECK_MERGE_IMPL_METHODS(double)
  SHARDCHECK_MERGE_IMPL_METHODS(float)
#undef SHARDCHECK_MERGE_IMPL_METHODS
  // NOLINTEND(bugprone-macro-parentheses)
};

template <class Impl>
class SoftmaxMergeAdapter final : public SoftmaxMergeImplementation {
 public:
  explicit SoftmaxMergeAdapter(Impl impl = {}) : impl_(std::move(impl)) {}
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SHARDCHECK_MERGE_ADAPT(A)                                                         \
  SoftmaxPartial<A> merge(std::span<const SoftmaxPartial<A>> parts, std::size_t rows,     \
                          std::size_t width) const override {                             \
    return impl_.template merge<A>(parts, rows, width);                                   \
  }                                                                                       \
  void merge_into(SoftmaxPartial<A>& acc, const SoftmaxPartial<A>& part) const override { \
    impl_.template merge_into<A>(acc, part);                                              \
  }
  SHARDCHECK_MERGE_ADAPT(double)
  SHARDCHECK_MERGE_ADAPT(float)
#undef SHARDCHECK_MERGE_ADAPT
  // NOLINTEND(bugprone-macro-parentheses)

 private:
  Impl impl_;
};

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

}  // namespace shardcheck::check
