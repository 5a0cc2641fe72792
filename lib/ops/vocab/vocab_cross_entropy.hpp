// Vocabulary-parallel cross-entropy (Megatron-LM's vocab_parallel_cross_entropy, with PyTorch's
// F.cross_entropy semantics), forward and backward, never gathering the logits.
//
// Shapes: logits [tokens, V] split by columns (the vocabulary) over the ranks under any
// SplitPolicy, unevenly, ranks with no columns included: rank r holds z_r = columns
// [offset_r, offset_r + V_r) as [tokens, V_r]. targets [tokens] (int64, every rank holds all).
//
// Per token t with target y (ε = label_smoothing, V the GLOBAL vocabulary size; c_v the class
// weights, ω_t the token weights, both 1 when not given):
//   m = max_v z_v                      all_reduce(max) of the local maxima
//   S = Σ_v exp(z_v − m)               all_reduce(sum) of the local sums
//   T = k·(m − z_y), k = (1 − ε)·c_y   all_reduce(sum): the owner contributes T, others 0
//   Q = Σ_v w_v·(m − z_v), w_v = (ε/V)·c_v (only when ε > 0)
//                                      all_reduce(sum) of the local sums over the rank's columns
//   K = k + Σ_v w_v                    every rank, from the full class_weight (no collective)
//   loss_t = ω_t·(K·log S + T + Q)     (K = 1 without class weights)
// i.e. PyTorch's (1 − ε)·c_y·(−log p_y) + (ε/V)·Σ_v c_v·(−log p_v), times ω_t, with
// −log p_v = log S + (m − z_v). Every product x·(m − z_v) is computed as x·m − x·z_v (m − z_v
// overflows for logits ±max), and without class weights every term is ≥ 0, so no intermediate
// exceeds the loss. For sum and mean the token weights are first scaled by a power of two
// (ω'_t = ω_t·2^−e, max |ω'_t| ∈ [1/2, 1)): mean = Σ_t ω'_t·loss_t / Σ_t ω'_t·c_{y_t} and
// sum = 2^e·Σ_t ω'_t·loss_t, so ω_t·loss_t never overflows where the reduced loss does not.
// With class weights (any sign, up to ±max) terms can cancel, and an intermediate may overflow
// while the loss is finite: the bound (reference/vocab/vocab_cross_entropy_bound.hpp) is then
// +inf, exactly when an intermediate's magnitude plus its error bound reaches A's overflow
// threshold.
// The three sums travel in ONE all_reduce of 2·tokens (3·tokens with ε > 0) elements, with or
// without weights (Q is the class-weighted sum when class weights are given, never a fourth
// slot); so the collectives are all_reduce(max) of tokens and all_reduce(sum) of 2 or 3·tokens
// elements of acc_t<T>, whatever V is. Megatron's smoothing uses the local V_r and the local
// mean of the log-probabilities (Megatron-LM issues #737, #7464): wrong under uneven or any
// P > 1 split; here both are global, as PyTorch's on the dense logits.
//
// Options (PyTorch F.cross_entropy semantics):
//   ignore_index  a token whose target equals it has loss 0 and gradient 0, and does not count
//                 for the mean. Default −100, as PyTorch; std::nullopt: none ignored.
//   reduction     none (loss [tokens]), sum (loss [1]), mean (loss [1] = sum / D with
//                 D = Σ_{t non-ignored} ω_t·c_{y_t}; without weights D = N, the number of
//                 non-ignored tokens; every rank holds every token's target and both weight
//                 vectors, so D is global without a collective).
//   Every token ignored, or D = 0 (all weights of the non-ignored tokens zero), with mean:
//   PyTorch returns NaN (0/0). We return loss 0 and gradient 0: the loss of an empty (or
//   all-zero-weight) set of tokens is 0 (as Megatron-style loss_mask sums with a clamped
//   denominator do), so a micro-batch of only padding does not turn a training step's loss and
//   every gradient into NaN. Documented in docs/vocab.md, tested by the suite. (D = 0 is
//   tested on the computed D in A; with non-negative weights it is 0 exactly when D is.)
//   label_smoothing  ε in [0, 1], converted to acc_t<T> (exact for the dyadic values the suite
//                 draws; the bound assumes ε is exact in acc_t<T>).
//   class_weight  PyTorch's per-class `weight` [V] (empty: none). Every rank holds the FULL
//                 vector, indexed by the global column v = offset_r + v_local. Semantics exactly
//                 PyTorch's (F.cross_entropy docs: "a manual rescaling weight given to each
//                 class"; aten/src/ATen/native/LossNLL.cpp, cross_entropy_loss_label_smoothing:
//                 nll_loss(log_softmax, target, weight) with the mean over Σ weight[target], plus
//                 smooth_loss = −Σ_v weight_v·log p_v, its mean divided by the same
//                 Σ weight[target] over non-ignored targets, combined as
//                 (1 − ε)·nll + (ε/V)·smooth): loss_t = (1 − ε)·c_y·(−log p_y) +
//                 (ε/V)·Σ_v c_v·(−log p_v); mean divides by Σ_t c_{y_t} over non-ignored tokens.
//   token_weight  per-token weights ω_t [tokens] (empty: none), every rank holds all (like the
//                 targets): Megatron's loss_mask generalized, loss_t·ω_t. Combined with class
//                 weights by multiplication: loss_t = ω_t·(class-weighted loss_t) and
//                 D = Σ_t ω_t·c_{y_t}; so mean = Σ_t ω_t·loss_t / Σ_{t non-ignored} ω_t without
//                 class weights, and PyTorch's weighted mean with all ω_t = 1.
//   Weights are given as double and converted to acc_t<T> once: exact for values of T (every
//   value of T is one of acc_t<T>); the bound assumes the converted weights are the weights.
//   Any finite value is accepted (negative too); non-finite weights are a UsageError.
//
// Arithmetic, for T in float64, float32, bfloat16, float16: logits are converted exactly to
// A = acc_t<T>; every step runs in A (exp/log of the C library in A); the collectives carry A;
// the loss and the gradient are rounded once to T at the end.
//
// Backward (no collective): with the forward's saved m and S per token, p_v = exp(z_v − m)/S,
//   g[t, v] = s_t·(K_t·p_v − c'_v),  K_t = (1 − ε)·c_y + (ε/V)·Σ_v c_v,
//   c'_v = (ε/V)·c_v + (v = y ? (1 − ε)·c_y : 0)   (without class weights K_t = 1, c_v = 1)
// s_t = ω_t·dloss[t] (none), ω_t·dloss[0] (sum), ω'_t·dloss[0]/D' (mean, D' = 2^−e·D; 0 when
// D' = 0); 0 for
// ignored tokens. Each rank computes its columns only.
//
// Out-of-range targets (not in [0, V) and not ignore_index) are a UsageError naming the rank,
// the token, the target and V; so is a class_weight not of length V or a token_weight not of
// length tokens (naming the rank, the length given and what to pass).
//
// Padded vocabulary (cfg.real_vocab, below): the logits have V_pad = cfg.vocab columns, split
// over the ranks, of which only the first V = cfg.real_vocab are classes; columns [V, V_pad)
// are padding (Megatron-LM pads the vocabulary to a multiple of make_vocab_size_divisible_by·tp,
// megatron/training/tokenizer/tokenizer.py `_vocab_size_with_padding`; vLLM's
// VocabParallelEmbedding / ParallelLMHead keep `org_vocab_size` beside the padded
// `num_embeddings_padded`). The loss is the dense loss over the V real classes: every formula
// above uses the REAL V and sums over real columns only. Each rank masks its own padding
// columns locally (none, some, or all of its columns may be padding): they are left out of m,
// S and Z (never shifted, exponentiated or added: no exp of a padding logit is ever computed, so
// a padding logit of any value, inf included, changes nothing), ε/V uses the real V, C and
// class_weight ([V], PyTorch's dense `weight`) cover the real classes only, and the gradient
// of a padding column is exactly 0. The collectives are unchanged (same counts: masking is
// local). A target in [V, V_pad) is a UsageError naming the rank, the token, the target, V and
// V_pad. (Megatron-LM's vocab_parallel_cross_entropy includes the padding logits in the max and
// the sum of exponentials; its padding logits are trained toward −inf instead: a different
// loss from the dense model's, and the `padding-logits-in-softmax` mutant here.)
//
// Sources: Megatron-LM core/tensor_parallel/cross_entropy.py; PyTorch F.cross_entropy docs;
// Blanchard, Higham & Higham, "Accurate computation of the log-sum-exp and softmax functions",
// IMA J. Numer. Anal. 41(4), 2021 (the max shift).
#pragma once

