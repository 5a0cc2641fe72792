#include "suites/vocab/vocab_case.hpp"

#include "engine/instantiate.hpp"
#include "reference/vocab/vocab_cross_entropy.hpp"
#include "reference/vocab/vocab_embedding.hpp"

namespace shardcheck::check {

template <class T>
VocabExpected expected(const VocabCase& c, const VocabData<T>& d) {
  using reference::hp;
  VocabExpected e;
  const auto arith = reference::arithmetic_of<T>();
  if (c.op == VocabOp::embedding) {
    e.y.value = reference::embedding<hp>(c.ids, reference::to_hp<hp>(d.w));
    e.y.bound = Tensor<hp>(e.y.value.shape());  // zeros
    auto g = reference::embedding_backward<hp>(c.ids, reference::to_hp<hp>(d.dy), c.vocab,
                                               c.embedding.padding_idx, arith);
    e.dw = {std::move(g.dw), std::move(g.bound)};
    return e;
  }
  const CrossEntropyOptions& opt = c.ce;  // the loss's options, without the split
  auto r = reference::cross_entropy<hp>(opt, reference::to_hp<hp>(d.logits), c.ids,
                                        reference::to_hp<hp>(d.dloss), arith);
  e.loss = {std::move(r.loss), std::move(r.loss_bound)};
  e.dlogits = {std::move(r.grad), std::move(r.grad_bound)};
  return e;
}

SHARDCHECK_INSTANTIATE_EXPECTED(VocabCase, VocabData, VocabExpected)

}  // namespace shardcheck::check
