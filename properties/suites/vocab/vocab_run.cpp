#include "suites/vocab/vocab_case.hpp"

#include "engine/instantiate.hpp"
#include "engine/slicing.hpp"
#include "runtime/errors.hpp"

namespace shardcheck::check {

spec::OpSpec op_spec(const VocabCase& c) {
  return c.op == VocabOp::embedding
             ? vocab_parallel_embedding_spec(c.embedding, c.tokens, c.hidden, c.world)
             : vocab_parallel_cross_entropy_spec(c.ce, c.tokens, c.world);
}

// What rank r is given (vocab_impl.hpp documents the layout).
template <class T>
VocabRankInputs<T> vocab_rank_inputs(const VocabCase& c, const VocabData<T>& d, int r) {
  const auto s = op_spec(c);
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
VocabRun<T> run_ranks(const VocabImplementation& impl, const VocabCase& c, const VocabData<T>& d) {
  return run_on_ranks_with<VocabRankOutputs<T>>(
      c.world, [&](int r) { return vocab_rank_inputs(c, d, r); },
      [&](Communicator& comm, const VocabRankInputs<T>& in) {
        return c.op == VocabOp::embedding ? impl.embedding(comm, c.embedding, in)
                                          : impl.cross_entropy(comm, c.ce, in);
      });
}

SHARDCHECK_INSTANTIATE_RUN_RANKS(VocabImplementation, VocabCase, VocabData, VocabRun)

}  // namespace shardcheck::check
