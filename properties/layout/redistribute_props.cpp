// redistribute on 1-D to 3-D meshes (lib/layout/redistribute.hpp): materialize(redistribute(x,
// t)) == materialize(x) for every valid pair of layouts, uneven shards included; round trips
// return the original piece; and each rank's ledger equals the plan it declared, step by step.
//
// Values here are small integers in float64, so every reduction (sum, avg of equal terms, max,
// min) is exact and results are compared bit for bit: this suite pins down which elements go
// where and which terms are combined. The same identity in rounding arithmetic, with random real
// values in float64, float32, bfloat16 and float16 (data movement bit for bit, reductions within
// an a-priori bound derived from the documented reduction order), is
// redistribute_bounds_props.cpp, in the same program; the generated cases are shared
// (redistribute_cases.hpp).
#include "layout/materialize_mesh.hpp"
#include "layout/redistribute.hpp"
#include "layout_test_support.hpp"
#include "redistribute_cases.hpp"
#include "redistribute_impl.hpp"
#include "runtime/errors.hpp"
#include "runtime/launcher.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace shardcheck {
namespace {

using layout_test::Case;
using layout_test::expect_usage_error;
using layout_test::genCase;
using layout_test::holds;
using layout_test::library_redistribute;
using layout_test::redistribute_mutants;
using layout_test::RedistributeImpl;

// The per-rank pieces of x under `layout`: a Partial's terms are small integers whose
// reduction by `op` is exactly x (sum: random terms, the first fixed up; avg: equal terms;
// max/min: the first term is x, the others below/above it).
std::vector<Tensor<double>> pieces_of(const Tensor<double>& x, const Case& c,
                                      const std::vector<Placement>& layout,
                                      const std::vector<std::vector<double>>& noise) {
  std::vector<std::size_t> partial;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    if (layout[i].is_partial() && c.mesh.size(i) > 1) partial.push_back(i);
  }
  std::size_t n_terms = 1;
  for (const auto i : partial) n_terms *= static_cast<std::size_t>(c.mesh.size(i));
  std::vector<Tensor<double>> terms(n_terms, x);
  for (std::size_t t = 1; t < n_terms; ++t) {
    for (std::size_t k = 0; k < x.size(); ++k) {
      const double e = noise[t][k];
      switch (c.op) {
        case ReduceOp::sum:
          terms[t].data()[k] = e;
          terms[0].data()[k] -= e;
          break;
        case ReduceOp::max: terms[t].data()[k] = x.data()[k] - std::abs(e); break;
        case ReduceOp::min: terms[t].data()[k] = x.data()[k] + std::abs(e); break;
        default: break;  // avg, product: equal terms
      }
    }
  }
  std::vector<Tensor<double>> pieces;
  for (int r = 0; r < c.mesh.world_size(); ++r) {
    const auto co = c.mesh.coordinates(r);
    const std::size_t t = layout_test::partial_term(c.mesh, partial, co);
    const auto piece = local_piece(c.global, c.mesh, layout, co);
    Tensor<double> out(piece.shape);
    detail::copy_block(terms[t].data(), c.global, piece.offset, out.data(), piece.shape,
                       Shape(piece.shape.size(), 0), piece.shape);
    pieces.push_back(std::move(out));
  }
  return pieces;
}

// The global tensor the pieces stand for, reducing Partial terms exactly (integers).
Tensor<double> global_of(const std::vector<Tensor<double>>& pieces, const Case& c,
                         const std::vector<Placement>& layout) {
  const auto m = materialize(pieces, c.mesh, layout, c.global);
  RC_ASSERT(m.divergent_ranks.empty());
  if (!m.reduce_op) return m.terms.at(0);
  Tensor<double> out = m.terms.at(0);
  for (std::size_t t = 1; t < m.terms.size(); ++t) {
    for (std::size_t k = 0; k < out.size(); ++k) {
      const double v = m.terms[t].data()[k];
      double& o = out.data()[k];
      switch (*m.reduce_op) {
        case ReduceOp::sum:
        case ReduceOp::avg: o += v; break;
        case ReduceOp::max: o = std::max(o, v); break;
        case ReduceOp::min: o = std::min(o, v); break;
        default: break;
      }
    }
  }
  if (*m.reduce_op == ReduceOp::avg) {
    for (auto& v : out.values()) v /= static_cast<double>(m.terms.size());
  }
  return out;
}

