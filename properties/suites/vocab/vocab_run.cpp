#include "suites/vocab/vocab_run.hpp"

#include "engine/slicing.hpp"
#include "runtime/errors.hpp"

namespace shardcheck::check {

spec::OpSpec vocab_spec(const VocabCase& c) {
  return c.op == VocabOp::embedding
             ? vocab_parallel_embedding_spec(c.embedding, c.tokens, c.hidden, c.world)
             : vocab_parallel_cross_entropy_spec(c.ce, c.tokens, c.world);
}

template <class T>
VocabRankInputs<T> vocab_rank_inputs(const VocabCase& c, const VocabData<T>& d, int r) {
  const auto s = vocab_spec(c);
  auto cut = [&](const Tensor<T>& t, const char* name) {
    return place(t, s.tensor(name).placement(), c.world, r);
  };
  VocabRankInputs<T> in;
  in.ids = c.ids;  // ids and targets: R
  if (c.op == VocabOp::embedding) {
    in.w_shard = cut(d.w, "w");
    in.dy = cut(d.dy, "dy");
  } else {
    in.logits_shard = cut(d.logits, "logits");
    in.dloss = cut(d.dloss, "dloss");
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
  const auto s = vocab_spec(c);
  const auto rep = Placement::replicate();  // for the other op's tensors, never materialized
  if (c.op == VocabOp::embedding) {
    return {s.tensor("y").placement(), s.tensor("dw").placement(), rep, rep};
  }
  return {rep, rep, s.tensor("loss").placement(), s.tensor("dlogits").placement()};
}

std::vector<std::vector<DeclaredCall>> vocab_declared_traffic(const VocabCase& c) {
  return declared_calls(vocab_spec(c), c.dtype);
}

#define SHARDCHECK_INSTANTIATE(T)                                                               \
  template VocabRankInputs<T> vocab_rank_inputs<T>(const VocabCase&, const VocabData<T>&, int); \
  template VocabRun<T> run_vocab<T>(const VocabImplementation&, const VocabCase&,               \
                                    const VocabData<T>&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck::check
