#include "suites/attention/attention_case.hpp"

#include "engine/instantiate.hpp"
#include "generators/layout_gen.hpp"
#include "generators/structure.hpp"
#include "runtime/format_list.hpp"
#include "suites/attention/attention_run.hpp"

#include <algorithm>

namespace shardcheck::check {
namespace {

// Sizes: the reference and its bound cost O(batch·h·L²·d) in high precision per case.
constexpr std::size_t max_len = 12, max_layer_len = 8, max_head_dim = 4, max_hidden = 8;

}  // namespace

std::vector<std::pair<int, std::size_t>> head_configurations(int max_tp) {
  std::vector<std::pair<int, std::size_t>> out;
  for (int tp = 1; tp <= max_tp; ++tp) {
    const auto t = static_cast<std::size_t>(tp);
    // Replicated kv heads: g < tp, g | tp.
    for (std::size_t g = 1; g < t; ++g)
      if (t % g == 0) out.emplace_back(tp, g);
    // Partitioned kv heads: g from tp up to max(4, tp).
    for (std::size_t g = t; g <= std::max<std::size_t>(4, t); ++g) out.emplace_back(tp, g);
  }
  // The simplest first (shrinking goes there): tp = 1, g = 1.
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.first * static_cast<int>(a.second) < b.first * static_cast<int>(b.second);
  });
  return out;
}

std::vector<std::string> configuration_labels(const AttentionCase& c) {
  std::vector<std::string> out;
  const auto& a = c.attention();
  if (c.op == AttentionOp::layer) {
    out.push_back("tp=" + std::to_string(c.tp) + " g=" + std::to_string(a.kv_heads));
    const auto sizes = split_sizes(c.layer.kv_head_split, a.kv_heads, c.tp);
    if (a.kv_heads >= static_cast<std::size_t>(c.tp) &&
        std::find(sizes.begin(), sizes.end(), std::size_t{0}) != sizes.end())
      out.emplace_back("a tp rank without heads");
  }
  out.push_back("cp=" + std::to_string(c.cp));
  if (c.layer.context_parallel) {
    out.push_back(to_string(c.context().algorithm) + " " + to_string(c.context().layout));
  }
  if (c.op == AttentionOp::layer && c.layer.sequence_parallel) {
    out.emplace_back("sequence parallel");
  }
  if (c.op == AttentionOp::context_parallel) out.push_back(to_string(c.shape));
  if (a.mask.kind == MaskKind::causal && c.q_len() != c.k_len()) {
    out.push_back("causal " + to_string(a.mask.alignment) + " with Lq != Lk");
  }
  return out;
}

bool row_is_empty(const AttentionMask& m, std::size_t b, std::size_t t) {
  for (std::size_t s = 0; s < m.k_len; ++s) {
    if (visible(m, b, t, s)) return false;
  }
  return true;
}

std::string AttentionCase::describe() const {
  const auto& a = attention();
  std::string s = to_string(op) + " " + std::string(name(dtype)) +
                  " h=" + std::to_string(a.q_heads) + " g=" + std::to_string(a.kv_heads) +
                  " d=" + std::to_string(a.head_dim) + " batch=" + std::to_string(batch) +
                  (q_len() == k_len() ? " L=" + std::to_string(q_len())
                                      : " " + to_string(shape) + " Lq=" + std::to_string(q_len()) +
                                            " Lk=" + std::to_string(k_len())) +
                  " mask=" + to_string(a.mask.kind) +
                  (a.mask.kind == MaskKind::causal && q_len() != k_len()
                       ? "(" + to_string(a.mask.alignment) + ")"
                       : "");
  if (!a.mask.key_lengths.empty()) s += "+padding" + format_list(a.mask.key_lengths);
  if (op == AttentionOp::layer) {
    s += " tp=" + std::to_string(tp) + " hidden=" + std::to_string(layer.hidden) +
         (layer.has_bias ? " bias" : " no-bias") +
         " kv_head_split=" + layer.kv_head_split.to_string();
    if (layer.sequence_parallel) {
      s += " sequence_parallel token_split=" + layer.token_split.to_string();
    }
  }
  s += " cp=" + std::to_string(cp);
  if (accumulate) s += " accumulate=" + std::string(name(*accumulate));
  if (layer.context_parallel) {
    const auto& c = context();
    s += " layout=" + to_string(c.layout) + " split=" + c.split.to_string() +
         " algorithm=" + to_string(c.algorithm);
  }
  if (core_in_layer) s += " core=the implementation's";
  return s + " profile=" + gen::to_string(profile);
}

