// The linear suite: column_parallel_linear and row_parallel_linear, forward and backward,
// against the dense high-precision reference, the declared traffic, and the bit-exactness
// that holds by construction.
#include "suites/linear/linear_suite.hpp"

#include "engine/bit_identity.hpp"
#include "engine/verdict.hpp"
#include "layout/materialize.hpp"
#include "suites/linear/linear_expected.hpp"
#include "suites/linear/linear_mutants.hpp"
#include "suites/linear/linear_run.hpp"

#include <rapidcheck.h>

#include <optional>

namespace shardcheck::check {
namespace {

const std::vector<PropertyInfo>& linear_properties() {
  static const std::vector<PropertyInfo> props = {
      {"matches_reference",
       "column_parallel_linear and row_parallel_linear, forward and backward (y, dx, dw, db), "
       "equal the dense high-precision reference within the rounding-error bound on every "
       "element, for any world size, split policy, shape and element type",
       /*numeric=*/true},
      {"declared_traffic",
       "every rank's ledger shows exactly the collectives the op declares, no more and no "
       "fewer"},
      {"replicated_bit_identical",
       "results that every rank holds (column dx after its all_reduce, row db, a gathered y) "
       "are bit-identical on every rank"},
      {"column_forward_bit_identical",
       "with the deterministic kernel, column_parallel_linear's forward reproduces the dense "
       "linear's bits in the same type"},
      {"row_world1_bit_identical",
       "with the deterministic kernel and P = 1, row_parallel_linear reproduces the dense "
       "linear and its backward bit for bit in the same type"},
      {"special_values",
       "NaN and Inf in the inputs give NaN and Inf exactly where the reference has them, and "
       "finite values stay within the bound elsewhere",
       /*numeric=*/true},
  };
  return props;
}

template <class T>
void add_checks(CaseVerdict& v, const LinearCase& c, const LinearRun<T>& run,
                const LinearExpected& e) {
  const auto pl = linear_placements(c);
  auto one = [&](const char* name, auto member, const Placement& p, const ExpectedTensor& x) {
    std::vector<Tensor<T>> pieces;
    for (const auto& o : run.outputs) pieces.push_back(o.*member);
    v.tensors.push_back(check_pieces<T>(name, pieces, p, x, c.world));
  };
  one("y", &LinearRankOutputs<T>::y, pl.y, e.y);
  one("dx", &LinearRankOutputs<T>::dx, pl.dx, e.dx);
  one("dw", &LinearRankOutputs<T>::dw, pl.dw, e.dw);
  if (c.has_bias) one("db", &LinearRankOutputs<T>::db, pl.db, e.db);
}

template <class T>
void run_typed(const std::string& property, const LinearImplementation& impl, const LinearCase& c) {
  const LinearData<T> d = *genLinearData<T>(c);
  const LinearRun<T> run = run_linear(impl, c, d);
  CaseVerdict v;
  if (!begin_verdict(v, to_string(c.layer), c.dtype, c.world, c.describe(), run.error)) return;
  if (property == "declared_traffic") {
    if (auto f = check_traffic(linear_declared_traffic(c), run.ledgers); !f.empty()) {
      v.failures.push_back(f);
    }
  } else if (property == "column_forward_bit_identical" || property == "row_world1_bit_identical") {
    const auto pl = linear_placements(c);
    std::vector<Tensor<T>> ys;
    for (const auto& o : run.outputs) ys.push_back(o.y);
    const Tensor<T> dense = linear(d.x, d.w, d.b, Kernel::deterministic);
    auto differs = [](const char* what, const Tensor<T>& got, const Tensor<T>& want) {
      return first_bit_difference(what, std::nullopt, got, want, "the dense linear");
    };
    try {
      const auto y = materialize(ys, pl.y, dense.shape()).global;
      if (auto f = differs("y", y, dense); !f.empty()) v.failures.push_back(f);
      if (property == "row_world1_bit_identical") {
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
  } else {
    add_checks(v, c, run, linear_expected(c, d));
    if (property == "replicated_bit_identical") {
      // Only the replication matters here: drop the bound verdicts, keep divergent ranks.
      keep_only_divergence(v);
    }
  }
  conclude(v);
}

}  // namespace

std::string LinearSuite::name() const { return "linear"; }

std::string LinearSuite::description() const {
  return "Megatron-LM's column- and row-parallel linear layers, forward and backward";
}

std::vector<PropertyInfo> LinearSuite::properties() const { return linear_properties(); }

bool LinearSuite::applies(const std::string& property, const std::string& impl) const {
  if (property != "column_forward_bit_identical" && property != "row_world1_bit_identical") {
    return true;
  }
  return deterministic(impl);
}

void LinearSuite::run_case(const std::string& property, const std::string& impl,
                           const RunConfig& config) const {
  const LinearImplementation& target = implementation(impl);
  LinearCaseOptions options;
  if (property == "column_forward_bit_identical") {
    options.layer = LinearLayer::column_parallel;
    options.kernel = Kernel::deterministic;
  } else if (property == "row_world1_bit_identical") {
    options.layer = LinearLayer::row_parallel;
    options.world = 1;
    options.kernel = Kernel::deterministic;
  } else if (property == "special_values") {
    options.profile = gen::Profile::special;
  } else if (property == "replicated_bit_identical") {
    options.world = config.max_world >= 2 ? *rc::gen::inRange(2, config.max_world + 1) : 1;
  }
  const LinearCase c = *genLinearCase(config, options);
  visit_float_dtype(c.dtype, [&]<class T>(T) { run_typed<T>(property, target, c); });
}

void register_linear_suite() {
  register_builtin_suite<LinearSuite>(
      "the library's own ops (lib/ops/linear/linear.hpp), deterministic kernel when the case asks for it",
      std::make_shared<LinearAdapter<LibraryLinear>>(), register_linear_mutants);
}

}  // namespace shardcheck::check
