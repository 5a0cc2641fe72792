// The linear suite: column_parallel_linear and row_parallel_linear, forward and backward,
// against the dense high-precision reference, the declared traffic, and the bit-exactness
// that holds by construction.
#include "suites/linear/linear_suite.hpp"

#include "engine/bit_identity.hpp"
#include "engine/rank_family.hpp"
#include "engine/verdict.hpp"
#include "layout/materialize.hpp"
#include "suites/linear/linear_expected.hpp"
#include "suites/linear/linear_mutants.hpp"
#include "suites/linear/linear_run.hpp"

#include <rapidcheck.h>

#include <optional>

namespace shardcheck::check {
namespace {

template <class T>
void linear_checks(CaseVerdict& v, const LinearCase& c, const LinearRun<T>& run,
                   const LinearExpected& e) {
  const auto pl = linear_placements(c);
  using O = LinearRankOutputs<T>;
  auto one = [&](const char* name, Tensor<T> O::*member, const Placement& p,
                 const ExpectedTensor& x) {
    v.tensors.push_back(check_pieces<T>(name, pieces_of(run.outputs, member), p, x, c.world));
  };
  one("y", &O::y, pl.y, e.y);
  one("dx", &O::dx, pl.dx, e.dx);
  one("dw", &O::dw, pl.dw, e.dw);
  if (c.has_bias) one("db", &O::db, pl.db, e.db);
}

// Bit-exactness against the dense linear in the same type (the deterministic kernel): the
// column-parallel forward, or with P = 1 the row-parallel forward and backward.
enum class LinearOwnCheck { column_forward_bits, row_world1_bits };

template <class T>
void bit_exactness(LinearOwnCheck own, CaseVerdict& v, const LinearCase& c, const LinearData<T>& d,
                   const LinearRun<T>& run) {
  const auto pl = linear_placements(c);
  const Tensor<T> dense = linear(d.x, d.w, d.b, Kernel::deterministic);
  auto differs = [](const char* what, const Tensor<T>& got, const Tensor<T>& want) {
    return first_bit_difference(what, std::nullopt, got, want, "the dense linear");
  };
  try {
    const auto y =
        materialize(pieces_of(run.outputs, &LinearRankOutputs<T>::y), pl.y, dense.shape()).global;
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
    v.failures.push_back(err.what());
  }
}

struct LinearFamily : RankFamily<LinearFamily> {
  using Interface = LinearImplementation;
  using Case = LinearCase;
  using Options = LinearCaseOptions;
  using Own = LinearOwnCheck;
  template <class T>
  using Data = LinearData<T>;

  static constexpr const char* name = "linear";
  static constexpr const char* description =
      "Megatron-LM's column- and row-parallel linear layers, forward and backward";
  static constexpr const char* library_description =
      "the library's own ops (lib/ops/linear/linear.hpp), deterministic kernel when the case "
      "asks for it";

  static const std::vector<Property<LinearFamily>>& properties() {
    static const std::vector<Property<LinearFamily>> table = {
        {{"matches_reference",
          "column_parallel_linear and row_parallel_linear, forward and backward (y, dx, dw, db), "
          "equal the dense high-precision reference within the rounding-error bound on every "
          "element, for any world size, split policy, shape and element type",
          /*numeric=*/true},
         Check::reference},
        {{"declared_traffic",
          "every rank's ledger shows exactly the collectives the op declares, no more and no "
          "fewer"},
         Check::traffic},
        {{"replicated_bit_identical",
          "results that every rank holds (column dx after its all_reduce, row db, a gathered y) "
          "are bit-identical on every rank"},
         Check::replicated_bit_identical,
         [](Options& o, const RunConfig& config) {
           o.world = config.max_world >= 2 ? *rc::gen::inRange(2, config.max_world + 1) : 1;
         }},
        {{"column_forward_bit_identical",
          "with the deterministic kernel, column_parallel_linear's forward reproduces the dense "
          "linear's bits in the same type"},
         Check::own,
         [](Options& o, const RunConfig&) {
           o.layer = LinearLayer::column_parallel;
           o.kernel = Kernel::deterministic;
         },
         /*deterministic_only=*/true,
         Own::column_forward_bits},
        {{"row_world1_bit_identical",
          "with the deterministic kernel and P = 1, row_parallel_linear reproduces the dense "
          "linear and its backward bit for bit in the same type"},
         Check::own,
         [](Options& o, const RunConfig&) {
           o.layer = LinearLayer::row_parallel;
           o.world = 1;
           o.kernel = Kernel::deterministic;
         },
         /*deterministic_only=*/true,
         Own::row_world1_bits},
        {{"special_values",
          "NaN and Inf in the inputs give NaN and Inf exactly where the reference has them, and "
          "finite values stay within the bound elsewhere",
          /*numeric=*/true},
         Check::reference,
         [](Options& o, const RunConfig&) { o.profile = gen::Profile::special; }},
    };
    return table;
  }

  static std::shared_ptr<const Interface> library() {
    return std::make_shared<const LinearAdapter<LibraryLinear>>();
  }
  static std::span<const Mutant<Interface>> mutants() { return linear_mutants(); }

  static rc::Gen<Case> gen_case(const RunConfig& config, const Options& options) {
    return genLinearCase(config, options);
  }
  static int world(const Case& c) { return c.world; }
  static std::string op_name(const Case& c) { return to_string(c.layer); }

  template <class T>
  static rc::Gen<Data<T>> gen_data(const Case& c) {
    return genLinearData<T>(c);
  }
  template <class T>
  static LinearRun<T> run(const Interface& impl, const Case& c, const Data<T>& d) {
    return run_linear(impl, c, d);
  }
  static std::vector<std::vector<DeclaredCall>> declared_traffic(const Case& c) {
    return linear_declared_traffic(c);
  }
  template <class T>
  static LinearExpected expected(const Case& c, const Data<T>& d) {
    return linear_expected(c, d);
  }
  template <class T>
  static void add_checks(CaseVerdict& v, const Case& c, const LinearRun<T>& run,
                         const LinearExpected& e) {
    linear_checks(v, c, run, e);
  }
  template <class T>
  static void own_check(Own own, CaseVerdict& v, const Case& c, const Data<T>& d,
                        const LinearRun<T>& run) {
    bit_exactness(own, v, c, d, run);
  }
};

}  // namespace

void register_linear_suite() { register_family<LinearFamily>(); }

}  // namespace shardcheck::check
