#include "suites/vocab/vocab_run.hpp"

#include "engine/slicing.hpp"
#include "runtime/errors.hpp"

namespace shardcheck::check {

template <class T>
VocabRankInputs<T> vocab_rank_inputs(const VocabCase& c, const VocabData<T>& d, int r) {
  VocabRankInputs<T> in;
  in.ids = c.ids;
  const int p = c.world;
  if (c.op == VocabOp::embedding) {
    const auto& cfg = c.embedding;
    in.w_shard = shard(d.w, 0, cfg.vocab_split, p, r);
    in.dy = cfg.sequence_parallel_output ? shard(d.dy, 0, cfg.token_split, p, r) : d.dy;
  } else {
    in.logits_shard = shard(d.logits, 1, c.ce.vocab_split, p, r);
    in.dloss = d.dloss;
  }
  return in;
}

template <class T>
VocabRun<T> run_vocab(const VocabImplementation& impl, const VocabCase& c, const VocabData<T>& d) {
  std::vector<VocabRankInputs<T>> inputs;
  for (int r = 0; r < c.world; ++r) inputs.push_back(vocab_rank_inputs(c, d, r));
  return run_on_ranks<VocabRankOutputs<T>>(c.world, [&](Communicator& comm) {
    const auto& in = inputs[static_cast<std::size_t>(comm.rank())];
    return c.op == VocabOp::embedding ? impl.embedding(comm, c.embedding, in)
                                      : impl.cross_entropy(comm, c.ce, in);
  });
}

VocabPlacements vocab_placements(const VocabCase& c) {
  const auto& e = c.embedding;
  return {e.sequence_parallel_output ? Placement::shard(0, e.token_split) : Placement::replicate(),
          Placement::shard(0, e.vocab_split), Placement::replicate(),
          Placement::shard(1, c.ce.vocab_split)};
}

std::vector<DeclaredCall> vocab_declared_traffic(const VocabCase& c) {
  std::vector<DeclaredCall> calls;
  if (c.op == VocabOp::embedding) {
    const std::uint64_t n = c.tokens * c.hidden;
    if (c.embedding.sequence_parallel_output) {
      calls.push_back({Collective::reduce_scatter, c.dtype, n});
      calls.push_back({Collective::all_gather, c.dtype, n});
    } else {
      calls.push_back({Collective::all_reduce, c.dtype, n});
    }
  } else {
    const DType acc = acc_dtype(c.dtype);
    calls.push_back({Collective::all_reduce, acc, c.tokens});
    calls.push_back({Collective::all_reduce, acc,
                     (c.ce.label_smoothing > 0 ? 3 : 2) * static_cast<std::uint64_t>(c.tokens)});
  }
  return calls;
}

#define SHARDCHECK_INSTANTIATE(T)                                                               \
  template VocabRankInputs<T> vocab_rank_inputs<T>(const VocabCase&, const VocabData<T>&, int); \
  template VocabRun<T> run_vocab<T>(const VocabImplementation&, const VocabCase&,               \
                                    const VocabData<T>&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck::check
