// The redistribute suite: DTensor-style redistribution on 1-D to 3-D device meshes
// (lib/layout/redistribute.hpp) for every valid pair of layouts, uneven and explicit shards
// included: the global tensor is kept (exactly, and in rounding arithmetic within the bound of
// its reductions), round trips return the original pieces, the ledger equals the declared plan,
// and impossible transitions are refused. On the generic engine (engine/family.hpp); the checks
// are redistribute_checks.hpp's.
#include "suites/redistribute/redistribute_suite.hpp"

#include "engine/family.hpp"
#include "suites/redistribute/redistribute_case.hpp"
#include "suites/redistribute/redistribute_checks.hpp"
#include "suites/redistribute/redistribute_mutants.hpp"

#include <memory>
#include <type_traits>
#include <vector>

namespace shardcheck::check {
namespace {

// Whether `impl` claims the library's plan (ImplementationInfo::deterministic), found by its
// registry entry.
bool claims_plan(const RedistributeImplementation& impl) {
  const auto* e = RedistributeRegistry::instance().entry_of(impl);
  return e != nullptr && e->info.deterministic;
}

// Each property is a check of its own.
enum class RedistributeCheck { preserves, ledger, round_trip, refuses, movement, reductions };

template <RedistributeDraw D>
void draw(RedistributeOptions& o, const RunConfig& /*config*/) {
  o.draw = D;
}

struct RedistributeFamily : FamilyTypes<RedistributeImplementation, RedistributeCase,
                                        RedistributeOptions, RedistributeCheck> {
  static constexpr FamilyInfo info = {
      "redistribute",
      "redistribution between layouts on a device mesh (Shard under chunk, balanced and "
      "explicit splits, Replicate, Partial(sum, avg, max, min)): the global tensor kept exactly "
      "and within the bound of its reductions, round trips, the declared plan's ledger, refusals",
      "the library's redistribute (lib/layout/redistribute.hpp)"};

  static constexpr Row properties[] = {
      own_property({"preserves_the_global_tensor",
                    "materialize(redistribute(x, from -> to)) == materialize(x), bit for bit, "
                    "for every valid pair of layouts on a 1-D to 3-D mesh (uneven and explicit "
                    "shards with empty pieces, nested shards of one dimension, Partial terms of "
                    "small integers whose reduction is exact)"},
                   RedistributeCheck::preserves, draw<RedistributeDraw::exact>),
      own_property({"ledger_matches_the_declared_plan",
                    "each rank's ledger holds exactly the collectives of plan_redistribute's "
                    "plan, in order, with the plan's bytes sent and received (for "
                    "implementations that claim the library's plan)"},
                   RedistributeCheck::ledger, draw<RedistributeDraw::exact>,
                   /*deterministic_only=*/true),
      own_property({"a_round_trip_returns_the_original_pieces",
                    "for Shard/Replicate layouts, from -> to -> from returns every rank's "
                    "original piece, bit for bit"},
                   RedistributeCheck::round_trip, draw<RedistributeDraw::round_trip>),
      own_property({"impossible_transitions_are_refused",
                    "a transition with no exact meaning on some mesh dimension (S -> P, or P(a) "
                    "-> P(b)) is refused with a UsageError on every rank, never carried out "
                    "(for implementations that claim the library's plan)"},
                   RedistributeCheck::refuses, draw<RedistributeDraw::impossible>,
                   /*deterministic_only=*/true),
      own_property({"data_movement_is_bitwise",
                    "in float64, float32, bfloat16 and float16, Shard/Replicate redistribution "
                    "moves every value bit for bit (NaN, ±inf, -0 and subnormals included) and "
                    "every replica is identical"},
                   RedistributeCheck::movement, draw<RedistributeDraw::data_movement>),
      own_property({"reductions_are_within_the_bound",
                    "in float64, float32, bfloat16 and float16, Partial(sum, avg) terms reduced "
                    "by all_reduce / reduce_scatter are within gamma_a(u)·Σ|terms| (+ k·eta for "
                    "avg) of the exact reduction, a the additions per term (Higham §4.2), and "
                    "max/min are exact",
                    /*numeric=*/true},
                   RedistributeCheck::reductions, draw<RedistributeDraw::reduction>),
  };

  using Library = RedistributeAdapter<LibraryRedistribute>;
  static constexpr auto mutants = redistribute_mutants;

  template <class Fn>
  static void visit_types(const Case& c, Fn&& fn) {
    FloatTypes::visit_types(c, std::forward<Fn>(fn));
  }

  template <class T>
  static void check_case(const Row& p, const Interface& impl, const Case& c) {
    switch (p.own) {
      case RedistributeCheck::movement: check_movement<T>(impl, c); return;
      case RedistributeCheck::reductions: check_reductions<T>(impl, c, claims_plan(impl)); return;
      default: break;
    }
    // The exact checks draw float64 only (gen_case): small integers stay exact there.
    if constexpr (std::is_same_v<T, double>) {
      switch (p.own) {
        case RedistributeCheck::preserves: check_preserves(impl, c); return;
        case RedistributeCheck::ledger: check_ledger(impl, c); return;
        case RedistributeCheck::round_trip: check_round_trip(impl, c); return;
        case RedistributeCheck::refuses: check_refuses(impl, c); return;
        default: return;
      }
    }
  }
};

}  // namespace

void register_redistribute_suite() {
  register_family<RedistributeFamily>();
  RedistributeRegistry::instance().add_once(
      {.name = "via-replicate",
       .description = "a correct redistribution that is not the library's plan: every Partial "
                      "reduced and every Shard gathered to the replicated layout, then the "
                      "target cut (more bytes than the plan, so it claims no plan)"},
      std::make_shared<const RedistributeAdapter<ViaReplicateRedistribute>>());
}

}  // namespace shardcheck::check
