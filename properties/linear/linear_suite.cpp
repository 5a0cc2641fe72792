// The linear suite: column_parallel_linear and row_parallel_linear, forward and backward,
// against the dense high-precision reference, the declared traffic, and the bit-exactness
// that holds by construction.
#include "linear/linear_suite.hpp"

#include "engine/verdict.hpp"
#include "layout/materialize.hpp"
#include "linear/linear_expected.hpp"
#include "linear/linear_mutants.hpp"
#include "linear/linear_run.hpp"

#include <rapidcheck.h>

#include <cstring>

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

// The first element where `got` and `want` differ in any bit, in words; empty if none.
template <class T>
std::string first_bit_difference(const char* what, const Tensor<T>& got, const Tensor<T>& want) {
  if (got.shape() != want.shape()) {
    return std::string(what) + " is " + format_shape(got.shape()) + " but the dense op gives " +
           format_shape(want.shape());
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      return std::string(what) + format_shape(detail::unravel(i, got.shape())) + " is " +
             std::to_string(static_cast<double>(got[i])) + " but the dense linear in " +
             std::string(name(dtype_of<T>)) + " gives " +
             std::to_string(static_cast<double>(want[i])) + ": not bit-identical";
    }
  }
  return {};
}

template <class T>
void run_typed(const std::string& property, const LinearImplementation& impl, const LinearCase& c) {
  const LinearData<T> d = *genLinearData<T>(c);
  const LinearRun<T> run = run_linear(impl, c, d);
  CaseVerdict v;
  v.op = to_string(c.layer);
  v.dtype = c.dtype;
  v.world = c.world;
  v.case_text = c.describe();
  if (!run.error.empty()) {
    v.failures.push_back("the implementation threw: " + run.error);
    conclude(v);
    return;
  }
  if (property == "declared_traffic") {
    if (auto f = check_traffic(linear_declared_traffic(c), run.ledgers); !f.empty()) {
      v.failures.push_back(f);
    }
  } else if (property == "column_forward_bit_identical" || property == "row_world1_bit_identical") {
    const auto pl = linear_placements(c);
    std::vector<Tensor<T>> ys;
    for (const auto& o : run.outputs) ys.push_back(o.y);
    const Tensor<T> dense = linear(d.x, d.w, d.b, Kernel::deterministic);
    try {
      const auto y = materialize(ys, pl.y, dense.shape()).global;
      if (auto f = first_bit_difference("y", y, dense); !f.empty()) v.failures.push_back(f);
      if (property == "row_world1_bit_identical") {
        const auto g = linear_backward(d.x, d.w, c.has_bias, d.dy, Kernel::deterministic);
        const auto& o = run.outputs.at(0);
        for (const auto& f :
             {first_bit_difference("dx", o.dx, g.dx), first_bit_difference("dw", o.dw, g.dw),
              c.has_bias ? first_bit_difference("db", o.db, g.db) : std::string()}) {
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

std::vector<ImplementationInfo> LinearSuite::implementations() const {
  return LinearRegistry::instance().infos();
}

bool LinearSuite::applies(const std::string& property, const std::string& impl) const {
  if (property != "column_forward_bit_identical" && property != "row_world1_bit_identical") {
    return true;
  }
  const auto* e = LinearRegistry::instance().find(impl);
  return e != nullptr && e->info.deterministic;
}

void LinearSuite::run_case(const std::string& property, const std::string& impl,
                           const RunConfig& config) const {
  const auto& entry = LinearRegistry::instance().get(impl);
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
  visit_dtype(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bfloat16> ||
                  std::is_same_v<T, float16>) {
      run_typed<T>(property, *entry.impl, c);
    }
  });
}

void register_linear_suite() {
  auto& reg = LinearRegistry::instance();
  reg.add_once({"shardcheck",
                "the library's own ops (lib/ops/linear.hpp), deterministic kernel when the case "
                "asks for it",
                false, true},
               std::make_shared<LinearAdapter<LibraryLinear>>());
  register_linear_mutants();
  SuiteRegistry::instance().add(std::make_unique<LinearSuite>());
}

}  // namespace shardcheck::check
