// One generated case of the attention suite: the op (the context-parallel core alone, or the
// whole layer with its projections on a (cp, tp) mesh), heads, head dim, batch, sequence
// length, the mask (none, causal, explicit; key padding), the partition (tp head split, cp
// layout, split and algorithm), the element type and the global tensors. Everything is drawn on
// the main thread before any rank runs.
#pragma once

#include "engine/suite.hpp"
#include "generators/values.hpp"
#include "ops/attention/head_parallel_attention.hpp"

#include <rapidcheck.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::check {

enum class AttentionOp { context_parallel, layer };

inline std::string to_string(AttentionOp o) {
  return o == AttentionOp::context_parallel ? "context_parallel_attention" : "attention_layer";
}

// The query and key lengths users run (the core op; the layer is self-attention, Lq = Lk):
//   self_attention   Lq = Lk (training, prefill in one piece)
//   cross_attention  Lq and Lk independent (an encoder-decoder's cross-attention)
//   decode           Lq = 1 against Lk = the KV cache plus the new token
//   chunked_prefill  a chunk of Lq new tokens after Lk − Lq cached ones (1 ≤ Lq < Lk)
// With a causal mask the alignment (bottom_right, top_left: attention_config.hpp) is drawn too;
// the two agree only when Lq = Lk.
enum class AttentionShape { self_attention, cross_attention, decode, chunked_prefill };

inline std::string to_string(AttentionShape s) {
  switch (s) {
    case AttentionShape::self_attention: return "self-attention";
    case AttentionShape::cross_attention: return "cross-attention";
    case AttentionShape::decode: return "decode";
    case AttentionShape::chunked_prefill: return "chunked prefill";
  }
  return "?";
}

// How the implementation forms the softmax's weights, as its bounds assume
// (reference/attention/attention_bound.hpp): lib/ops/attention's natural exp over the whole row
// (the suite's), natural exp under the online softmax (a running max over key blocks of any
// size, the running sums rescaled, as PyTorch 2's CPU flash-attention kernel), the exp2
// contract of Triton's fused-attention kernels (online too; docs/attention.md says where
// FlashAttention-2/3 differ), or either (the larger of online and
// exp2, which covers all four: the default of a case on disk, docs/attention.md).
enum class SoftmaxContract : unsigned char { natural, online, exp2, either };

// The exp2 contract's lse form (reference::Exp2Lse): base 2 converted, natural units, or either.
enum class Exp2LseForm : unsigned char { base2, natural, either };

struct AttentionCase {
  AttentionOp op = AttentionOp::context_parallel;
  DType dtype = DType::float32;
  int tp = 1;  // mesh (cp, tp), tp fastest: world rank = c_cp·tp + c_tp
  int cp = 1;
  std::size_t batch = 1;
  AttentionShape shape = AttentionShape::self_attention;
  // The layer: the library's projections around the IMPLEMENTATION's context-parallel core
  // (its core() as the layer's ContextParallelCore), so a user's core is checked inside a layer.
  bool core_in_layer = false;
  HeadParallelConfig layer;  // layer.attention is the attention config of either op;
                             // layer.context_parallel the cp config (always set for the core)
  gen::Profile profile = gen::Profile::unit;
  SoftmaxContract contract = SoftmaxContract::natural;
  // Under an online contract (online, exp2, either): the kernel's smallest key block, as a case
  // on disk declares it ("contract": {"name": ..., "key_block": B}); 1: any block size.
  std::size_t key_block = 1;
  // Under exp2 or either: the lse's form, as a case on disk declares it ("contract": {"name":
  // "exp2", "lse": "natural"}); either (the larger bound) unless declared.
  Exp2LseForm exp2_lse = Exp2LseForm::either;
  // The accumulator of every sum: acc_t<T> (reference::arithmetic_of) unless a case on disk
  // declares another ("accumulate", compare/compare.hpp), a 16-bit one included.
  std::optional<DType> accumulate;

  int world() const { return tp * cp; }
  std::size_t q_len() const { return layer.attention.mask.q_len; }  // Lq
  std::size_t k_len() const { return layer.attention.mask.k_len; }  // Lk
  std::size_t len() const { return q_len(); }  // the layer's L (self-attention: Lq = Lk)
  const AttentionConfig& attention() const { return layer.attention; }
  const ContextParallelConfig& context() const { return *layer.context_parallel; }
  // "context_parallel_attention h=4 g=2 d=3 batch=2 L=9 mask=causal+padding[3,9] cp=3
  //  layout=zigzag split=chunk algorithm=ring ...", with "decode Lq=1 Lk=9" for Lq != Lk
  //  and "mask=causal(top_left)" when the alignment matters
  std::string describe() const;
};

struct AttentionCaseOptions {
  std::optional<AttentionOp> op;
  std::optional<CpAlgorithm> algorithm;
  // A world of at least this many ranks when max_world allows (2: bit-identity and traffic of
  // collectives).
  std::optional<int> min_world;
  bool fully_masked_rows = false;  // force at least one query row with no visible key
  bool core_in_layer = false;      // the layer, with CP, around the implementation's core
};

rc::Gen<AttentionCase> gen_case(const RunConfig& config, const AttentionCaseOptions& options);

// The layer's (tp, g) head configurations for tp ≤ max_tp, simplest first: every g < tp with
// g | tp (kv heads replicated over tp/g ranks) and g from tp to max(4, tp) (kv heads split).
// gen_case sweeps this list (generators/structure.hpp), so each pair appears in the first
// cases of every run.
std::vector<std::pair<int, std::size_t>> head_configurations(int max_tp);

// The configurations a case covers, as the coverage test names them: "tp=4 g=2",
// "a tp rank without heads", "cp=3", "ring zigzag".
std::vector<std::string> configuration_labels(const AttentionCase& c);

// The global tensors. Core: q [batch, Lq, h, d], k, v [batch, Lk, g, d], dout like q.
// Layer: x, dy [batch, L, hidden] and the dense weights.
template <class T>
struct AttentionData {
  Tensor<T> q, k, v, dout;
  Tensor<T> x, dy;
  AttentionLayerWeights<T> w;
};

template <class T>
rc::Gen<AttentionData<T>> gen_data(const AttentionCase& c);

// Whether query t of sequence b sees no key at all (its row is empty).
bool row_is_empty(const AttentionMask& m, std::size_t b, std::size_t t);

}  // namespace shardcheck::check