rc::Gen<AttentionCase> gen_case(const RunConfig& config, const AttentionCaseOptions& options) {
  return rc::gen::exec([config, options] {
    AttentionCase c;
    c.op = options.op ? *options.op
                      : *gen::weightedStructure<AttentionOp>(
                            {{3, AttentionOp::context_parallel}, {2, AttentionOp::layer}});
    c.dtype = *gen::genFloatDType(config.dtypes);
    const bool layer = c.op == AttentionOp::layer;
    const int lo =
        options.min_world && config.max_world >= *options.min_world ? *options.min_world : 1;

    auto& a = c.layer.attention;
    if (layer) {
      // A (cp, tp) mesh with a valid head mapping: g ≥ tp any split of the kv heads; g < tp
      // needs g | tp and (tp/g) | (h/g). The (tp, g) pair is swept (structure.hpp: case i of a
      // run draws the list's entry i mod its length), so every pair with tp up to 8 appears in
      // the first cases at every seed: a GQA bug wrong only at tp = 4, g = 2 survived 100 cases
      // of the scaled draw at two seeds of three, and tp = 8 was never drawn.
      // No retry loops in a generator (a shrink would replay them forever): draw (tp, g), then
      // a cp range that makes tp·cp ≥ lo and ≤ max_world.
      const auto [tp_drawn, g_drawn] =
          *gen::sweepOf(head_configurations(std::min(8, config.max_world)));
      c.tp = tp_drawn;
      // cp up to 4: a ring of three or more is where a summation order can differ between the
      // tp ranks (issue 16's dbo needed cp ≥ 3 and a tp rank without heads).
      const int cp_max = std::max(1, std::min(4, config.max_world / c.tp));
      const int cp_min = std::min(cp_max, (lo + c.tp - 1) / c.tp);
      c.cp = *gen::structure<int>(cp_min, cp_max);
      const std::size_t g = g_drawn;
      const auto tp = static_cast<std::size_t>(c.tp);
      std::size_t group = 0;
      if (g < tp) {
        group = (tp / g) * *gen::structure<std::size_t>(1, 2);
      } else {
        group = *gen::structure<std::size_t>(1, 3);
        // A tp rank without heads half of the time (genSplit alone rarely gives one).
        c.layer.kv_head_split =
            *gen::chance(50) ? *gen::genSplitWithEmptyPiece(g, c.tp) : *gen::genSplit(g, c.tp);
      }
      a.kv_heads = g;
      a.q_heads = g * group;
      a.head_dim = *rc::gen::inRange<std::size_t>(1, max_head_dim + 1);
      c.layer.hidden = *gen::genDim(max_hidden);
      c.layer.has_bias = *gen::chance(50);
      c.layer.reduce_algorithm = *gen::structureOf({Algorithm::ring, Algorithm::sequential});
    } else {
      c.tp = 1;
      // cp swept over [lo, max_world]: every ring size within the first max_world cases.
      std::vector<int> cps;
      for (int p = lo; p <= std::max(lo, config.max_world); ++p) cps.push_back(p);
      c.cp = *gen::sweepOf(cps);
      a.kv_heads = *gen::structure<std::size_t>(1, 3);
      a.q_heads = a.kv_heads * *gen::structure<std::size_t>(1, 3);
      a.head_dim = *rc::gen::inRange<std::size_t>(1, max_head_dim + 1);
    }
    c.batch = *rc::gen::inRange<std::size_t>(1, 3);
    // The shape (core op only) is structure: drawn unscaled, every kind from the first case.
    // Lengths are sizes (scaled); Lk >= 2 where the shape needs Lq < Lk.
    c.shape = layer
                  ? AttentionShape::self_attention
                  : *gen::weightedStructure<AttentionShape>({{2, AttentionShape::self_attention},
                                                             {1, AttentionShape::cross_attention},
                                                             {1, AttentionShape::decode},
                                                             {1, AttentionShape::chunked_prefill}});
    const std::size_t max_l = layer ? max_layer_len : max_len;
    std::size_t lq = 0, len = 0;  // len: Lk
    switch (c.shape) {
      case AttentionShape::self_attention:
        len = *rc::gen::inRange<std::size_t>(1, max_l + 1);
        lq = len;
        break;
      case AttentionShape::cross_attention:
        lq = *rc::gen::inRange<std::size_t>(1, max_l + 1);
        len = *rc::gen::inRange<std::size_t>(1, max_l + 1);
        break;
      case AttentionShape::decode:
        lq = 1;
        len = *rc::gen::inRange<std::size_t>(1, max_l + 1);
        break;
      case AttentionShape::chunked_prefill:
        len = *rc::gen::inRange<std::size_t>(2, max_l + 1);
        lq = *rc::gen::inRange<std::size_t>(1, len);
        break;
    }
    a.mask.q_len = lq;
    a.mask.k_len = len;
    a.mask.kind = *rc::gen::weightedElement<MaskKind>(
        {{2, MaskKind::none}, {4, MaskKind::causal}, {2, MaskKind::explicit_mask}});
    if (a.mask.kind == MaskKind::causal) {
      a.mask.alignment =
          *gen::structureOf({CausalAlignment::bottom_right, CausalAlignment::top_left});
    }
    if (*rc::gen::weightedElement<bool>({{2, false}, {1, true}}) || options.fully_masked_rows) {
      for (std::size_t b = 0; b < c.batch; ++b) {
        a.mask.key_lengths.push_back(*rc::gen::inRange<std::size_t>(0, len + 1));
      }
      if (options.fully_masked_rows) a.mask.key_lengths[0] = 0;  // every row of sequence 0
    }
    if (a.mask.kind == MaskKind::explicit_mask) {
      const int density = *rc::gen::inRange(1, 4);  // 1/4, 2/4, 3/4 of the pairs visible
      a.mask.allowed = Tensor<std::uint8_t>(Shape{c.batch, lq, len});
      for (auto& m : a.mask.allowed.values()) {
        m = *rc::gen::inRange(0, 4) < density ? 1 : 0;
      }
    }

    c.core_in_layer = layer && options.core_in_layer;
    const bool with_cp = !layer || c.core_in_layer || c.cp > 1 || *gen::chance(50);
    if (with_cp) {
      ContextParallelConfig cc;
      cc.seq_len = len;
      cc.layout = *gen::structureOf({CpLayout::contiguous, CpLayout::zigzag});
      const int pieces = cc.layout == CpLayout::zigzag ? 2 * c.cp : c.cp;
      cc.split = *gen::genSplit(len, pieces);
      if (lq != len) {
        cc.q_seq_len = lq;
        cc.q_split = *gen::genSplit(lq, pieces);
      }
      cc.algorithm = options.algorithm
                         ? *options.algorithm
                         : *gen::weightedStructure<CpAlgorithm>(
                               {{1, CpAlgorithm::ring}, {1, CpAlgorithm::all_gather}});
      c.layer.context_parallel = cc;
    }
    c.profile = *rc::gen::weightedElement<gen::Profile>(
        {{4, gen::Profile::unit}, {1, gen::Profile::wide}, {1, gen::Profile::cancellation}});
    // Sequence parallelism over tp (the layer with tp > 1, one case in two): x, y, dy and dx as
    // each tp rank's token rows of its cp piece flattened [batch·L_j, hidden]. Drawn last, so
    // every pick above stays where it was. One token split serves every cp piece: explicit sizes
    // (zeros included) where the pieces hold the same number of tokens, else chunk or balanced,
    // whose pieces are uneven or empty too when the tokens do not fill the tp ranks.
    if (layer && c.tp > 1 && *gen::chance(50)) {
      c.layer.sequence_parallel = true;
      c.layer.batch = c.batch;
      std::vector<std::size_t> tokens(static_cast<std::size_t>(c.cp));
      for (int j = 0; j < c.cp; ++j) {
        tokens[static_cast<std::size_t>(j)] = c.batch * positions_of(c, j).size();
      }
      const bool same = std::all_of(tokens.begin(), tokens.end(),
                                    [&](std::size_t n) { return n == tokens.front(); });
      c.layer.token_split =
          same ? *gen::genSplit(tokens.front(), c.tp)
               : *gen::structureOf({SplitPolicy::chunk(), SplitPolicy::balanced()});
    }
    bool empty_row = false;
    for (std::size_t b = 0; b < c.batch; ++b) {
      for (std::size_t t = 0; t < lq; ++t) empty_row = empty_row || row_is_empty(a.mask, b, t);
    }
    RC_CLASSIFY(empty_row, "fully masked rows");
    RC_CLASSIFY(a.kv_heads < a.q_heads, a.kv_heads == 1 ? "MQA" : "GQA");
    RC_CLASSIFY(layer && static_cast<std::size_t>(c.tp) > a.kv_heads, "tp > g");
    RC_CLASSIFY(c.layer.sequence_parallel, "sequence parallel");
    RC_TAG(to_string(c.op));
    RC_CLASSIFY(!layer, to_string(c.shape));
    if (c.layer.context_parallel) RC_TAG(to_string(c.context().algorithm));
    return c;
  });
}

