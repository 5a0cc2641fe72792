#include "ops/vocab/vocab_spec.hpp"

namespace shardcheck {

using spec::Elem;
using spec::Pass;
using spec::Role;

spec::OpSpec vocab_parallel_embedding_spec(const VocabEmbeddingConfig& cfg, std::size_t tokens,
                                           std::size_t hidden, int p) {
  auto s = spec::op_spec("vocab_parallel_embedding", "vocab", to_json(cfg),
                         {{"tokens", tokens}, {"vocab", cfg.vocab}, {"hidden", hidden}},
                         {{"tp", static_cast<std::size_t>(p)}}, {"ids"});
  const auto w = Placement::shard(0, cfg.vocab_split);
  const auto y =
      cfg.sequence_parallel_output ? Placement::shard(0, cfg.token_split) : Placement::replicate();
  s.tensors = {spec::tensor_of(Elem::index, "ids", Role::input, {tokens}, {Placement::replicate()}),
               spec::tensor("w", Role::parameter, {cfg.vocab, hidden}, {w}),
               spec::tensor("y", Role::output, {tokens, hidden}, {y}),
               spec::tensor("dy", Role::grad_output, {tokens, hidden}, {y}),
               spec::tensor("dw", Role::grad_input, {cfg.vocab, hidden}, {w})};
  const auto pieces = spec::pieces_times(cfg.token_split, tokens, p, hidden);
  for (int r = 0; r < p; ++r) {
    spec::RankCalls c;
    if (cfg.sequence_parallel_output) {
      c.push_back(spec::reduce_scatter_spec(Pass::forward, "y", "tp", Elem::value, pieces, r,
                                            cfg.reduce_algorithm));
      c.push_back(spec::all_gather_spec(Pass::backward, "dy", "tp", Elem::value, pieces, r));
    } else {
      c.push_back(spec::all_reduce_spec(Pass::forward, "y", "tp", Elem::value, tokens * hidden, p,
                                        r, cfg.reduce_algorithm));
    }
    s.calls.push_back(std::move(c));
  }
  // Every rank's buffers: with SP output the full partial rows that are reduce_scattered, and
  // backward the all_gathered dy (without, y is all_reduced in place and the backward makes no
  // call).
  spec::RankBuffers b;
  if (cfg.sequence_parallel_output) {
    b.forward.push_back({{"full partial rows [tokens, hidden] (reduce_scatter input)", Elem::value,
                          tokens * hidden, "tp", Collective::reduce_scatter}});
    b.backward.push_back({{"all_gathered dy [tokens, hidden]", Elem::value, tokens * hidden, "tp",
                           Collective::all_gather}});
  }
  s.buffers.assign(static_cast<std::size_t>(p), b);
  return s;
}

spec::OpSpec vocab_parallel_cross_entropy_spec(const VocabCrossEntropyConfig& cfg,
                                               std::size_t tokens, int p) {
  auto s =
      spec::op_spec("vocab_parallel_cross_entropy", "vocab", to_json(cfg),
                    {{"tokens", tokens}, {"vocab", cfg.vocab}},
                    {{"tp", static_cast<std::size_t>(p)}}, {"logits", "targets", "max", "sum_exp"});
  const auto logits = Placement::shard(1, cfg.vocab_split);
  const auto rep = Placement::replicate();
  const std::size_t loss = cfg.reduction == LossReduction::none ? tokens : 1;
  s.tensors = {spec::tensor("logits", Role::input, {tokens, cfg.vocab}, {logits}),
               spec::tensor_of(Elem::index, "targets", Role::input, {tokens}, {rep}),
               spec::tensor("loss", Role::output, {loss}, {rep}),
               spec::tensor("dloss", Role::grad_output, {loss}, {rep}),
               spec::tensor("dlogits", Role::grad_input, {tokens, cfg.vocab}, {logits}),
               // Saved per token by the forward: the row maximum and the sum of exp (the
               // reduced values, the same on every rank), so the backward makes no collective.
               spec::tensor_of(Elem::acc, "max", Role::saved, {tokens}, {rep}),
               spec::tensor_of(Elem::acc, "sum_exp", Role::saved, {tokens}, {rep})};
  const bool smoothing = cfg.label_smoothing > 0;
  for (int r = 0; r < p; ++r) {
    s.calls.push_back(
        {spec::all_reduce_spec(Pass::forward, "max", "tp", Elem::acc, tokens, p, r,
                               cfg.reduce_algorithm),
         spec::all_reduce_spec(
             Pass::forward, smoothing ? "sum_exp,target_logit,sum_logits" : "sum_exp,target_logit",
             "tp", Elem::acc, (smoothing ? 3 : 2) * tokens, p, r, cfg.reduce_algorithm)});
  }
  // Every rank's one buffer: the packed per-token sums of the second all_reduce (the max is
  // reduced in place).
  const spec::BufferSpec sums{smoothing ? "sums all_reduce buffer [3·tokens] (acc)"
                                        : "sums all_reduce buffer [2·tokens] (acc)",
                              Elem::acc, (smoothing ? 3 : 2) * tokens, "tp",
                              Collective::all_reduce};
  s.buffers.assign(static_cast<std::size_t>(p), spec::one_buffer(Pass::forward, sums));
  return s;
}

std::vector<spec::OpSpec> vocab_example_specs() {
  VocabEmbeddingConfig emb;
  emb.vocab = 9;
  emb.vocab_split = SplitPolicy::explicit_sizes({4, 0, 5});
  emb.padding_idx = 0;
  emb.sequence_parallel_output = true;
  VocabCrossEntropyConfig ce;
  ce.vocab = 9;
  ce.vocab_split = SplitPolicy::explicit_sizes({4, 0, 5});
  ce.label_smoothing = 0.1;
  return {vocab_parallel_embedding_spec(emb, 5, 3, 3), vocab_parallel_cross_entropy_spec(ce, 5, 3)};
}

}  // namespace shardcheck
