// The attention suite: context-parallel attention (ring and all-gather, contiguous and zigzag
// layouts) and the head-partitioned attention layer on a (cp, tp) mesh, forward and backward,
// against the dense high-precision reference; the declared traffic; the bit-identity of
// replicated results.
#include "suites/attention/attention_suite.hpp"

#include "engine/instantiate.hpp"
#include "engine/rank_family.hpp"
#include "engine/verdict.hpp"
#include "suites/attention/attention_expected.hpp"
#include "suites/attention/attention_mutants.hpp"
#include "suites/attention/attention_run.hpp"

#include <rapidcheck.h>

namespace shardcheck::check {
namespace {

std::vector<std::size_t> sizes_along(const AttentionCase& c, bool queries = false) {
  std::vector<std::size_t> s;
  s.reserve(static_cast<std::size_t>(c.cp));
  for (int j = 0; j < c.cp; ++j) {
    s.push_back(queries ? query_positions_of(c, j).size() : positions_of(c, j).size());
  }
  return s;
}

// A layer's [batch, L, hidden] expected tensor (the sequence in cp order) as the token rows the
// world ranks hold under sequence parallelism, rank after rank: cp piece j's [batch, L_j, hidden]
// flattened (batch-major), the pieces in cp order. The ranks' rows are then a Shard of its first
// dimension by world rank (cp_rank·tp + tp_rank), so a verdict names the world rank.
ExpectedTensor in_token_rows(const ExpectedTensor& x, const AttentionCase& c) {
  const std::size_t batch = x.value.dim(0), len = x.value.dim(1), width = x.value.dim(2);
  const Shape shape{batch * len, width};
  ExpectedTensor out{Tensor<reference::hp>(shape), Tensor<reference::hp>(shape)};
  std::size_t row = 0, first = 0;  // first: cp piece j's offset along the cp-ordered sequence
  for (const std::size_t n : sizes_along(c)) {
    for (std::size_t b = 0; b < batch; ++b) {
      for (std::size_t t = first; t < first + n; ++t, ++row) {
        for (std::size_t k = 0; k < width; ++k) {
          out.value[row * width + k] = x.value[(b * len + t) * width + k];
          out.bound[row * width + k] = x.bound[(b * len + t) * width + k];
        }
      }
    }
    first += n;
  }
  return out;
}

template <class T>
void core_checks(CaseVerdict& v, const AttentionCase& c, const AttentionRun<T>& run,
                 const AttentionExpected& e) {
  const auto seq = SplitPolicy::explicit_sizes(sizes_along(c));
  const auto qseq = SplitPolicy::explicit_sizes(sizes_along(c, /*queries=*/true));
  const auto k1 = Placement::shard(1, seq);
  const auto q1 = Placement::shard(1, qseq), q2 = Placement::shard(2, qseq);
  using O = CoreRankOutputs<T>;
  const auto s = op_spec(c);
  const OutputChecks one{v, run.core, s};
  one("out", &O::out, q1, e.out);
  one("lse", &O::lse, q2, e.lse);
  one("dq", &O::dq, q1, e.dq);
  one("dk", &O::dk, k1, e.dk);
  one("dv", &O::dv, k1, e.dv);
}

// The world ranks of the layer whose pieces make one copy of each result.
template <class T>
void layer_checks(CaseVerdict& v, const AttentionCase& c, const AttentionRun<T>& run,
                  const AttentionExpected& e) {
  const auto& L = c.layer;
  const std::size_t d = L.attention.head_dim;
  auto at = [&](int cp_rank, int tp_rank) -> const LayerRankOutputs<T>& {
    return run.layer[static_cast<std::size_t>(cp_rank) * static_cast<std::size_t>(c.tp) +
                     static_cast<std::size_t>(tp_rank)];
  };
  if (L.sequence_parallel) {
    // y and dx: every world rank's token rows, S(0) of the expected tensors in token-row order.
    std::vector<std::size_t> counts;
    for (int j = 0; j < c.cp; ++j) {
      const auto n = sp_row_counts(c, j);
      counts.insert(counts.end(), n.begin(), n.end());
    }
    std::vector<Tensor<T>> y, dx;
    for (const auto& o : run.layer) {
      y.push_back(o.y);
      dx.push_back(o.grads.dx);
    }
    const auto p = Placement::shard(0, SplitPolicy::explicit_sizes(counts));
    v.tensors.push_back(check_pieces<T>("y", y, p, in_token_rows(e.y, c), c.world()));
    v.tensors.push_back(check_pieces<T>("dx", dx, p, in_token_rows(e.dx, c), c.world()));
  } else {
    // y and dx: the sequence over cp (tp coordinate 0's copy).
    std::vector<Tensor<T>> y, dx;
    for (int j = 0; j < c.cp; ++j) {
      y.push_back(at(j, 0).y);
      dx.push_back(at(j, 0).grads.dx);
    }
    const auto p = Placement::shard(1, SplitPolicy::explicit_sizes(sizes_along(c)));
    v.tensors.push_back(check_pieces<T>("y", y, p, e.y, c.cp));
    v.tensors.push_back(check_pieces<T>("dx", dx, p, e.dx, c.cp));
  }
  // Weight gradients: heads over tp (cp coordinate 0's copy).
  std::vector<std::size_t> q_rows, kv_rows;
  std::vector<int> kv_ranks;  // one rank per kv shard
  for (int r = 0; r < c.tp; ++r) {
    const auto a = head_assignment(L, c.tp, r);
    q_rows.push_back(a.q_count * d);
    if (a.kv_replicas == 1 || r == a.kv_group_first) {
      kv_rows.push_back(a.kv_count * d);
      kv_ranks.push_back(r);
    }
  }
  auto grads = [&](auto member, const std::vector<int>& ranks) {
    std::vector<Tensor<T>> pieces;
    pieces.reserve(ranks.size());
    for (int r : ranks) pieces.push_back(at(0, r).grads.*member);
    return pieces;
  };
  std::vector<int> all_tp(static_cast<std::size_t>(c.tp));
  for (int r = 0; r < c.tp; ++r) all_tp[static_cast<std::size_t>(r)] = r;
  using G = AttentionLayerGrads<T>;
  const auto q0 = Placement::shard(0, SplitPolicy::explicit_sizes(q_rows));
  const auto q1 = Placement::shard(1, SplitPolicy::explicit_sizes(q_rows));
  const auto kv0 = Placement::shard(0, SplitPolicy::explicit_sizes(kv_rows));
  const int kv_parts = static_cast<int>(kv_ranks.size());
  v.tensors.push_back(check_pieces<T>("dwq", grads(&G::dwq, all_tp), q0, e.dwq, c.tp));
  v.tensors.push_back(check_pieces<T>("dwo", grads(&G::dwo, all_tp), q1, e.dwo, c.tp));
  v.tensors.push_back(check_pieces<T>("dwk", grads(&G::dwk, kv_ranks), kv0, e.dwk, kv_parts));
  v.tensors.push_back(check_pieces<T>("dwv", grads(&G::dwv, kv_ranks), kv0, e.dwv, kv_parts));
  if (L.has_bias) {
    v.tensors.push_back(check_pieces<T>("dbq", grads(&G::dbq, all_tp), q0, e.dbq, c.tp));
    v.tensors.push_back(check_pieces<T>("dbk", grads(&G::dbk, kv_ranks), kv0, e.dbk, kv_parts));
    v.tensors.push_back(check_pieces<T>("dbv", grads(&G::dbv, kv_ranks), kv0, e.dbv, kv_parts));
    std::vector<Tensor<T>> dbo;
    for (const auto& o : run.layer) dbo.push_back(o.grads.dbo);
    v.tensors.push_back(check_pieces<T>("dbo", dbo, Placement::replicate(), e.dbo, c.world()));
  }
}

template <class T>
std::string first_difference(const std::string& what, int rank, const Tensor<T>& got, int other,
                             const Tensor<T>& want) {
  if (bit_equal(got, want)) return {};
  return what + " on world rank " + std::to_string(rank) + " differs in its bits from world rank " +
         std::to_string(other) + "'s copy (" + format_shape(got.shape()) + " vs " +
         format_shape(want.shape()) + "): a replicated result must be bit-identical";
}

// The replicated results' copies against each other (AttentionFamily's own check).
enum class AttentionOwnCheck { replication };

template <class T>
void own_check(AttentionOwnCheck /*own*/, CaseVerdict& v, const AttentionCase& c,
               const AttentionData<T>& /*d*/, const AttentionRun<T>& run) {
  auto add = [&](const std::string& f) {
    if (!f.empty()) v.failures.push_back(f);
  };
  if (c.op == AttentionOp::context_parallel) return;  // nothing is replicated in the core
  using G = AttentionLayerGrads<T>;
  for (int r = 0; r < c.world(); ++r) {
    const auto& o = run.layer[static_cast<std::size_t>(r)];
    const int j = r / c.tp, t = r % c.tp;
    const int same_cp = j * c.tp;  // tp coordinate 0 of this cp coordinate
    const auto& ref_tp = run.layer[static_cast<std::size_t>(same_cp)];
    if (!c.layer.sequence_parallel) {  // else each tp rank holds its own token rows of y, dx
      add(first_difference("y", r, o.y, same_cp, ref_tp.y));
      add(first_difference("dx", r, o.grads.dx, same_cp, ref_tp.grads.dx));
    }
    const auto& ref_cp = run.layer[static_cast<std::size_t>(t)];  // cp coordinate 0
    for (auto [name, m] : {std::pair{"dwq", &G::dwq},
                           {"dbq", &G::dbq},
                           {"dwk", &G::dwk},
                           {"dbk", &G::dbk},
                           {"dwv", &G::dwv},
                           {"dbv", &G::dbv},
                           {"dwo", &G::dwo},
                           {"dbo", &G::dbo}}) {
      add(first_difference(name, r, o.grads.*m, t, ref_cp.grads.*m));
    }
    const auto a = head_assignment(c.layer, c.tp, t);
    const int first = j * c.tp + a.kv_group_first;
    const auto& ref_kv = run.layer[static_cast<std::size_t>(first)];
    for (auto [name, m] :
         {std::pair{"dwk", &G::dwk}, {"dbk", &G::dbk}, {"dwv", &G::dwv}, {"dbv", &G::dbv}}) {
      add(first_difference(name, r, o.grads.*m, first, ref_kv.grads.*m));
    }
    add(first_difference("dbo", r, o.grads.dbo, 0, run.layer[0].grads.dbo));
  }
}

}  // namespace

// Every output of the op against the reference (found by the engine beside the case type:
// engine/rank_family.hpp).
template <class T>
void check_outputs(CaseVerdict& v, const AttentionCase& c, const AttentionRun<T>& run,
                   const AttentionExpected& e) {
  if (c.op == AttentionOp::context_parallel) {
    core_checks(v, c, run, e);
  } else {
    layer_checks(v, c, run, e);
  }
}

SHARDCHECK_INSTANTIATE_CHECK_OUTPUTS(AttentionCase, AttentionRun, AttentionExpected)

namespace {

struct AttentionFamily : RankFamily<AttentionFamily, AttentionImplementation, AttentionCase,
                                    AttentionCaseOptions, AttentionData, AttentionOwnCheck> {
  static constexpr FamilyInfo info = {
      "attention",
      "context-parallel attention (ring, all-gather; contiguous, zigzag) and the "
      "head-partitioned attention layer with GQA on a (cp, tp) mesh, forward and backward",
      "the library's own ops (lib/ops/attention/context_parallel_attention.hpp, "
      "lib/ops/attention/head_parallel_attention.hpp)"};

  static constexpr Row properties[] = {
      reference_property(
          "context_parallel_matches_reference",
          "context-parallel attention (ring and all-gather; contiguous and zigzag layouts; any "
          "split of the sequence, empty chunks included), forward and backward (out, lse, dq, "
          "dk, dv), equals the dense high-precision reference within the rounding-error bound "
          "on every element, for MHA, GQA and MQA, causal, explicit and padding masks and "
          "every element type",
          pin_op<AttentionOp::context_parallel>),
      reference_property(
          "fully_masked_rows",
          "a query row with no visible key (a sequence that is all padding, or an explicit "
          "mask's empty row) gives out 0, lse −inf and zero gradients on every rank, never NaN, "
          "and the other rows are unaffected",
          pin_fields<&Options::op, AttentionOp::context_parallel, &Options::fully_masked_rows,
                     true>),
      reference_property(
          "layer_matches_reference",
          "the attention layer with heads over tp (g ≥ tp: whole kv groups per rank; g < tp: "
          "kv heads replicated on tp/g ranks) and, optionally, the sequence over cp and "
          "sequence parallelism over tp (x, y, dy, dx as each tp rank's token rows), forward "
          "and backward (y, dx and the gradient of every projection's weight and bias), equals "
          "the dense high-precision reference within its bound",
          pin_op<AttentionOp::layer>),
      reference_property(
          "layer_around_the_implementations_core",
          "the library's attention layer (projections, head mapping over tp, gradient sums) "
          "around the implementation's own context-parallel core, always with the sequence "
          "over cp, forward and backward, equals the dense reference within its bound: the "
          "core is checked inside a layer too, with the heads and tokens a layer gives it",
          pin_fields<&Options::op, AttentionOp::layer, &Options::core_in_layer, true>),
      traffic_property(
          "every rank's ledger shows exactly the collectives its op declares: cp − 1 K/V "
          "ring_shifts forward (the ring) or one all_gather of K and one of V (all-gather), the "
          "backward's K/V and dK/dV (in float32 or wider) likewise; the layer's one all_reduce "
          "forward and one backward over tp (with sequence parallelism the all_gathers of x, dy "
          "and x again and the reduce_scatters of y and dx), the kv group's and the cp group's "
          "gradient sums",
          pin_min_world<2>),
      own_property({"replicated_bit_identical",
                    "results the collectives replicate are bit-identical on the ranks that hold "
                    "them: y and dx on the tp ranks of a cp coordinate (without sequence "
                    "parallelism, which gives each its own rows), every weight gradient "
                    "on the cp ranks of a tp coordinate, the kv projection's gradients on the "
                    "ranks that share the kv head, and dbo everywhere (world ≥ 2)"},
                   Own::replication,
                   pin_fields<&Options::op, AttentionOp::layer, &Options::min_world, 2>),
  };

  using Library = AttentionAdapter<LibraryAttention>;
  static constexpr auto mutants = attention_mutants;
};

}  // namespace

void register_attention_suite() { register_family<AttentionFamily>(); }

}  // namespace shardcheck::check
