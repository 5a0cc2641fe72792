// One training step of a decoder-only transformer (model_config.hpp) partitioned over a
// pp × dp × cp × tp mesh, as Megatron-LM partitions it, composed of the library's ops.
//
// The mesh (layout/device_mesh.hpp) is (pp, dp, cp, tp), row-major: world rank
//   r = ((c_pp·dp + c_dp)·cp + c_cp)·tp + c_tp
// (tp fastest, then cp, dp, pp: Megatron-LM's default order "tp-cp-ep-dp-pp").
//
// What each mesh axis splits:
//   pp  the layers, into stages by layer_split (uneven, a stage may hold none); the first stage
//       also holds the embedding, the last the final norm, the output projection and the loss.
//       Stages pass activations forward and their gradients backward with send/recv between the
//       ranks of the same (dp, cp, tp) coordinates, tag = the micro-batch.
//   dp  the batch's sequences, by batch_split (a dp rank may hold none); each dp rank cuts its
//       sequences into `micro_batches` micro-batches by micro_batch_split (empty ones allowed).
//   cp  every sequence's positions (ContextParallelConfig: contiguous or zigzag, ring or
//       all_gather; ops/attention/context_parallel_attention.hpp).
//   tp  the heads (attention_layer), the ffn features (parallel_mlp), the vocabulary (the
//       embedding's rows, the output projection's rows, the loss's columns); with
//       sequence_parallel also the tokens between the linear layers (the norms and residuals run
//       on token_split's rows of each micro-batch's [sequences·L_c] tokens, flattened
//       sequence-major).
// A micro-batch on (dp d, cp c) is its sequences × rank c's positions, flattened sequence-major
// ([b·L_c, H]); without sequence_parallel every tp rank holds all of them.
//
// Per micro-batch, forward (the op of each step in brackets):
//   first stage  x = E[ids]            [vocab_parallel_embedding; reduce_scatter to token rows
//                                        with sequence_parallel]
//   each layer   a = norm1(x)           [norm_forward, or sequence_parallel_norm]
//                h = x + attention(a)   [attention_layer over (tp, cp); the add in T]
//                b = norm2(h)
//                x = h + mlp(b)         [parallel_mlp over tp]
//   last stage   f = final_norm(x); logits = f·Wᵀ [column_parallel_linear over tp, vocab rows
//                of W, all_gather of f's tokens with sequence_parallel]; the loss sum
//                Σ_t loss_t [vocab_parallel_cross_entropy, reduction sum]
// and the backward in reverse with dloss = 1 (the gradient of the loss SUM: Megatron-LM's
// per-token loss; the division by the global token count N comes once, at the end). The
// schedule is GPipe: every micro-batch's forward, then every backward in reverse micro-batch
// order.
//
// Gradients ("finalize", Megatron-LM's finalize_model_grads):
//   1. per micro-batch the ops return their gradients in T, already reduced where the op
//      reduces them (a shared kv head over its tp group; the norms' over tp with
//      sequence_parallel); they are accumulated in A = acc_t<T> over the micro-batches, in the
//      backward's order;
//   2. every parameter's accumulated gradient is summed over the dp × cp group (each saw other
//      tokens), one all_reduce of A per parameter tensor (so a parameter replicated over tp is
//      summed in the same order on every tp rank);
//   3. a tied embedding with pp > 1: E's gradient on the first stage and the output copy's on
//      the last are summed over the embedding group (the two ranks of the same dp, cp, tp
//      coordinates), one all_reduce each; with pp = 1 both ops' gradients went into one buffer;
//   4. every gradient is divided by N (in A), N = the batch's non-ignored targets (every rank
//      holds the batch, so N needs no collective).
// The global norm ‖g‖₂ = sqrt(Σ g²) in A: each rank sums the squares of the parameters it is the
// one owner of (a tp shard on its rank; a parameter replicated over tp on tp rank 0; a kv head
// shared by a kv group on that group's first rank; a tied embedding on the first stage only),
// then one all_reduce over the model-parallel group (tp × pp: the ranks of the same dp, cp).
// SGD: p' = T(p − lr·coef·g) in A.
// The loss (last stage): the micro-batches' loss sums in A, one all_reduce over dp × cp, / N.
//
// Results that several ranks hold are bit-identical on all of them: the loss on the last
// stage's ranks, the norm and coef everywhere, a replicated parameter's gradient and new value on
// every rank that holds it (all_reduces fold in one order on every member,
// runtime/communicator.hpp).
//
// Sources: Shoeybi et al. 2019 and Narayanan et al. 2021 (Megatron-LM's tensor and pipeline
// parallelism; GPipe, Huang et al. 2019); Korthikanti et al. 2022 (sequence parallelism);
// Megatron-LM core/distributed/finalize_model_grads.py (dp × cp gradient reduction, embedding
// group, per-token loss) and core/optimizer/clip_grads.py (the global norm over the
// model-parallel group with tensor-parallel duplicates counted once); docs/model.md.
#pragma once