struct Outcome {
  DeviceMesh mesh = DeviceMesh::line(1);
  std::vector<Tensor<double>> pieces;
  std::vector<RedistributePlan> plans;
  std::vector<std::vector<LedgerEntry>> ledgers;
};

Outcome run_redistribute(const Case& c, const std::vector<Tensor<double>>& in,
                         const std::vector<Placement>& from, const std::vector<Placement>& to,
                         const RedistributeImpl& impl = library_redistribute()) {
  Outcome o;
  o.mesh = c.mesh;
  o.pieces.resize(in.size());
  o.plans.resize(in.size());
  o.ledgers.resize(in.size());
  run(c.mesh.world_size(), [&](Communicator& world) {
    MeshGroups groups(world, c.mesh);
    const auto r = static_cast<std::size_t>(world.rank());
    try {  // the library's plan, for the ledger check (an impossible transition has none)
      o.plans[r] =
          plan_redistribute(c.global, DType::float64, c.mesh, from, to, groups.coordinates());
    } catch (const UsageError&) {
    }
    world.ledger().clear();
    o.pieces[r] = impl.run(groups, in[r], c.global, from, to);
    o.ledgers[r] = world.ledger().entries();
  });
  return o;
}

std::vector<std::vector<double>> genNoise(std::size_t terms, std::size_t n) {
  return *rc::gen::container<std::vector<std::vector<double>>>(
      terms, rc::gen::container<std::vector<double>>(
                 n, rc::gen::map(rc::gen::inRange(-20, 21), [](int v) { return double(v); })));
}

// materialize(impl(x)) == materialize(x); returns what ran, for the ledger check.
Outcome check_preserves(const RedistributeImpl& impl) {
  const auto c = *genCase();
  RC_TAG(c.mesh.ndim());
  Tensor<double> x(c.global);
  const auto xs = *rc::gen::container<std::vector<double>>(
      x.size(), rc::gen::map(rc::gen::inRange(-50, 51), [](int v) { return double(v); }));
  std::copy(xs.begin(), xs.end(), x.data());
  const auto noise = genNoise(64, x.size());
  const auto in = pieces_of(x, c, c.from, noise);
  auto o = run_redistribute(c, in, c.from, c.to, impl);  // not const: returned by move
  std::set<std::string> kinds;
  for (const auto& plan : o.plans) {
    for (const auto& s : plan.steps) kinds.insert(std::string(name(s.kind)));
  }
  for (const char* k : {"all_gather", "all_reduce", "reduce_scatter", "all_to_all", "local slice",
                        "keep on coordinate 0"}) {
    RC_CLASSIFY(kinds.count(k) != 0, k);
  }
  const auto got = global_of(o.pieces, c, c.to);
  RC_ASSERT(bit_equal(got, x));
  return o;
}

RC_GTEST_PROP(redistribute, preserves_the_global_tensor_and_matches_its_declared_plan, ()) {
  const auto o = check_preserves(library_redistribute());
  // Each rank's ledger holds exactly the plan's collectives, in order, with its bytes.
  for (std::size_t r = 0; r < o.plans.size(); ++r) {
    std::vector<const RedistributeStep*> coll;
    for (const auto& s : o.plans[r].steps) {
      if (s.is_collective()) coll.push_back(&s);
    }
    RC_ASSERT(o.ledgers[r].size() == coll.size());
    for (std::size_t k = 0; k < coll.size(); ++k) {
      RC_ASSERT(std::string(name(o.ledgers[r][k].op)) == std::string(name(coll[k]->kind)));
      if (o.ledgers[r][k].bytes_sent != coll[k]->sent_bytes) {
        RC_FAIL("rank " + std::to_string(r) + " step " + coll[k]->to_string(o.mesh) +
                " but the ledger has " + o.ledgers[r][k].to_string());
      }
      if (o.ledgers[r][k].bytes_recv != coll[k]->received_bytes) {
        RC_FAIL("rank " + std::to_string(r) + " step " + coll[k]->to_string(o.mesh) +
                " but the ledger has " + o.ledgers[r][k].to_string());
      }
    }
  }
}

