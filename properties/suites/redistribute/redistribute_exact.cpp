// The redistribute suite's exact checks (redistribute_checks.hpp): small integers in float64,
// where every reduction of the case is exact, so every result is compared bit for bit. Also the
// helpers every check shares: the pieces of a global tensor, the run on the ranks and the first
// differing element.
#include "engine/rank_family.hpp"
#include "engine/tensor_check.hpp"
#include "engine/verdict.hpp"
#include "layout/materialize_mesh.hpp"
#include "runtime/errors.hpp"
#include "runtime/launcher.hpp"
#include "suites/redistribute/redistribute_checks.hpp"

#include <rapidcheck.h>

#include <array>
#include <bit>
#include <cmath>
#include <set>
#include <sstream>

namespace shardcheck::check {

template <class T>
std::vector<Tensor<T>> pieces_of_terms(const std::vector<Tensor<T>>& terms,
                                       const RedistributeCase& c,
                                       const std::vector<Placement>& layout) {
  std::vector<Tensor<T>> pieces;
  for (int r = 0; r < c.mesh.world_size(); ++r) {
    const auto co = c.mesh.coordinates(r);
    const auto piece = local_piece(c.global, c.mesh, layout, co);
    Tensor<T> out(piece.shape);
    shardcheck::detail::copy_block(terms.at(term_of(c.mesh, layout, co)).data(), c.global,
                                   piece.offset, out.data(), piece.shape,
                                   Shape(piece.shape.size(), 0), piece.shape);
    pieces.push_back(std::move(out));
  }
  return pieces;
}

// What one rank returns: its piece under `to` and its ledger's entries of the redistribution.
template <class T>
struct RedistributeRankOutputs {
  Tensor<T> piece;
  std::vector<LedgerEntry> ledger;
};

template <class T, class F>  // f(every member): the MPI case driver's bytes (engine/rank_bytes.hpp)
void fields(RedistributeRankOutputs<T>& o, F&& f) {
  f(o.piece, o.ledger);
}

template <class T>
RedistributeRun<T> run_redistribute(const RedistributeImplementation& impl,
                                    const RedistributeCase& c, const std::vector<Tensor<T>>& in,
                                    const std::vector<Placement>& from,
                                    const std::vector<Placement>& to) {
  auto run =
      outputs_of_ranks<RedistributeRankOutputs<T>>(c.mesh.world_size(), [&](Communicator& world) {
        MeshGroups groups(world, c.mesh);
        world.ledger().clear();
        RedistributeRankOutputs<T> o;
        o.piece = impl.redistribute(groups, in[static_cast<std::size_t>(world.rank())], c.global,
                                    from, to);
        o.ledger = world.ledger().entries();
        return o;
      });
  RedistributeRun<T> o;
  for (auto& r : run.outputs) {
    o.pieces.push_back(std::move(r.piece));
    o.ledgers.push_back(std::move(r.ledger));
  }
  return o;
}

template <class T>
std::string first_difference(const Tensor<T>& got, const Tensor<T>& want) {
  for (std::size_t k = 0; k < want.size(); ++k) {
    using Bits = std::array<unsigned char, sizeof(T)>;  // the same bits, NaN payloads included
    if (std::bit_cast<Bits>(got[k]) == std::bit_cast<Bits>(want[k])) continue;
    std::ostringstream os;
    os.precision(17);
    os << "element " << format_shape(detail::unravel(k, want.shape())) << " (flat " << k
       << "): " << static_cast<double>(got[k]) << " where " << static_cast<double>(want[k])
       << " was expected";
    return os.str();
  }
  return {};
}

// A type in a template argument list cannot be parenthesized:
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SHARDCHECK_DETAIL_REDISTRIBUTE_HELPERS(T)                                                \
  template std::vector<Tensor<T>> pieces_of_terms<T>(                                            \
      const std::vector<Tensor<T>>&, const RedistributeCase&, const std::vector<Placement>&);    \
  template RedistributeRun<T> run_redistribute<T>(                                               \
      const RedistributeImplementation&, const RedistributeCase&, const std::vector<Tensor<T>>&, \
      const std::vector<Placement>&, const std::vector<Placement>&);                             \
  template std::string first_difference<T>(const Tensor<T>&, const Tensor<T>&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_DETAIL_REDISTRIBUTE_HELPERS)
#undef SHARDCHECK_DETAIL_REDISTRIBUTE_HELPERS
// NOLINTEND(bugprone-macro-parentheses)

namespace {

// The Partial terms of x under `layout`: small integers whose reduction by c.op is exactly x
// (sum: random terms, the first fixed up; avg: equal terms; max/min: the first term is x, the
// others below/above it).
std::vector<Tensor<double>> terms_of(const Tensor<double>& x, const RedistributeCase& c,
                                     const std::vector<Placement>& layout) {
  const std::size_t n = term_count(c.mesh, layout);
  std::vector<Tensor<double>> terms(n, x);
  const auto noise = *rc::gen::container<std::vector<std::vector<double>>>(
      n, rc::gen::container<std::vector<double>>(
             x.size(), rc::gen::map(rc::gen::inRange(-20, 21), [](int v) { return double(v); })));
  for (std::size_t t = 1; t < n; ++t) {
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
  return terms;
}

// The global tensor the pieces stand for, reducing Partial terms exactly (integers); the
// failure in words when the pieces do not materialize (a wrong shape, replicas that differ).
std::string global_of(const std::vector<Tensor<double>>& pieces, const RedistributeCase& c,
                      const std::vector<Placement>& layout, Tensor<double>& out) {
  MeshMaterialized<double> m;
  try {
    m = materialize(pieces, c.mesh, layout, c.global);
  } catch (const UsageError& e) {
    return std::string("the result does not materialize: ") + e.what();
  }
  if (!m.divergent_ranks.empty()) {
    return "rank " + std::to_string(m.divergent_ranks[0]) +
           "'s replica differs in some bit from the replica it must equal";
  }
  out = m.terms.at(0);
  if (!m.reduce_op) return {};
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
  return {};
}

Tensor<double> small_integers(const Shape& shape) {
  Tensor<double> x(shape);
  const auto xs = *rc::gen::container<std::vector<double>>(
      x.size(), rc::gen::map(rc::gen::inRange(-50, 51), [](int v) { return double(v); }));
  std::copy(xs.begin(), xs.end(), x.data());
  return x;
}

// The step kinds of every rank's plan, as case statistics.
void classify_plan(const RedistributeCase& c) {
  std::set<std::string> kinds;
  for (int r = 0; r < c.mesh.world_size(); ++r) {
    try {
      const auto plan =
          plan_redistribute(c.global, c.dtype, c.mesh, c.from, c.to, c.mesh.coordinates(r));
      for (const auto& s : plan.steps) kinds.insert(std::string(name(s.kind)));
    } catch (const UsageError&) {
    }
  }
  for (const char* k : {"all_gather", "all_reduce", "reduce_scatter", "all_to_all", "local slice",
                        "keep on coordinate 0"}) {
    RC_CLASSIFY(kinds.count(k) != 0, k);
  }
}

CaseVerdict begin(const RedistributeCase& c) {
  CaseVerdict v;
  begin_verdict(v, "redistribute", c.dtype, c.mesh.world_size(), c.describe());
  return v;
}

}  // namespace

void check_preserves(const RedistributeImplementation& impl, const RedistributeCase& c) {
  classify_plan(c);
  const Tensor<double> x = small_integers(c.global);
  const auto in = pieces_of_terms(terms_of(x, c, c.from), c, c.from);
  CaseVerdict v = begin(c);
  try {
    const auto o = run_redistribute(impl, c, in, c.from, c.to);
    Tensor<double> got;
    if (auto problem = global_of(o.pieces, c, c.to, got); !problem.empty()) {
      v.failures.push_back(std::move(problem));
    } else if (auto diff = first_difference(got, x); !diff.empty()) {
      v.failures.push_back("the target layout stands for another tensor: " + diff);
    }
  } catch (const std::exception& e) {
    v.failures.push_back(std::string("the case stopped with an exception: ") + e.what());
  }
  conclude(v);
}

void check_ledger(const RedistributeImplementation& impl, const RedistributeCase& c) {
  const Tensor<double> x = small_integers(c.global);
  const auto in = pieces_of_terms(terms_of(x, c, c.from), c, c.from);
  CaseVerdict v = begin(c);
  try {
    const auto o = run_redistribute(impl, c, in, c.from, c.to);
    for (int r = 0; r < c.mesh.world_size() && v.failures.empty(); ++r) {
      const auto plan =
          plan_redistribute(c.global, DType::float64, c.mesh, c.from, c.to, c.mesh.coordinates(r));
      std::vector<const RedistributeStep*> coll;
      for (const auto& s : plan.steps) {
        if (s.is_collective()) coll.push_back(&s);
      }
      const auto& ledger = o.ledgers[static_cast<std::size_t>(r)];
      const std::string who = "rank " + std::to_string(r) + ": ";
      if (ledger.size() != coll.size()) {
        v.failures.push_back(who + "the ledger has " + std::to_string(ledger.size()) +
                             " collectives where the plan has " + std::to_string(coll.size()) +
                             ":\n" + plan.to_string(c.mesh));
        break;
      }
      for (std::size_t k = 0; k < coll.size(); ++k) {
        const auto& e = ledger[k];
        if (std::string(name(e.op)) != std::string(name(coll[k]->kind)) ||
            e.bytes_sent != coll[k]->sent_bytes || e.bytes_recv != coll[k]->received_bytes) {
          v.failures.push_back(who + "step " + coll[k]->to_string(c.mesh) + " but the ledger has " +
                               e.to_string());
          break;
        }
      }
    }
  } catch (const std::exception& e) {
    v.failures.push_back(std::string("the case stopped with an exception: ") + e.what());
  }
  conclude(v);
}

void check_round_trip(const RedistributeImplementation& impl, const RedistributeCase& c) {
  Tensor<double> x(c.global);
  for (std::size_t k = 0; k < x.size(); ++k) x.data()[k] = static_cast<double>(k) + 0.25;
  const auto in = pieces_of_terms(std::vector<Tensor<double>>{x}, c, c.from);
  CaseVerdict v = begin(c);
  try {
    const auto there = run_redistribute(impl, c, in, c.from, c.to);
    const auto back = run_redistribute(impl, c, there.pieces, c.to, c.from);
    for (std::size_t r = 0; r < in.size(); ++r) {
      if (back.pieces[r].shape() != in[r].shape()) {
        v.failures.push_back("rank " + std::to_string(r) + " comes back with " +
                             format_shape(back.pieces[r].shape()) + " where it held " +
                             format_shape(in[r].shape()));
      } else if (auto diff = first_difference(back.pieces[r], in[r]); !diff.empty()) {
        v.failures.push_back("rank " + std::to_string(r) +
                             " comes back with another piece: " + diff);
      }
      if (!v.failures.empty()) break;
    }
  } catch (const std::exception& e) {
    v.failures.push_back(std::string("the case stopped with an exception: ") + e.what());
  }
  conclude(v);
}

void check_refuses(const RedistributeImplementation& impl, const RedistributeCase& c) {
  std::size_t i = 0;
  while (i < c.from.size() && !(c.to[i].is_partial() && c.to[i] != c.from[i])) ++i;
  RC_CLASSIFY(i < c.from.size() && c.from[i].is_partial(), "P(a) -> P(b)");
  const Tensor<double> x = small_integers(c.global);
  const auto in = pieces_of_terms(terms_of(x, c, c.from), c, c.from);
  CaseVerdict v = begin(c);
  try {
    run_redistribute(impl, c, in, c.from, c.to);
    v.failures.push_back("redistribute " + format_placements(c.from) + " -> " +
                         format_placements(c.to) + " ran instead of being refused");
  } catch (const RankFailure& e) {
    for (const auto& err : e.all()) {
      if (holds<UsageError>(err.error) || holds<PeerAborted>(err.error)) continue;
      v.failures.push_back("rank " + std::to_string(err.rank) +
                           " failed with another error than a UsageError: " + e.what());
      break;
    }
  } catch (const std::exception& e) {
    v.failures.push_back(std::string("the case stopped with an exception: ") + e.what());
  }
  conclude(v);
}

}  // namespace shardcheck::check
