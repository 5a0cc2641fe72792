// Suites, properties and implementations: what the check engine runs.
//
// A suite checks one op family (linear, attention, ...). Its properties are sentences
// ("column_parallel_linear matches the dense reference within its bound"). Each property runs
// against an implementation: a named, registered value. The library's ops are one, every
// mutant is one, and a user's own is one, registered from the user's translation unit with no
// toolkit source changed (see ImplementationRegistry and examples/).
#pragma once

#include "runtime/dtype.hpp"

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace shardcheck::check {

// What a run asks of the generators.
struct RunConfig {
  int max_world = 8;  // largest P (tp, cp, ...) a case may draw
  std::vector<DType> dtypes = {DType::float64, DType::float32, DType::bfloat16, DType::float16};
};

struct ImplementationInfo {
  std::string name;         // "shardcheck", "mutant:bias-on-every-rank", or a user's name
  std::string description;  // for a mutant: the bug, in words, and where it was seen
  bool is_mutant = false;
  // Claims the in-order (deterministic) kernel, so the bit-exactness properties apply.
  bool deterministic = false;
  // softmax_merge only: claims that merge() may evaluate as any tree of two-way steps (a chain
  // of online merges in any order, as FlashAttention-style kernels run it), so the merge
  // properties bound it by reference/softmax_merge/softmax_merge_tree.hpp instead of the n-way
  // bound, which assumes one rounding of the lse (docs/softmax_merge.md "Chained merges").
  bool two_way_tree = false;
};

struct PropertyInfo {
  std::string name;         // short id: "column_parallel_matches_reference"
  std::string description;  // the sentence
  // Compares values under a bound (so a whole run must measure a bound ratio above 0; a run
  // that compared nothing numerically could not have failed).
  bool numeric = false;
};

// Calls f(T{}) with the floating C++ element type of `dtype` (double, float, bfloat16,
// float16): how a suite's run_case turns the case's drawn dtype into its typed run. The suites
// draw floating types only (RunConfig::dtypes); for an integer dtype f is not called.
template <class F>
void visit_float_dtype(DType dtype, F&& f) {
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bfloat16> ||
                  std::is_same_v<T, float16>) {
      f(tag);
    }
  });
}

class Suite {
 public:
  virtual ~Suite() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  virtual std::vector<PropertyInfo> properties() const = 0;
  virtual std::vector<ImplementationInfo> implementations() const = 0;
  // False when `property` does not apply to `impl` (the bit-exactness properties need an
  // implementation that claims the deterministic kernel); the runner then skips it.
  virtual bool applies(const std::string& property, const std::string& impl) const {
    (void)property;
    (void)impl;
    return true;
  }
  // One RapidCheck case of `property` against implementation `impl`: draws the case with
  // generators (on this, the main, thread), runs it on the ranks, compares, records to the
  // active Collector, and fails the case (RC_FAIL) with the explanation when a check fails.
  // @throws UsageError for an unknown property or implementation.
  virtual void run_case(const std::string& property, const std::string& impl,
                        const RunConfig& config) const = 0;
};

// Every suite the program knows, in registration order.
class SuiteRegistry {
 public:
  static SuiteRegistry& instance();
  void add(std::unique_ptr<Suite> suite);
  const Suite* find(const std::string& name) const;
  const std::vector<std::unique_ptr<Suite>>& all() const { return suites_; }

 private:
  std::vector<std::unique_ptr<Suite>> suites_;
};

// Registers the suites that ship with shardcheck (idempotent). Called by the command line
// and the tests; explicit, because static registration is dropped when linking a static
// library whose objects nobody references.
void register_builtin_suites();

}  // namespace shardcheck::check