// Shard/Replicate layouts: there and back returns every rank's original piece, bit for bit.
RC_GTEST_PROP(redistribute, a_round_trip_returns_the_original_pieces, ()) {
  auto c = *genCase();
  for (auto* layout : {&c.from, &c.to}) {
    for (auto& p : *layout) {
      if (p.is_partial()) p = Placement::replicate();
    }
  }
  Tensor<double> x(c.global);
  for (std::size_t k = 0; k < x.size(); ++k) x.data()[k] = static_cast<double>(k) + 0.25;
  const auto in = pieces_of(x, c, c.from, {});
  const auto there = run_redistribute(c, in, c.from, c.to);
  const auto back = run_redistribute(c, there.pieces, c.to, c.from);
  for (std::size_t r = 0; r < in.size(); ++r) RC_ASSERT(bit_equal(back.pieces[r], in[r]));
}

// An impossible transition on some mesh dimension (S -> P, or P(a) -> P(b)) is refused with a
// UsageError on every rank, never carried out.
void check_refuses(const RedistributeImpl& impl) {
  auto c = *genCase();
  const auto i = *rc::gen::inRange<std::size_t>(0, c.mesh.ndim());
  auto dims = c.mesh.dims();
  dims[i].size = std::max(dims[i].size, 2);
  c.mesh = DeviceMesh(dims);
  // Explicit sizes tile only the shapes they were drawn for: back to torch.chunk here.
  for (auto* layout : {&c.from, &c.to}) {
    for (auto& pl : *layout) {
      if (pl.is_shard()) pl = Placement::shard(pl.dim());
    }
  }
  if (*rc::gen::arbitrary<bool>()) {
    const ReduceOp ops[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min};
    const auto k = *rc::gen::inRange(1, 4);
    ReduceOp other = c.op;
    for (int j = 0; j < 4; ++j) {
      if (ops[j] == c.op) other = ops[(j + k) % 4];
    }
    c.from[i] = Placement::partial(c.op);
    c.to[i] = Placement::partial(other);
  } else {
    c.from[i] = Placement::shard(0);
    c.to[i] = Placement::partial(c.op);
  }
  RC_CLASSIFY(c.from[i].is_partial(), "P(a) -> P(b)");
  const auto in = pieces_of(Tensor<double>(c.global), c, c.from, genNoise(64, numel(c.global)));
  try {
    run_redistribute(c, in, c.from, c.to, impl);
  } catch (const RankFailure& e) {
    for (const auto& err : e.all()) {
      RC_ASSERT(holds<UsageError>(err.error) || holds<PeerAborted>(err.error));
    }
    return;
  }
  RC_FAIL("redistribute " + format_placements(c.from) + " -> " + format_placements(c.to) +
          " ran instead of being refused");
}

RC_GTEST_PROP(redistribute, impossible_transitions_are_refused, ()) {
  check_refuses(library_redistribute());
}

// Every mutant of the catalog is killed by one of the two properties above, at the case count
// the test command uses.
TEST(redistribute_mutants, every_mutant_is_killed) {
#if defined(__SANITIZE_ADDRESS__)
  // Kills are about the properties' power, measured at the default preset's 300 cases; the
  // ASan preset runs 30 (the linear suite's mutant tests skip there too).
  GTEST_SKIP() << "mutant kills are checked by the default preset";
#endif
  const auto mutants = redistribute_mutants();
  EXPECT_GE(mutants.size(), 8U);
  for (const auto& m : mutants) {
    std::string killer;
    if (!rc::check(m.name + ": preserves the global tensor", [&] { check_preserves(m); })) {
      killer = "preserves_the_global_tensor";
    } else if (!rc::check(m.name + ": refuses impossible transitions", [&] { check_refuses(m); })) {
      killer = "impossible_transitions_are_refused";
    }
    EXPECT_FALSE(killer.empty()) << m.name << " SURVIVED: " << m.description;
    std::printf("%-52s killed by %s\n", m.name.c_str(), killer.c_str());
  }
}