#include "layout/device_mesh.hpp"
#include "layout/split_policy.hpp"
#include "ops/attention/head_parallel_attention.hpp"
#include "ops/linear/linear.hpp"
#include "ops/mlp/mlp.hpp"
#include "ops/model/model_config.hpp"
#include "ops/norm/norm.hpp"
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"
#include "runtime/communicator.hpp"
#include "runtime/dtype.hpp"
#include "tensor/tensor.hpp"

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardcheck {

struct ModelParallelConfig {
  int pp = 1, dp = 1, cp = 1, tp = 1;                    // the mesh; pp·dp·cp·tp ranks
  SplitPolicy layer_split = SplitPolicy::chunk();        // layers over the pp stages
  SplitPolicy batch_split = SplitPolicy::chunk();        // sequences over the dp ranks
  int micro_batches = 1;                                 // per dp rank, ≥ 1
  SplitPolicy micro_batch_split = SplitPolicy::chunk();  // a dp rank's sequences over them
  CpLayout cp_layout = CpLayout::contiguous;
  SplitPolicy seq_split = SplitPolicy::chunk();  // positions over cp (zigzag: 2·cp chunks)
  CpAlgorithm cp_algorithm = CpAlgorithm::ring;
  bool sequence_parallel = false;
  SplitPolicy token_split = SplitPolicy::chunk();  // a micro-batch's tokens over tp (with SP)
  SplitPolicy kv_head_split = SplitPolicy::chunk();
  SplitPolicy ffn_split = SplitPolicy::chunk();
  SplitPolicy vocab_split = SplitPolicy::chunk();
  Algorithm reduce_algorithm = Algorithm::ring;  // every all_reduce and reduce_scatter
};

// (pp, dp, cp, tp) with the sizes of `par`. @throws UsageError when a size is < 1.
DeviceMesh model_mesh(const ModelParallelConfig& par);

// "pp=2 dp=1 cp=2 tp=3 layers=chunk mb=2 ..." (every field, for case descriptions).
std::string to_string(const ModelParallelConfig& par);

// ---------------------------------------------------------------- parameters

// One rank's shards of ModelParams (model_config.hpp): its stage's layers only, sharded over tp
// (wq, bq, wo by its query heads; wk, bk, wv, bv by its kv heads; w_up, b_up by its ffn features
// as [W_gate,r; W_up,r]; w_down by its ffn columns; the norms, bo and b_down whole); embedding on
// the first stage only (its vocab rows [V_r, H]); final norm on the last stage only; output on
// the last stage only (its vocab rows), which with a tied embedding and pp > 1 is the last
// stage's copy of E's rows (pp = 1: empty, E serves both).

// fn(name, a_tensor, b_tensor) for every tensor of two ModelParams (of any element types) with
// the same layers, in one order: "embedding", "layers.<l>.norm1_gamma", ..., "layers.<l>.wq",
// ..., "final_gamma", "final_beta", "output" (l the index within the struct: the stage's own
// layers for a shard). Empty tensors (absent biases) are visited too.
template <class P, class Q, class Fn>
void for_each_param(P& a, Q& b, Fn&& fn) {
  fn("embedding", a.embedding, b.embedding);
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    auto& x = a.layers[l];
    auto& y = b.layers[l];
    const std::string n = "layers." + std::to_string(l) + ".";
    fn(n + "norm1_gamma", x.norm1_gamma, y.norm1_gamma);
    fn(n + "norm1_beta", x.norm1_beta, y.norm1_beta);
    fn(n + "wq", x.wq, y.wq);
    fn(n + "bq", x.bq, y.bq);
    fn(n + "wk", x.wk, y.wk);
    fn(n + "bk", x.bk, y.bk);
    fn(n + "wv", x.wv, y.wv);
    fn(n + "bv", x.bv, y.bv);
    fn(n + "wo", x.wo, y.wo);
    fn(n + "bo", x.bo, y.bo);
    fn(n + "norm2_gamma", x.norm2_gamma, y.norm2_gamma);
    fn(n + "norm2_beta", x.norm2_beta, y.norm2_beta);
    fn(n + "w_up", x.w_up, y.w_up);
    fn(n + "b_up", x.b_up, y.b_up);
    fn(n + "w_down", x.w_down, y.w_down);
    fn(n + "b_down", x.b_down, y.b_down);
  }
  fn("final_gamma", a.final_gamma, b.final_gamma);
  fn("final_beta", a.final_beta, b.final_beta);
  fn("output", a.output, b.output);
}

