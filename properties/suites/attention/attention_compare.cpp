// context_parallel_attention and attention_layer as cases on disk (docs/case-format.md,
// compare/compare.hpp, docs/attention.md "As a case on disk"): the config's fields as
// ops/attention/attention_spec.cpp writes them (to_json), the spec's sizes and mesh.
//
//   context_parallel_attention  sizes batch, seq_len, q_heads, kv_heads, head_dim and, for
//     Lq != Lk (cross-attention, decode, chunked prefill), q_seq_len (absent: seq_len); mesh {"cp":
//     P} config {"attention": {...}, "cp": {...}}; inputs q, k, v, dout (needed for the gradients);
//     outputs out, lse (acc_t<T>: a float32 file in a bfloat16 case), dq, dk, dv
//   attention_layer  sizes batch, seq_len, hidden; mesh {"cp": C, "tp": P} (C = 1 without
//     context_parallel); config {"attention", "hidden", "has_bias", "kv_head_split",
//     "reduce_algorithm", "context_parallel": {...} | null, "sequence_parallel", "token_split",
//     "batch"}; inputs x, wq, wk, wv, wo and with biases bq, bk, bv, bo, dy (needed for the
//     gradients); outputs y, dx, dwq, dwk, dwv, dwo and with biases dbq, dbk, dbv, dbo
//
// A global sequence-sharded output is in the sequence's order and is cut into each cp rank's
// positions (positions_of: contiguous or zigzag), under sequence parallelism then into each tp
// rank's token rows of them flattened (layer_piece), a global weight gradient into the rows (wo:
// columns) of each tp rank's heads (head_assignment). The mask is the config's:
// attention.mask {"kind": "none" | "causal" | "explicit_mask", "alignment": "bottom_right" |
// "top_left" (causal; absent: bottom_right), "q_len", "k_len" (absent: q_seq_len and seq_len),
// "key_lengths" (padding, one per sequence), "allowed_shape" and, with explicit_mask, "allowed":
// the [batch, q_len, k_len] mask as nested arrays of 0/1 (or false/true)}. Query-shaped outputs
// (out, lse, dq) are cut by the query positions, dk and dv by the key positions.
#include "compare/compare.hpp"
#include "compare/config_fields.hpp"
#include "engine/slicing.hpp"
#include "ops/attention/attention_spec.hpp"
#include "suites/attention/attention_expected.hpp"
#include "suites/attention/attention_mutants.hpp"
#include "suites/attention/attention_run.hpp"
#include "suites/upstream_gradient.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