namespace {

// Exponents: scores are σ·q·k with |q|, |k| < 2^(e+1), d ≤ 4, so |s| < 2^(2e+3); exp's shift
// keeps every correct computation finite. float16 outputs: |out| ≤ max|v| and the gradients
// grow with |s|·|v|·|dout|, so float16 draws unit-like values (e = 0).
constexpr gen::MaxExp attention_max_exp{.float16 = 0, .bfloat16 = 2, .float32 = 3, .float64 = 3};

}  // namespace

template <class T>
rc::Gen<AttentionData<T>> gen_data(const AttentionCase& c) {
  return rc::gen::exec([c] {
    const int e = attention_max_exp.of<T>();
    const auto& a = c.attention();
    const std::size_t b = c.batch, L = c.len(), h = a.q_heads, g = a.kv_heads, d = a.head_dim;
    AttentionData<T> x;
    if (c.op == AttentionOp::context_parallel) {
      const std::size_t Lq = c.q_len(), Lk = c.k_len();
      x.q = *gen::genTensor<T>({b, Lq, h, d}, c.profile, e);
      x.k = *gen::genTensor<T>({b, Lk, g, d}, c.profile, e);
      x.v = *gen::genTensor<T>({b, Lk, g, d}, c.profile, e);
      x.dout = *gen::genTensor<T>({b, Lq, h, d}, c.profile, e);
      return x;
    }
    const std::size_t hid = c.layer.hidden;
    const int we = std::min(e, 0) - 1;  // weights ≤ 1: projections stay unit-like
    x.x = *gen::genTensor<T>({b, L, hid}, c.profile, std::min(e, 1));
    x.dy = *gen::genTensor<T>({b, L, hid}, c.profile, std::min(e, 1));
    x.w.wq = *gen::genTensor<T>({h * d, hid}, gen::Profile::unit, we);
    x.w.wk = *gen::genTensor<T>({g * d, hid}, gen::Profile::unit, we);
    x.w.wv = *gen::genTensor<T>({g * d, hid}, gen::Profile::unit, we);
    x.w.wo = *gen::genTensor<T>({hid, h * d}, gen::Profile::unit, we);
    if (c.layer.has_bias) {
      x.w.bq = *gen::genTensor<T>({h * d}, gen::Profile::unit, we);
      x.w.bk = *gen::genTensor<T>({g * d}, gen::Profile::unit, we);
      x.w.bv = *gen::genTensor<T>({g * d}, gen::Profile::unit, we);
      x.w.bo = *gen::genTensor<T>({hid}, gen::Profile::unit, we);
    }
    return x;
  });
}

SHARDCHECK_INSTANTIATE_GEN_DATA(AttentionCase, AttentionData)

}  // namespace shardcheck::check
