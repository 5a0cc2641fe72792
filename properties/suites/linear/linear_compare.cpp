// column_parallel_linear and row_parallel_linear as cases on disk (docs/case-format.md,
// compare/compare.hpp): the config's fields as ops/linear/linear_spec.cpp writes them, the sizes
// tokens, in, out, the mesh {"tp": P}; inputs x [tokens, in], w [out, in], b [out] (optional:
// without it the layer has no bias), dy [tokens, out] (needed for the gradients); outputs y, dx,
// dw, db, each optional.
#include "compare/compare.hpp"
#include "compare/config_fields.hpp"
#include "reference/format.hpp"
#include "suites/linear/linear_case.hpp"
#include "suites/linear/linear_mutants.hpp"
#include "suites/reduction_fields.hpp"
#include "suites/upstream_gradient.hpp"

#include <algorithm>
#include <cstddef>
#include <string>

namespace shardcheck::check {

LinearCase case_of(const cases::CaseManifest& m, LinearCase* /*tag*/) {
  auto c = case_at_mesh<LinearCase>(m);
  c.layer =
      m.op == "row_parallel_linear" ? LinearLayer::row_parallel : LinearLayer::column_parallel;
  c.tokens = m.size("tokens");
  c.in = m.size("in");
  c.out = m.size("out");
  c.has_bias = m.input("b") != nullptr;
  cases::Fields f = m.config;
  if (c.layer == LinearLayer::column_parallel) {
    ColumnParallelConfig& k = c.column;
    k.out_features = f.size_or("out_features", c.out);
    k.tokens = f.size_or("tokens", c.tokens);
    k.out_split = split_or(f, "out_split", k.out_split);
    k.gather_output = f.boolean_or("gather_output", k.gather_output);
    k.sequence_parallel_input = f.boolean_or("sequence_parallel_input", k.sequence_parallel_input);
    k.token_split = split_or(f, "token_split", k.token_split);
    k.all_reduce_algorithm = algorithm_or(f, "all_reduce_algorithm", k.all_reduce_algorithm);
    k.kernel = kernel_or(f, "kernel", k.kernel);
  } else {
    RowParallelConfig& k = c.row;
    k.in_split = split_or(f, "in_split", k.in_split);
    k.input_is_parallel = f.boolean_or("input_is_parallel", k.input_is_parallel);
    k.sequence_parallel_output =
        f.boolean_or("sequence_parallel_output", k.sequence_parallel_output);
    read_reduction_fields(f, k);
  }
  f.done();
  c.accumulate = require_accumulate_holds(m);
  if (c.accumulate) {
    // γ_n (reference/bounds.hpp, step (a)) needs n·u < 1 with u = 2^-p: a dot of more terms
    // accumulated in the format has no a-priori bound.
    const std::string a(name(*c.accumulate));
    const int p = reference::format_of(*c.accumulate).precision;
    const std::size_t most = (std::size_t{1} << static_cast<unsigned>(p)) - 1;
    const std::size_t k = std::max({c.tokens, c.in, c.out});
    if (k > most) {
      throw cases::CaseError(
          m.file + ": accumulate: is " + a + " but the longest contraction has " +
          std::to_string(k) + " terms (the largest of tokens, in, out) and a dot accumulated in " +
          a + " has an a-priori bound only up to " + std::to_string(most) +
          " terms (γ_n needs n·u < 1, u = 2^-" + std::to_string(p) +
          "); give a wider accumulator, or omit the field (docs/compare.md, \"Contract\")");
    }
  }
  return c;
}

// The bounds take any accumulator that holds T (compare.hpp: require_accumulate_holds).
constexpr bool takes_declared_accumulate(const LinearCase* /*tag*/) { return true; }

template <class T>
void read_tensors(CaseReader& r, const LinearCase& c, LinearData<T>& d, LinearRun<T>& run) {
  r.input("x", d.x);
  r.input("w", d.w);
  if (c.has_bias) r.input("b", d.b);
  read_upstream_gradient(r, "dy", d.dy, {c.tokens, c.out}, {"dx", "dw", "db"});
  read_listed_outputs<T>(r, c, run);
}

void register_linear_compare() {
  for (const char* op : {"column_parallel_linear", "row_parallel_linear"}) {
    CompareRegistry::instance().add(op,
                                    compare_as<LinearCase, LinearData, LinearRun, &linear_mutants>);
  }
}

}  // namespace shardcheck::check