#include "layout/split_policy.hpp"
#include "ops/vocab/vocab_config.hpp"
#include "runtime/communicator.hpp"
#include "tensor/tensor.hpp"

#include <string_view>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace shardcheck {

// The loss's options (ignore_index, label_smoothing, reduction, class and token weights:
// CrossEntropyOptions, vocab_config.hpp) and how the vocabulary is split over the ranks.
// vocab: the logits' column count (V_pad when padded), the count the split divides; known to
// every rank (required). real_vocab: the real vocabulary V ≤ vocab (vLLM's org_vocab_size),
// columns [V, vocab) being padding; std::nullopt (the default): no padding, V = vocab.
// real_vocab_size() below reads it.
struct VocabCrossEntropyConfig : CrossEntropyOptions {
  std::size_t vocab = 0;                  // V_pad: columns of the logits (required)
  std::optional<std::size_t> real_vocab;  // V, the real classes in [1, vocab]; none: V = vocab
  SplitPolicy vocab_split = SplitPolicy::chunk();  // columns of the logits over the ranks
  Algorithm reduce_algorithm = Algorithm::ring;
};

// The real vocabulary V of a config: cfg.real_vocab when given, else cfg.vocab (no padding).
constexpr std::size_t real_vocab_size(const VocabCrossEntropyConfig& cfg) noexcept {
  return cfg.real_vocab.value_or(cfg.vocab);
}