namespace shardcheck::check {
namespace {

std::string text(std::size_t n) { return std::to_string(n); }

// The softmax contracts in words (reference/attention/attention_bound.hpp).
constexpr const char* kExpWords =
    "p = exp(fl(s − m)) of the scaled scores over the whole row, as lib/ops/attention";
constexpr const char* kOnlineWords =
    "the online softmax (key blocks of any size, a running max m_b, p = exp(fl(s − m_b)), l and "
    "acc rescaled by exp(fl(m_old − m_new)), out = acc/l or acc·fl(1/l) at the end), as PyTorch "
    "2's CPU flash-attention kernel";
constexpr const char* kExp2Words =
    "p = exp2(q·k·scale_log2 − fl(m·scale_log2)) with scale_log2 = fl(scale·log2(e)), the "
    "argument by one fma or a rounded product, the online softmax's rescales by exp2, out = acc/l "
    "or acc·fl(1/l), the lse kept in base 2 and converted or taken as fl(m·scale) + logf(l), as "
    "FlashAttention-2/3 (PyTorch's copy included) and Triton kernels";

// The object `key` of `f`, or an empty one (every field at its default) when absent.
cases::Fields object_or_empty(cases::Fields& f, const std::string& key) {
  if (f.has(key)) return f.object(key);
  return {nlohmann::json::object(), f.file(), f.where(key)};
}

// A config field `key` that repeats a size, read as n (absent: the size): it must be the size.
void require_size(cases::Fields& f, const std::string& key, std::size_t n, std::size_t size,
                  const std::string& size_name) {
  if (n != size) {
    f.fail(key, "is " + text(n) + " but " + size_name + " is " + text(size) +
                    "; give the same value or leave the field out");
  }
}

// A config field that repeats a size: absent, the size; given, it must be the size.
std::size_t size_as(cases::Fields& f, const std::string& key, std::size_t size,
                    const std::string& size_name) {
  const std::size_t n = f.size_or(key, size);
  require_size(f, key, n, size, size_name);
  return n;
}

// The nested arrays of an explicit mask, [batch, len, len] of 0/1 or booleans, row-major.
void flatten_mask(const cases::Fields& f, const nlohmann::json& j, const Shape& shape,
                  std::size_t depth, std::vector<std::uint8_t>& out) {
  if (depth == shape.size()) {
    if (j.is_boolean()) return out.push_back(j.get<bool>() ? 1 : 0);
    if (j.is_number_integer() && (j.get<long long>() == 0 || j.get<long long>() == 1)) {
      return out.push_back(static_cast<std::uint8_t>(j.get<long long>()));
    }
    f.fail("allowed", "has the element " + j.dump() + "; give 0 or 1 (or false or true)");
  }
  if (!j.is_array() || j.size() != shape[depth]) {
    f.fail("allowed", "is not nested arrays of shape " + format_shape(shape) + " (at depth " +
                          text(depth) + ": " +
                          (j.is_array() ? text(j.size()) + " entries" : j.dump()) +
                          "); give the [batch, q_len, k_len] mask, 1 = visible");
  }
  for (const auto& e : j) flatten_mask(f, e, shape, depth + 1, out);
}

AttentionMask mask_of(cases::Fields& attention, std::size_t batch, std::size_t lq,
                      std::size_t len) {
  cases::Fields f = object_or_empty(attention, "mask");
  AttentionMask m;
  m.q_len = lq;  // absent: the sizes
  m.k_len = len;
  read_fields(f, m);
  require_size(f, "q_len", m.q_len, lq, lq == len ? "sizes.seq_len" : "sizes.q_seq_len");
  require_size(f, "k_len", m.k_len, len, "sizes.seq_len");
  if (!m.key_lengths.empty() && m.key_lengths.size() != batch) {
    f.fail("key_lengths", "has " + text(m.key_lengths.size()) + " entries but batch is " +
                              text(batch) + "; give one key length per sequence, or []");
  }
  for (std::size_t n : m.key_lengths) {
    if (n > len) {
      f.fail("key_lengths", "has " + text(n) + ", above seq_len " + text(len) +
                                "; a key length is at most the sequence length");
    }
  }
  const bool given = m.kind == MaskKind::explicit_mask;
  const Shape shape = given ? Shape{batch, lq, len} : Shape{};
  if (const auto s = f.sizes_or("allowed_shape", shape); s != shape) {
    f.fail("allowed_shape", "is " + format_shape(s) + " but the mask of kind " + to_string(m.kind) +
                                " has " + format_shape(shape) +
                                " ([batch, q_len, k_len] for explicit_mask, "
                                "[] otherwise)");
  }
  if (given) {
    std::vector<std::uint8_t> values;
    flatten_mask(f, f.raw("allowed"), shape, 0, values);
    m.allowed = Tensor<std::uint8_t>(shape, std::move(values));
  } else if (f.has("allowed")) {
    f.fail("allowed", "is given but the mask's kind is " + to_string(m.kind) +
                          "; only explicit_mask takes it");
  }
  f.done();
  return m;
}

// config.attention (or the core's "attention"): heads and head dim default to `sizes` (the
// core's sizes name them; the layer's do not, so its defaults are AttentionConfig's).
AttentionConfig attention_of(cases::Fields& config, const AttentionConfig& sizes, bool from_sizes,
                             std::size_t batch, std::size_t lq, std::size_t len) {
  cases::Fields f = object_or_empty(config, "attention");
  AttentionConfig a = sizes;
  if (from_sizes) {
    a.q_heads = size_as(f, "q_heads", sizes.q_heads, "sizes.q_heads");
    a.kv_heads = size_as(f, "kv_heads", sizes.kv_heads, "sizes.kv_heads");
    a.head_dim = size_as(f, "head_dim", sizes.head_dim, "sizes.head_dim");
  } else {
    a.q_heads = f.size_or("q_heads", a.q_heads);
    a.kv_heads = f.size_or("kv_heads", a.kv_heads);
    a.head_dim = f.size_or("head_dim", a.head_dim);
  }
  if (a.kv_heads == 0 || a.q_heads % a.kv_heads != 0) {
    f.fail("kv_heads", "is " + text(a.kv_heads) + " but q_heads is " + text(a.q_heads) +
                           "; the kv heads must divide the query heads (GQA groups)");
  }
  if (a.head_dim == 0) f.fail("head_dim", "is 0; a head has at least one element");
  a.scale = f.number_or("scale", a.scale);
  if (!std::isfinite(a.scale)) f.fail("scale", "is not finite; give 0 for 1/sqrt(head_dim)");
  a.mask = mask_of(f, batch, lq, len);
  f.done();
  return a;
}

// The cp object: {"seq_len", "layout", "split", "algorithm", "q_seq_len" (0 or absent:
// self-attention; else the queries' length, sizes.q_seq_len), "q_split"}.
ContextParallelConfig context_of(cases::Fields f, std::size_t lq, std::size_t len) {
  ContextParallelConfig cc;
  cc.seq_len = len;  // absent: the sizes
  cc.q_seq_len = lq == len ? 0 : lq;
  read_fields(f, cc);
  require_size(f, "seq_len", cc.seq_len, len, "sizes.seq_len");
  f.done();
  return cc;
}

// The manifest's mesh size called `name`, or `fallback` (require_mesh then names the mismatch).
int mesh_size(const cases::CaseManifest& m, const std::string& name, int fallback) {
  for (const auto& [k, n] : m.mesh) {
    if (k == name) return static_cast<int>(n);
  }
  return fallback;
}

// Cuts a global [batch, L, ...] output into the positions of world rank r's cp coordinate.
auto by_positions(const AttentionCase& c) {
  return [&c](const auto& g, int r) { return take_positions(g, positions_of(c, cp_coord(c, r))); };
}

template <class T>
void read_core(CaseReader& r, const AttentionCase& c, AttentionData<T>& d, AttentionRun<T>& run) {
  using O = CoreRankOutputs<T>;
  r.input("q", d.q);
  r.input("k", d.k);
  r.input("v", d.v);
  read_upstream_gradient(r, "dout", d.dout, d.q.shape(), {"dq", "dk", "dv"});
  const auto by_queries = [&c](const Tensor<T>& g, int rank) {
    return take_positions(g, query_positions_of(c, cp_coord(c, rank)));
  };
  r.output("out", run.core, &O::out, by_queries);
  r.output("lse", run.core, &O::lse, [&c](const Tensor<acc_t<T>>& g, int rank) {
    return take_lse_positions(g, query_positions_of(c, rank));
  });
  r.output("dq", run.core, &O::dq, by_queries);
  r.output("dk", run.core, &O::dk, by_positions(c));
  r.output("dv", run.core, &O::dv, by_positions(c));
}

// A global weight gradient's piece on world rank r: the rows (dim 0) or, for wo, the columns
// (dim 1) of the heads of r's tp coordinate, or the whole of bo.
template <class T>
Tensor<T> heads_piece(const AttentionCase& c, const std::string& name, const Tensor<T>& g, int r) {
  const HeadAssignment a = head_assignment(c.layer, c.tp, tp_coord(c, r));
  const std::size_t d = c.attention().head_dim;
  if (name == "dbo") return g;
  if (name == "dwo") return slice(g, 1, Piece{a.q_offset * d, a.q_count * d});
  if (name == "dwq" || name == "dbq") return slice(g, 0, Piece{a.q_offset * d, a.q_count * d});
  return slice(g, 0, Piece{a.kv_offset * d, a.kv_count * d});
}

template <class T>
void read_layer(CaseReader& r, const AttentionCase& c, AttentionData<T>& d, AttentionRun<T>& run) {
  using G = AttentionLayerGrads<T>;
  const bool bias = c.layer.has_bias;
  r.input("x", d.x);
  for (const auto& p : layer_parameters<T>()) {
    if (bias || p.name[0] == 'w') r.input(p.name, d.w.*p.weight);
  }
  const bool has_dy = r.input("dy", d.dy, false);
  if (!has_dy) d.dy = Tensor<T>(d.x.shape());  // no gradient is judged without it
  const auto by_layer_piece = [&c](const Tensor<T>& g, int rank) {
    return layer_piece(c, g, rank);
  };
  r.output("y", run.layer, &LayerRankOutputs<T>::y, by_layer_piece);
  std::vector<G> pieces;
  for (const auto& p : layer_parameters<T>()) {
    if (!bias && p.name[0] == 'b') continue;
    const std::string g = std::string("d") + p.name;
    if (!has_dy && r.has_output(g)) r.require_input_for("dy", g);
    r.output(g, pieces, p.grad,
             [&c, g](const Tensor<T>& t, int rank) { return heads_piece(c, g, t, rank); });
  }
  if (!has_dy && r.has_output("dx")) r.require_input_for("dy", "dx");
  r.output("dx", pieces, &G::dx, by_layer_piece);
  for (std::size_t i = 0; i < run.layer.size(); ++i) run.layer[i].grads = std::move(pieces[i]);
}

}  // namespace

AttentionCase case_of(const cases::CaseManifest& m, AttentionCase* /*tag*/) {
  AttentionCase c;
  c.dtype = m.dtype;
  c.batch = m.size("batch");
  const std::size_t len = m.size("seq_len");
  std::size_t lq = len;  // sizes.q_seq_len, optional (self-attention without it)
  for (const auto& [name, n] : m.sizes) {
    if (name == "q_seq_len") lq = n;
  }
  cases::Fields f = m.config;
  if (m.op == "context_parallel_attention") {
    c.op = AttentionOp::context_parallel;
    c.tp = 1;
    c.cp = m.world();
    AttentionConfig sizes;
    sizes.q_heads = m.size("q_heads");
    sizes.kv_heads = m.size("kv_heads");
    sizes.head_dim = m.size("head_dim");
    c.layer.attention = attention_of(f, sizes, true, c.batch, lq, len);
    c.layer.context_parallel = context_of(object_or_empty(f, "cp"), lq, len);
    c.shape = lq == len  ? AttentionShape::self_attention
              : lq == 1  ? AttentionShape::decode
              : lq < len ? AttentionShape::chunked_prefill
                         : AttentionShape::cross_attention;
  } else {
    c.op = AttentionOp::layer;
    HeadParallelConfig& k = c.layer;
    k.attention = attention_of(f, AttentionConfig{}, false, c.batch, len, len);
    k.hidden = size_as(f, "hidden", m.size("hidden"), "sizes.hidden");
    k.has_bias = f.boolean_or("has_bias", k.has_bias);
    k.kv_head_split = split_or(f, "kv_head_split", k.kv_head_split);
    k.reduce_algorithm = named_or(f, "reduce_algorithm", k.reduce_algorithm);
    if (f.has("context_parallel") && !f.raw("context_parallel").is_null()) {
      k.context_parallel = context_of(f.object("context_parallel"), len, len);
    }
    // Sequence parallelism over tp: y and dx as each tp rank's token rows of its cp piece
    // (layer_piece); batch repeats sizes.batch (0 or absent: sizes.batch).
    k.sequence_parallel = f.boolean_or("sequence_parallel", false);
    k.token_split = split_or(f, "token_split", k.token_split);
    if (const std::size_t b = f.size_or("batch", 0); b != 0 && b != c.batch) {
      f.fail("batch", "is " + text(b) + " but sizes.batch is " + text(c.batch) +
                          "; give the same value, 0, or leave the field out");
    }
    if (k.sequence_parallel) k.batch = c.batch;
    c.tp = mesh_size(m, "tp", m.world());
    c.cp = k.context_parallel ? mesh_size(m, "cp", 1) : 1;
  }
  f.done();
  // A declared accumulator (compare.hpp), refused when a sum is too long for an a-priori bound:
  // the longest is over the keys (softmax, P·V, dQ), the queries (dK, dV), the head dim (q·k,
  // D = rowsum(dO∘O)) and, in the layer, hidden (the projections), the heads' width (the output
  // projection) and the tokens (the weight gradients).
  {
    const auto& a = c.attention();
    std::size_t longest = std::max({c.k_len(), c.q_len(), a.head_dim});
    std::string words = "Lk = " + text(c.k_len()) + ", Lq = " + text(c.q_len()) +
                        ", head_dim = " + text(a.head_dim);
    if (c.op == AttentionOp::layer) {
      longest = std::max({longest, c.layer.hidden, a.q_heads * a.head_dim, c.batch * c.len()});
      words += ", hidden = " + text(c.layer.hidden) +
               ", q_heads·head_dim = " + text(a.q_heads * a.head_dim) +
               ", tokens = " + text(c.batch * c.len());
    }
    c.accumulate = require_accumulate_bounded(m, longest, words);
  }
  // The contract: how the kernel forms the softmax's weights (docs/attention.md, "The softmax
  // contract"); without one, the larger of the online and exp2 bounds, which covers all three.
  if (m.contract.empty()) {
    // exp2's kernels take the raw max as the scaled one's: a negative scale is not theirs.
    c.contract = c.attention().scale < 0 ? SoftmaxContract::online : SoftmaxContract::either;
  } else if (m.contract == "exp") {
    c.contract = SoftmaxContract::natural;
  } else if (m.contract == "online") {
    c.contract = SoftmaxContract::online;
  } else if (m.contract == "exp2") {
    c.contract = SoftmaxContract::exp2;
    if (c.attention().scale < 0) {
      throw cases::CaseError(m.file + ": contract: is \"exp2\" but config.attention.scale is " +
                             std::to_string(c.attention().scale) +
                             "; exp2's kernels take the raw scores' max as the scaled scores', "
                             "which needs a positive scale: give \"exp\" or \"online\", or omit "
                             "the field");
    }
  } else {
    throw cases::CaseError(m.file + ": contract: is \"" + m.contract + "\" but " + m.op +
                           " knows \"exp\" (" + kExpWords + "), \"online\" (" + kOnlineWords +
                           ") and \"exp2\" (" + kExp2Words +
                           "); omit the field for a bound that covers all three");
  }
  // An online kernel's smallest key block ("contract": {"name": ..., "key_block": B}).
  if (m.contract_options) {
    cases::Fields o = *m.contract_options;
    c.key_block = o.size_or("key_block", 1);
    const std::string lse = o.choice_or("lse", {"base2", "natural"}, "");
    o.done();
    if (!lse.empty() &&
        (c.contract == SoftmaxContract::natural || c.contract == SoftmaxContract::online)) {
      o.fail("lse", "is \"" + lse + "\" but contract \"" + m.contract +
                        "\" takes the lse in natural units, m + log(l); the lse's form is for "
                        "\"exp2\": give that name, or omit the field");
    }
    if (lse == "base2") c.exp2_lse = Exp2LseForm::base2;
    if (lse == "natural") c.exp2_lse = Exp2LseForm::natural;
    if (c.key_block == 0) {
      o.fail("key_block",
             "is 0; give the kernel's smallest key block (a positive number of key "
             "positions), or 1 for any block size");
    }
    if (c.key_block > 1 && c.contract == SoftmaxContract::natural) {
      o.fail("key_block",
             "is " + text(c.key_block) +
                 " but contract \"exp\" forms the whole row at once; a key block is for the "
                 "online softmax: give \"online\" or \"exp2\", or omit the name");
    }
  }
  return c;
}

// The contract takes a key_block (case_of).
constexpr bool reads_contract_options(const AttentionCase* /*tag*/) { return true; }

// The bounds take any accumulator that holds T (compare.hpp: require_accumulate_holds).
constexpr bool takes_declared_accumulate(const AttentionCase* /*tag*/) { return true; }

std::optional<std::string> contract_words(const AttentionCase& c, DType t) {
  const std::string head = default_contract(t, c.accumulate) + "; ";
  const std::string lse_form = c.exp2_lse == Exp2LseForm::base2     ? "; the lse in base 2"
                               : c.exp2_lse == Exp2LseForm::natural ? "; the lse in natural units"
                                                                    : "";
  const std::string blocks =
      lse_form + (c.key_block > 1
                      ? "; key blocks of at least " + text(c.key_block) +
                            " positions (a part's first and last may be shorter): at most " +
                            text(c.k_len() / c.key_block + 1) + " rescales a row"
                      : "");
  switch (c.contract) {
    case SoftmaxContract::natural: return head + "contract exp: " + kExpWords;
    case SoftmaxContract::online: return head + "contract online: " + kOnlineWords + blocks;
    case SoftmaxContract::exp2: return head + "contract exp2: " + kExp2Words + blocks;
    case SoftmaxContract::either: break;
  }
  return head + "the softmax's weights as " + kOnlineWords + ", or as " + kExp2Words +
         ": the larger bound, which also covers p = exp(fl(s − m)) over the whole row "
         "(docs/attention.md)" +
         blocks;
}

template <class T>
void read_tensors(CaseReader& r, const AttentionCase& c, AttentionData<T>& d,
                  AttentionRun<T>& run) {
  if (c.op == AttentionOp::context_parallel) {
    read_core(r, c, d, run);
  } else {
    read_layer(r, c, d, run);
  }
}

void register_attention_compare() {
  for (const char* op : {"context_parallel_attention", "attention_layer"}) {
    CompareRegistry::instance().add(
        op, compare_as<AttentionCase, AttentionData, AttentionRun, &attention_mutants>);
  }
}

}  // namespace shardcheck::check