// A layer's attention weights as the attention layer takes them (copies).
template <class T>
AttentionLayerWeights<T> attention_weights(const TransformerLayerParams<T>& p) {
  return {p.wq, p.bq, p.wk, p.bk, p.wv, p.bv, p.wo, p.bo};
}

// ---------------------------------------------------------------- the partition

// Rank `world_rank`'s place: its coordinates and its stage's layers.
struct ModelCoordinates {
  int pp = 0, dp = 0, cp = 0, tp = 0;
  Piece layers;  // its stage's layers [offset, offset + size)
  bool first_stage() const { return pp == 0; }
  bool last_stage(const ModelParallelConfig& par) const { return pp == par.pp - 1; }
};

// @throws UsageError when the mesh does not hold world_rank or layer_split cannot cut the layers.
ModelCoordinates model_coordinates(const ModelConfig& cfg, const ModelParallelConfig& par,
                                   int world_rank);

// dp rank d's sequences of a batch of `sequences`. @throws UsageError (batch_split).
Piece dp_sequences(const ModelParallelConfig& par, std::size_t sequences, int dp_rank);

// The micro-batches' sequences of a dp rank holding `sequences` (offsets within them).
std::vector<Piece> micro_batch_pieces(const ModelParallelConfig& par, std::size_t sequences);

// cp rank c's global positions of a sequence of length L, in its local order.
std::vector<std::size_t> model_cp_positions(const ModelParallelConfig& par, std::size_t seq_len,
                                            int cp_rank);

// The layer configurations the model's ops run with, for a micro-batch of `sequences`
// sequences of length seq_len (every rank derives the same ones).
HeadParallelConfig model_attention_config(const ModelConfig& cfg, const ModelParallelConfig& par,
                                          std::size_t sequences, std::size_t seq_len);

// The other ops' configurations, for a micro-batch of `tokens` tokens on its cp rank (b·L_c):
// the norms (sequence-parallel over tp), the MLP, the output projection (column-parallel over
// the vocabulary rows, all_gathering the tokens with sequence parallelism), the embedding and the
// loss (reduction sum: the per-token loss). model_train_step and the spec derive the same ones.
SequenceParallelNormConfig model_norm_config(const ModelConfig& cfg, const ModelParallelConfig& par,
                                             std::size_t tokens);