// What the backward needs from the forward (per token, in acc_t<T>): no collective then.
template <class T>
struct VocabCrossEntropySaved {
  std::vector<acc_t<T>> max;      // m per token
  std::vector<acc_t<T>> sum_exp;  // S per token
  std::size_t count = 0;          // N, the non-ignored tokens
  // D' = Σ_{t non-ignored} ω'_t·c_{y_t} in A, ω'_t = ω_t·2^−e the scaled token weights (= N
  // without weights; D' = 2^−e·D)
  acc_t<T> weight_sum{0};
};

template <class T>
struct VocabCrossEntropyOutput {
  Tensor<T> loss;  // [tokens] (none) or [1] (sum, mean); bit-identical on every rank
  VocabCrossEntropySaved<T> saved;
};

// Forward on one rank. logits_shard [tokens, V_r], targets [tokens].
// Collectives: all_reduce(max) of tokens and all_reduce(sum) of 2·tokens (3·tokens when
// label_smoothing > 0) elements of acc_t<T>, with or without class and token weights.
template <class T>
VocabCrossEntropyOutput<T> vocab_parallel_cross_entropy(Communicator& tp,
                                                        const VocabCrossEntropyConfig& cfg,
                                                        const Tensor<T>& logits_shard,
                                                        std::span<const std::int64_t> targets);

// Backward on one rank: the gradient of the loss with respect to logits_shard [tokens, V_r],
// given dloss ([tokens] for none, [1] for sum and mean). No collective.
template <class T>
Tensor<T> vocab_parallel_cross_entropy_backward(Communicator& tp,
                                                const VocabCrossEntropyConfig& cfg,
                                                const Tensor<T>& logits_shard,
                                                std::span<const std::int64_t> targets,
                                                const VocabCrossEntropySaved<T>& saved,
                                                const Tensor<T>& dloss);

}  // namespace shardcheck
