// The activation memory of one training step of the model (ops/model/model.hpp) on one rank:
// the most bytes live at once, the step's kept activations plus its ops' collective buffers, as
// the library's step holds them (ops/model/model_step.hpp: it counts what it keeps in the rank's
// live bytes, beside the ops' workspace buffers), predicted from the ops' own models
// (library_activations.hpp) along the GPipe timeline:
//
//   forward, micro-batch k = 0 .. m−1, the stage's ops in order (the embedding on the first
//   stage; per layer norm1, the attention layer, norm2, the MLP; on the last stage the final
//   norm, the output projection, the loss): each op's forward peak on top of what is kept so
//   far; after each layer its kept tensors join the kept bytes, after the loss the head's;
//   backward, micro-batch k = m−1 .. 0, the ops in reverse: each op's backward peak on top of
//   the kept bytes (the attention layer without the cp pack: the model sums its gradients over
//   dp × cp in the finalize, not per micro-batch); after the layers' backward micro-batch k's
//   kept bytes are freed (so the first stage's embedding backward sees only the earlier ones).
//
// Kept per layer of micro-batch k on rank (pp, dp, cp, tp), b its sequences, L_c the cp rank's
// positions, n = b·L_c tokens, r = its rows (its token_split rows of n with sequence
// parallelism, else n), h_r, g_r its heads, F_r its ffn features, V_r its vocabulary rows,
// e = sizeof(T), a = sizeof(acc_t<T>), k' = 2 for swiglu else 1:
//   x, a, h, b           4·r·H·e
//   q, out               2·b·L_c·h_r·d·e;   k, v  2·b·L_c·g_r·d·e;   lse  b·h_r·L_c·a
//   the MLP's h          n·k'·F_r·e
// and on the last stage per micro-batch: x, f r·H·e each, the logits n·V_r·e, max and sum_exp
// n·a each. The finalize and the optimizer work in place: no buffer.
#pragma once

#include "budget/library_activations.hpp"
#include "budget/traffic.hpp"
#include "ops/model/model.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace shardcheck::budget {

struct ModelActivations {
  std::uint64_t peak = 0;                // the most live bytes at once
  std::string at;                        // where: "backward of micro-batch 1, layer 0 (attention)"
  std::vector<Term> peak_terms;          // the kept bytes and the op's buffers at that moment
  std::uint64_t kept_after_forward = 0;  // every micro-batch's kept bytes (GPipe's high mark)
};

// Rank `world_rank`'s step on a batch of `sequences` sequences of `seq_len` tokens.
// @throws UsageError as the partition functions of model.hpp do.
ModelActivations model_step_activations(const ModelConfig& cfg, const ModelParallelConfig& par,
                                        std::size_t sequences, std::size_t seq_len, int world_rank,
                                        ElementBytes e);

}  // namespace shardcheck::budget
