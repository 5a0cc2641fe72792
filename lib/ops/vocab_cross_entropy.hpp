// Vocabulary-parallel cross-entropy (Megatron-LM's vocab_parallel_cross_entropy, with PyTorch's
// F.cross_entropy semantics), forward and backward, never gathering the logits.
//
// Shapes: logits [tokens, V] split by columns (the vocabulary) over the ranks under any
// SplitPolicy, unevenly, ranks with no columns included: rank r holds z_r = columns
// [offset_r, offset_r + V_r) as [tokens, V_r]. targets [tokens] (int64, every rank holds all).
//
// Per token t with target y (ε = label_smoothing, V the GLOBAL vocabulary size):
//   m = max_v z_v                      all_reduce(max) of the local maxima
//   S = Σ_v exp(z_v − m)               all_reduce(sum) of the local sums
//   z_y                                all_reduce(sum): the owner contributes z_y, others 0
//   Z = Σ_v z_v (only when ε > 0)      all_reduce(sum) of the local sums
//   lse = log S + m;  loss_t = (1 − ε)·(lse − z_y) + ε·(lse − Z/V) = lse − (1 − ε)·z_y − (ε/V)·Z
// The three sums travel in ONE all_reduce of 2·tokens (3·tokens with ε > 0) elements; so the
// collectives are all_reduce(max) of tokens and all_reduce(sum) of 2 or 3·tokens elements of
// acc_t<T>, whatever V is. Megatron's smoothing uses the local V_r and the local mean of the
// log-probabilities (Megatron-LM issues #737, #7464): wrong under uneven or any P > 1 split;
// here both are global, as PyTorch's on the dense logits.
//
// Options (PyTorch F.cross_entropy semantics):
//   ignore_index  a token whose target equals it has loss 0 and gradient 0, and does not count
//                 for the mean. Default −100, as PyTorch; std::nullopt: none ignored.
//   reduction     none (loss [tokens]), sum (loss [1]), mean (loss [1] = sum / N, N = the number
//                 of non-ignored tokens; every rank holds every token's target, so N is global
//                 without a collective).
//   Every token ignored with mean: N = 0. PyTorch returns NaN (0/0). We return loss 0 and
//   gradient 0: the loss of an empty set of tokens is 0 (as Megatron-style loss_mask sums with
//   a clamped denominator do), so a micro-batch of only padding does not turn a training step's
//   loss and every gradient into NaN. Documented in docs/vocab.md, tested by the suite.
//   label_smoothing  ε in [0, 1], converted to acc_t<T> (exact for the dyadic values the suite
//                 draws; the bound assumes ε is exact in acc_t<T>).
//   Per-class `weight` (PyTorch) is NOT supported (see docs/vocab.md).
//
// Arithmetic, for T in float64, float32, bfloat16, float16: logits are converted exactly to
// A = acc_t<T>; every step runs in A (exp/log of the C library in A); the collectives carry A;
// the loss and the gradient are rounded once to T at the end.
//
// Backward (no collective): with the forward's saved m and S per token,
//   g[t, v] = s_t·(exp(z_v − m)/S − c_v),  c_v = ε/V + (v = y ? 1 − ε : 0)
// s_t = dloss[t] (none), dloss[0] (sum), dloss[0]/N (mean; 0 when N = 0); 0 for ignored tokens.
// Each rank computes its columns only.
//
// Out-of-range targets (not in [0, V) and not ignore_index) are a UsageError naming the rank,
// the token, the target and V.
//
// Sources: Megatron-LM core/tensor_parallel/cross_entropy.py; PyTorch F.cross_entropy docs;
// Blanchard, Higham & Higham, "Accurate computation of the log-sum-exp and softmax functions",
// IMA J. Numer. Anal. 41(4), 2021 (the max shift).
#pragma once

#include "layout/split_policy.hpp"
#include "ops/linear.hpp"
#include "runtime/communicator.hpp"
#include "tensor/tensor.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace shardcheck {

enum class LossReduction { none, sum, mean };

struct VocabCrossEntropyConfig {
  std::size_t vocab = 0;                           // V, known to every rank (required)
  SplitPolicy vocab_split = SplitPolicy::chunk();  // columns of the logits over the ranks
  std::optional<std::int64_t> ignore_index = -100;
  double label_smoothing = 0;
  LossReduction reduction = LossReduction::mean;
  Algorithm reduce_algorithm = Algorithm::ring;
};

// What the backward needs from the forward (per token, in acc_t<T>): no collective then.
template <class T>
struct VocabCrossEntropySaved {
  std::vector<acc_t<T>> max;      // m per token
  std::vector<acc_t<T>> sum_exp;  // S per token
  std::size_t count = 0;          // N, the non-ignored tokens
};

template <class T>
struct VocabCrossEntropyOutput {
  Tensor<T> loss;  // [tokens] (none) or [1] (sum, mean); bit-identical on every rank
  VocabCrossEntropySaved<T> saved;
};

// Forward on one rank. logits_shard [tokens, V_r], targets [tokens].
// Collectives: all_reduce(max) of tokens and all_reduce(sum) of 2·tokens (3·tokens when
// label_smoothing > 0) elements of acc_t<T>.
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
