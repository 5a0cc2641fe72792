// A family's implementation interface and its adapter, generated from one list of entry points.
//
// A suite calls an implementation through a class with one pure virtual method per entry point
// and element type (virtual functions cannot be templates); a user, the library and every mutant
// write a plain type with member templates instead, and the adapter forwards each virtual method
// to the member template of the same name. Both are written here once for every family, from the
// family's list of entry points:
//
//   #define SHARDCHECK_LINEAR_METHODS(M, T)  (each line but the last ends in a backslash)
//     M(T, LinearRankOutputs<T>, column_parallel,
//       (Communicator & tp, const ColumnParallelConfig& cfg, const LinearRankInputs<T>& in),
//       (tp, cfg, in))
//     M(T, LinearRankOutputs<T>, row_parallel, (...), (tp, cfg, in))
//   SHARDCHECK_IMPLEMENTATION(LinearImplementation, LinearAdapter, SHARDCHECK_LINEAR_METHODS)
//
// declares
//
//   class LinearImplementation {            // for T in double, float, bfloat16, float16:
//     virtual LinearRankOutputs<T> column_parallel(Communicator& tp, ...) const = 0;  ...
//   };
//   template <class Impl> class LinearAdapter final : public LinearImplementation {
//     explicit LinearAdapter(Impl impl = {});
//     LinearRankOutputs<T> column_parallel(Communicator& tp, ...) const override {
//       return impl_.template column_parallel<T>(tp, cfg, in);
//     }  ...
//   };
//
// M's arguments: the element type, the return type, the method's name, its parameter list (in
// parentheses, with names) and the arguments it forwards (in parentheses).
// SHARDCHECK_IMPLEMENTATION_OVER(TYPES, ...) does the same for another list of types: TYPES(X,
// ...) calls X(T, ...) for each (SHARDCHECK_FOR_EACH_ACC_TYPE_WITH: float64 and float32, the
// accumulator types of the softmax merge).
#pragma once

#include "runtime/dtype.hpp"

#include <utility>

// The macros' arguments are types, names and parenthesized lists, which cannot be parenthesized
// again: bugprone-macro-parentheses does not apply.
// NOLINTBEGIN(bugprone-macro-parentheses)

// X(T, args...) for the accumulator types acc_t<T> takes (runtime/dtype.hpp): double, float.
#define SHARDCHECK_FOR_EACH_ACC_TYPE_WITH(X, ...) X(double, __VA_ARGS__) X(float, __VA_ARGS__)

#define SHARDCHECK_DETAIL_PURE_METHOD(T, R, name, params, args) virtual R name params const = 0;
#define SHARDCHECK_DETAIL_FORWARD_METHOD(T, R, name, params, args) \
  R name params const override { return impl_.template name<T> args; }
#define SHARDCHECK_DETAIL_PURE_METHODS(T, METHODS) METHODS(SHARDCHECK_DETAIL_PURE_METHOD, T)
#define SHARDCHECK_DETAIL_FORWARD_METHODS(T, METHODS) METHODS(SHARDCHECK_DETAIL_FORWARD_METHOD, T)

#define SHARDCHECK_IMPLEMENTATION_OVER(TYPES, Interface, Adapter, METHODS) \
  class Interface {                                                        \
   public:                                                                 \
    virtual ~Interface() = default;                                        \
    TYPES(SHARDCHECK_DETAIL_PURE_METHODS, METHODS)                         \
  };                                                                       \
  template <class Impl>                                                    \
  class Adapter final : public Interface {                                 \
   public:                                                                 \
    explicit Adapter(Impl impl = {}) : impl_(std::move(impl)) {}           \
    TYPES(SHARDCHECK_DETAIL_FORWARD_METHODS, METHODS)                      \
                                                                           \
   private:                                                                \
    Impl impl_;                                                            \
  };

#define SHARDCHECK_IMPLEMENTATION(Interface, Adapter, METHODS) \
  SHARDCHECK_IMPLEMENTATION_OVER(SHARDCHECK_FOR_EACH_FLOAT_TYPE_WITH, Interface, Adapter, METHODS)

// NOLINTEND(bugprone-macro-parentheses)
