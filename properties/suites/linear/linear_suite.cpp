// The linear suite: column_parallel_linear and row_parallel_linear, forward and backward,
// against the dense high-precision reference, the declared traffic, and the bit-exactness
// that holds by construction.
#include "suites/linear/linear_suite.hpp"

#include "engine/bit_identity.hpp"
#include "engine/instantiate.hpp"
#include "engine/rank_family.hpp"
#include "engine/verdict.hpp"
#include "layout/materialize.hpp"
#include "suites/linear/linear_case.hpp"
#include "suites/linear/linear_mutants.hpp"

#include <rapidcheck.h>

#include <optional>

namespace shardcheck::check {

// Every output of the op (for_each_output, linear_case.hpp), materialized by its spec's placement,
// against the reference (found by the engine beside the case type: engine/rank_family.hpp).
SHARDCHECK_CHECK_LISTED_OUTPUTS(LinearCase, LinearRun, LinearExpected)

namespace {

// Bit-exactness against the dense linear in the same type (the deterministic kernel): the
// column-parallel forward, or with P = 1 the row-parallel forward and backward.
enum class LinearOwnCheck { column_forward_bits, row_world1_bits };

template <class T>
void own_check(LinearOwnCheck own, CaseVerdict& v, const LinearCase& c, const LinearData<T>& d,
               const LinearRun<T>& run) {
  const Placement y_placement = op_spec(c).tensor("y").placement();
  const Tensor<T> dense = linear(d.x, d.w, d.b, Kernel::deterministic);
  auto differs = [](const char* what, const Tensor<T>& got, const Tensor<T>& want) {
    return first_bit_difference(what, std::nullopt, got, want, "the dense linear");
  };
  try {
    const auto y =
        materialize(pieces_of(run.outputs, &LinearRankOutputs<T>::y), y_placement, dense.shape())
            .global;
    if (auto f = differs("y", y, dense); !f.empty()) v.failures.push_back(f);
    if (own == LinearOwnCheck::row_world1_bits) {
      const auto g = linear_backward(d.x, d.w, c.has_bias, d.dy, Kernel::deterministic);
      const auto& o = run.outputs.at(0);
      for (const auto& f : {differs("dx", o.dx, g.dx), differs("dw", o.dw, g.dw),
                            c.has_bias ? differs("db", o.db, g.db) : std::string()}) {
        if (!f.empty()) v.failures.push_back(f);
      }
    }
  } catch (const UsageError& err) {
    v.failures.emplace_back(err.what());
  }
}

struct LinearFamily : RankFamily<LinearFamily, LinearImplementation, LinearCase, LinearCaseOptions,
                                 LinearData, LinearOwnCheck> {
  static constexpr FamilyInfo info = {
      "linear", "Megatron-LM's column- and row-parallel linear layers, forward and backward",
      "the library's own ops (lib/ops/linear/linear.hpp), deterministic kernel when the case "
      "asks for it"};

  static constexpr Row properties[] = {
      reference_property(
          "matches_reference",
          "column_parallel_linear and row_parallel_linear, forward and backward (y, dx, dw, "
          "db), equal the dense high-precision reference within the rounding-error bound on "
          "every element, for any world size, split policy, shape and element type"),
      traffic_property(
          "every rank's ledger shows exactly the collectives the op declares, no more and no "
          "fewer"),
      replication_property(
          "results that every rank holds (column dx after its all_reduce, row db, a gathered y) "
          "are bit-identical on every rank"),
      own_property({"column_forward_bit_identical",
                    "with the deterministic kernel, column_parallel_linear's forward reproduces "
                    "the dense linear's bits in the same type"},
                   Own::column_forward_bits,
                   pin_fields<&Options::layer, LinearLayer::column_parallel, &Options::kernel,
                              Kernel::deterministic>,
                   /*deterministic_only=*/true),
      own_property({"row_world1_bit_identical",
                    "with the deterministic kernel and P = 1, row_parallel_linear reproduces the "
                    "dense linear and its backward bit for bit in the same type"},
                   Own::row_world1_bits,
                   pin_fields<&Options::layer, LinearLayer::row_parallel, &Options::world, 1,
                              &Options::kernel, Kernel::deterministic>,
                   /*deterministic_only=*/true),
      reference_property(
          "special_values",
          "NaN and Inf in the inputs give NaN and Inf exactly where the reference has them, and "
          "finite values stay within the bound elsewhere",
          pin_fields<&Options::profile, gen::Profile::special>),
  };

  using Library = LinearAdapter<LibraryLinear>;
  static constexpr auto mutants = linear_mutants;
};

}  // namespace

void register_linear_suite() { register_family<LinearFamily>(); }

}  // namespace shardcheck::check