TEST(redistribute, the_plan_names_each_step_and_its_collective) {
  const DeviceMesh mesh({{"dp", 2}, {"tp", 2}});
  const auto plan =
      plan_redistribute({5, 4}, DType::float32, mesh, {Placement::shard(0), Placement::shard(0)},
                        {Placement::replicate(), Placement::shard(1)}, {0, 0});
  // Innermost cut undone first: tp gathers rows 2|1 of the dp piece (3 rows), then dp gathers
  // 3|2 rows; then tp slices columns.
  EXPECT_EQ(plan.to_string(mesh),
            "tp: S(0) -> R all_gather [2, 4] -> [3, 4], sent 32 B, received 16 B\n"
            "dp: S(0) -> R all_gather [3, 4] -> [5, 4], sent 48 B, received 32 B\n"
            "tp: R -> S(1) local slice [5, 4] -> [5, 2], sent 0 B, received 0 B\n");
}

TEST(redistribute, a_single_shard_dimension_change_is_one_all_to_all) {
  const DeviceMesh mesh = DeviceMesh::line(3, "cp");
  const auto plan = plan_redistribute({7, 5}, DType::float32, mesh, {Placement::shard(0)},
                                      {Placement::shard(1)}, {2});
  ASSERT_EQ(plan.steps.size(), 1U);
  EXPECT_EQ(plan.steps[0].kind, RedistributeStep::Kind::all_to_all);
  EXPECT_EQ(plan.steps[0].before, (Shape{1, 5}));  // chunk 7/3 = 3,3,1
  EXPECT_EQ(plan.steps[0].after, (Shape{7, 1}));   // chunk 5/3 = 2,2,1
}

// R -> P(sum): coordinate 0 keeps the value and the others hold zeros (exact), not value/P.
TEST(redistribute, replicate_to_partial_sum_keeps_the_value_on_coordinate_zero) {
  const DeviceMesh mesh = DeviceMesh::line(3);
  std::vector<Tensor<double>> out(3);
  run(3, [&](Communicator& world) {
    MeshGroups g(world, mesh);
    const Tensor<double> x({2}, {1.5, -3.0});
    out[static_cast<std::size_t>(world.rank())] =
        redistribute(g, x, {2}, {Placement::replicate()}, {Placement::partial()});
  });
  EXPECT_EQ(out[0].values(), (std::vector<double>{1.5, -3.0}));
  EXPECT_EQ(out[1].values(), (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(out[2].values(), (std::vector<double>{0.0, 0.0}));
}

TEST(redistribute, impossible_transitions_are_usage_errors) {
  const DeviceMesh mesh({{"dp", 2}, {"tp", 2}});
  expect_usage_error(
      [&] {
        plan_redistribute({4}, DType::float32, mesh, {Placement::shard(0), Placement::replicate()},
                          {Placement::partial(), Placement::replicate()}, {0, 0});
      },
      {"[S(0), R] -> [P(sum), R]", "(dp=2, tp=2)", "dp goes S(0) -> P(sum)", "Go through R"});
  expect_usage_error(
      [&] {
        plan_redistribute({4}, DType::float32, mesh,
                          {Placement::replicate(), Placement::partial(ReduceOp::sum)},
                          {Placement::replicate(), Placement::partial(ReduceOp::avg)}, {0, 0});
      },
      {"tp goes P(sum) -> P(avg)", "no conversion between reductions is exact"});
  expect_usage_error(
      [&] {
        plan_redistribute({4}, DType::float32, mesh, {Placement::shard(0)},
                          {Placement::replicate()}, {0, 0});
      },
      {"one placement per mesh dimension (2)"});
}

TEST(redistribute, a_piece_of_the_wrong_shape_is_a_usage_error) {
  try {
    run(2, [](Communicator& world) {
      MeshGroups g(world, DeviceMesh::line(2));
      const Tensor<double> x({3});
      (void)redistribute(g, x, {5}, {Placement::shard(0)}, {Placement::replicate()});
    });
    ADD_FAILURE() << "no error";
  } catch (const RankFailure& e) {
    EXPECT_NE(std::string(e.what()).find("holds [3] but its piece of [5] under [S(0)] is ["),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace shardcheck