MlpConfig model_mlp_config(const ModelConfig& cfg, const ModelParallelConfig& par,
                           std::size_t tokens);
ColumnParallelConfig model_output_config(const ModelConfig& cfg, const ModelParallelConfig& par,
                                         std::size_t tokens);
VocabEmbeddingConfig model_embedding_config(const ModelConfig& cfg, const ModelParallelConfig& par);
VocabCrossEntropyConfig model_loss_config(const ModelConfig& cfg, const ModelParallelConfig& par);

// Every dense parameter at its shape, zero (absent biases and betas empty): the one list of the
// model's parameters and their shapes.
ModelParams<double> model_param_shapes(const ModelConfig& cfg);

// One rank's shards of the dense parameters. @throws UsageError (shapes, head assignment).
template <class T>
ModelParams<T> shard_model_params(const ModelConfig& cfg, const ModelParallelConfig& par,
                                  const ModelParams<T>& dense, int world_rank);

// One parameter's local shape on a rank.
struct NamedShape {
  std::string name;  // for_each_param's name on a shard ("layers.<l>." with l the stage's index)
  Shape shape;       // {} where the rank holds none (an absent bias or beta, another stage's)
};

// Rank `world_rank`'s local shape of every parameter, in for_each_param's order on its shard:
// shard_model_params' shapes without making a tensor (the spec's calls and the budget of real
// sizes need the sizes only). With q_r, g_r its query and kv heads (head_assignment), F_r, V_r
// its ffn features and vocab rows, k = 2 for swiglu else 1: embedding [V_r, H] (first stage),
// per layer of its stage wq [q_r·d, H], wk, wv [g_r·d, H], wo [H, q_r·d], w_up [k·F_r, H],
// w_down [H, F_r], the norms [H], biases by their rows; final_gamma/beta [H] and output
// [V_r, H] on the last stage (output {} when tied with pp = 1). The unit tests check it against
// shard_model_params. @throws UsageError as shard_model_params.
std::vector<NamedShape> model_local_param_shapes(const ModelConfig& cfg,
                                                 const ModelParallelConfig& par, int world_rank);

// ---------------------------------------------------------------- the step

template <class T>
struct ModelStepResult {
  std::optional<acc_t<T>> loss;  // the last stage's ranks: Σ loss_t / N; others: none
  std::size_t tokens = 0;        // N, the batch's non-ignored targets
  ModelParams<acc_t<T>> grads;   // this rank's shards of ∂loss/∂p, after every reduction
  acc_t<T> grad_norm{0};         // ‖g‖₂ over every parameter once
  acc_t<T> clip_coef{1};
  ModelParams<T> params;  // this rank's shards after the SGD step
  // The first stage's ∂(Σ_t loss_t)/∂x_0 (the embedding's output, the loss SUM's gradient in T,
  // as the backward computes it), per micro-batch: [b·L_c, H], or this tp rank's token rows
  // with sequence_parallel. Empty on the other stages.
  std::vector<Tensor<T>> input_grads;
};

// f(every member), in declaration order (the check engine sends a rank's results between MPI
// processes member by member).
template <class T, class F>
void fields(ModelStepResult<T>& o, F&& f) {
  f(o.loss, o.tokens, o.grads, o.grad_norm, o.clip_coef, o.params, o.input_grads);
}

// One training step on one rank of the mesh: forward and backward over every micro-batch,
// finalize the gradients, clip, SGD. Every rank of `world` calls it with the same cfg, par,
// opt and batch and its own shards (shard_model_params). @pre world.size() == pp·dp·cp·tp.
// @throws UsageError naming the rank and the shapes (bad shards, sizes, ids or targets out of
// range), and whatever an op throws.
template <class T>
ModelStepResult<T> model_train_step(Communicator& world, const ModelConfig& cfg,
                                    const ModelParallelConfig& par, const OptimizerConfig& opt,
                                    const ModelParams<T>& shard, const ModelBatch& batch);

}  // namespace shardcheck
