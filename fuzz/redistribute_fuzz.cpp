// libFuzzer harness for the redistribute planner and executor (lib/layout/redistribute.hpp) on
// any 1-D or 2-D device mesh of up to 8 ranks, tensors of rank 1 or 2 with dimensions 0-6 (uneven
// and empty pieces), placements Shard (chunk, balanced; nested on one tensor dimension included),
// Replicate and Partial (sum, max) on each mesh dimension; int64 elements, so every reduction is
// exact (layout in redistribute_input.hpp).
//
// Invariant. With G the global tensor and the ranks' pieces of G under `from` (a Partial
// dimension's terms: offsets o_r on every rank but the first of its group, the first holding
// G − Σ o_r for sum, G itself with the others holding G − |o_r| for max; replicas, ranks that
// differ only in Replicate coordinates, hold the same offsets):
//   - refused exactly when the contract says so: a Shard of a dimension the tensor lacks, or on
//     some mesh dimension S -> P or P(a) -> P(b) with a != b; then plan_redistribute throws
//     UsageError and redistribute fails on the ranks with UsageError;
//   - otherwise every rank's ledger holds exactly its plan's collectives, in order, each with the
//     plan's declared bytes sent and received (the plan's declaration is what the ledger says);
//     the result's pieces have local_piece()'s shapes and stand for G under `to` (materialized,
//     and for Partial reduced exactly: G bit for bit; replicas identical); and when `to` -> `from`
//     is allowed too, redistributing back gives pieces that stand for G again (the very pieces
//     we started from when `from` has no Partial).
// A violation prints the problem and aborts.
#include "harness_support.hpp"
#include "redistribute_input.hpp"

#include "layout/materialize_mesh.hpp"
#include "layout/redistribute.hpp"
#include "runtime/errors.hpp"
#include "runtime/launcher.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace shardcheck::fuzz {
namespace {

using T = std::int64_t;

[[noreturn]] void violation(const RedistributeInput& in, const std::string& what) {
  report_violation("redistribute", describe(in), what);
}

// A value byte as a two's complement int8.
T signed_byte(std::uint8_t b) { return b < 128 ? T{b} : T{b} - 256; }

bool layout_ok(const std::vector<Placement>& ps, std::size_t rank) {
  return std::all_of(ps.begin(), ps.end(),
                     [&](const Placement& p) { return !p.is_shard() || p.dim() < rank; });
}

bool allowed(const std::vector<Placement>& from, const std::vector<Placement>& to,
             std::size_t rank) {
  if (!layout_ok(from, rank) || !layout_ok(to, rank)) return false;
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (from[i].is_shard() && to[i].is_partial()) return false;
    if (from[i].is_partial() && to[i].is_partial() && from[i].reduce_op() != to[i].reduce_op())
      return false;
  }
  return true;
}

struct Problem {
  const RedistributeInput& in;
  DeviceMesh mesh{in.mesh};
  Tensor<T> G{in.global};

  explicit Problem(const RedistributeInput& input) : in(input) {
    for (std::size_t k = 0; k < G.size(); ++k)
      G.values()[k] = signed_byte(in.rest[k % in.rest.size()]);
  }

  // The piece of world rank r under ps, with Partial terms as the header says.
  Tensor<T> piece(const std::vector<Placement>& ps, int r) const {
    const auto coords = mesh.coordinates(r);
    const LocalPiece lp = local_piece(G.shape(), mesh, ps, coords);
    Tensor<T> x(lp.shape);
    detail::copy_block(G.data(), G.shape(), lp.offset, x.data(), lp.shape,
                       Shape(lp.shape.size(), 0), lp.shape);
    std::optional<ReduceOp> op;
    bool first = true;  // every Partial coordinate 0
    for (std::size_t i = 0; i < ps.size(); ++i) {
      if (!ps[i].is_partial()) continue;
      op = ps[i].reduce_op();
      first = first && coords[i] == 0;
    }
    if (!op) return x;
    // A rank's offsets are keyed by its coordinates with every Replicate coordinate set to 0:
    // ranks that differ only there are replicas and must hold the same bits (keying them by the
    // world rank gave replicas different terms, which materialize rightly calls divergent:
    // fuzz/corpus/redistribute/regression-identity-partial-max-replicas-share-offsets).
    const auto offset = [&](int rank, std::size_t k) -> T {
      auto key = mesh.coordinates(rank);
      for (std::size_t i = 0; i < ps.size(); ++i)
        if (ps[i].is_replicate()) key[i] = 0;
      const auto slot = static_cast<std::size_t>(mesh.rank_of(key));
      return signed_byte(in.rest[(slot * 37 + k + 11) % in.rest.size()]);
    };
    for (std::size_t k = 0; k < x.size(); ++k) {
      if (*op == ReduceOp::max) {
        if (!first) x.values()[k] -= std::abs(offset(r, k));
        continue;
      }
      if (!first) {
        x.values()[k] = offset(r, k);
        continue;
      }
      for (int s = 0; s < mesh.world_size(); ++s) {
        const auto cs = mesh.coordinates(s);
        bool same = s != r;
        for (std::size_t i = 0; i < ps.size() && same; ++i)
          same = ps[i].is_partial() || cs[i] == coords[i];
        if (same) x.values()[k] -= offset(s, k);
      }
    }
    return x;
  }

  // The pieces stand for G under ps.
  void stands_for_g(const std::vector<Tensor<T>>& pieces, const std::vector<Placement>& ps,
                    const std::string& what) const {
    MeshMaterialized<T> m;
    try {
      m = materialize(pieces, mesh, ps, G.shape());
    } catch (const UsageError& e) {
      violation(in, what + ": the pieces do not have the layout's shapes: " + e.what());
    }
    if (!m.divergent_ranks.empty())
      violation(in, what + ": rank " + std::to_string(m.divergent_ranks[0]) +
                        " differs from its replica");
    Tensor<T> g = m.terms.at(0);
    for (std::size_t t = 1; t < m.terms.size(); ++t) {
      for (std::size_t k = 0; k < g.size(); ++k) {
        const T v = m.terms[t].values()[k];
        g.values()[k] =
            *m.reduce_op == ReduceOp::max ? std::max(g.values()[k], v) : g.values()[k] + v;
      }
    }
    if (g.values() != G.values()) violation(in, what + ": the pieces do not stand for G");
  }

  void ledger_matches(const Ledger& l, const std::vector<RedistributePlan>& plans, int r) const {
    std::vector<const RedistributeStep*> steps;
    for (const auto& p : plans)
      for (const auto& s : p.steps)
        if (s.is_collective()) steps.push_back(&s);
    const auto& e = l.entries();
    const std::string at = "rank " + std::to_string(r) + ": ";
    if (e.size() != steps.size()) {
      violation(in, at + "the ledger has " + std::to_string(e.size()) + " entries, the plans " +
                        std::to_string(steps.size()) + " collectives");
    }
    for (std::size_t k = 0; k < e.size(); ++k) {
      const auto& s = *steps[k];
      if (e[k].bytes_sent != s.sent_bytes || e[k].bytes_recv != s.received_bytes) {
        violation(in, at + "entry " + e[k].to_string() + " against the declared step " +
                          s.to_string(mesh));
      }
    }
  }

  void run_and_check() const {
    const int world = mesh.world_size();
    const std::size_t rank = G.shape().size();
    const bool ok = allowed(in.from, in.to, rank);
    const bool back = ok && allowed(in.to, in.from, rank);
    if (!ok) {
      try {
        plan_redistribute(G.shape(), DType::int64, mesh, in.from, in.to, mesh.coordinates(0));
      } catch (const UsageError&) {
        return;  // refused, as it must be (run() with the same layouts fails the same way)
      } catch (const std::exception& e) {
        violation(in, std::string("plan_redistribute threw something else: ") + e.what());
      }
      violation(in, "plan_redistribute accepted a transition the contract refuses");
    }
    std::vector<Tensor<T>> start(static_cast<std::size_t>(world)), out(start.size()),
        home(start.size());
    for (int r = 0; r < world; ++r) start[static_cast<std::size_t>(r)] = piece(in.from, r);
    // The harness checks its own pieces first: a reduce-scatter can turn wrong terms into a right
    // result, so a fault here would otherwise show only on some transitions, blamed on the
    // library (the identity of [R, P(max)] did).
    stands_for_g(start, in.from, "the harness's own pieces (a harness bug)");
    RunResult res;
    try {
      RunOptions opt;
      opt.timeout = std::chrono::milliseconds(2000);
      res = run(
          world,
          [&](Communicator& c) {
            const MeshGroups g(c, mesh);
            const auto r = static_cast<std::size_t>(c.rank());
            c.ledger().clear();  // group creation is not the plan's business
            out[r] = redistribute<T>(g, start[r], G.shape(), in.from, in.to);
            if (back) home[r] = redistribute<T>(g, out[r], G.shape(), in.to, in.from);
          },
          opt);
    } catch (const RankFailure& f) {
      violation(in, std::string("an allowed redistribution failed: ") + f.what());
    }
    for (int r = 0; r < world; ++r) {
      std::vector<RedistributePlan> plans{
          plan_redistribute(G.shape(), DType::int64, mesh, in.from, in.to, mesh.coordinates(r))};
      if (back)
        plans.push_back(
            plan_redistribute(G.shape(), DType::int64, mesh, in.to, in.from, mesh.coordinates(r)));
      ledger_matches(res.ledgers[static_cast<std::size_t>(r)], plans, r);
    }
    stands_for_g(out, in.to, "after redistribute");
    if (!back) return;
    stands_for_g(home, in.from, "after the way back");
    const bool from_partial = std::any_of(in.from.begin(), in.from.end(),
                                          [](const Placement& p) { return p.is_partial(); });
    if (!from_partial) {
      for (std::size_t r = 0; r < start.size(); ++r) {
        if (home[r].shape() != start[r].shape() || home[r].values() != start[r].values())
          violation(in, "rank " + std::to_string(r) + " does not get its piece back");
      }
    }
  }
};

}  // namespace
}  // namespace shardcheck::fuzz

// libomp's idle threads would spin 200 ms after each input's ranks (see collectives_fuzz.cpp).
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  kmp_set_blocktime(0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardcheck::fuzz;
  const RedistributeInput in = decode_redistribute_input({data, size});
  if (std::getenv("SHARDCHECK_FUZZ_VERBOSE") != nullptr)
    std::fprintf(stderr, "%s", describe(in).c_str());
  Problem(in).run_and_check();
  return 0;
}
