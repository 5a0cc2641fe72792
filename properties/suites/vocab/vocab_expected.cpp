#include "suites/vocab/vocab_case.hpp"

#include "engine/instantiate.hpp"
#include "engine/slicing.hpp"
#include "reference/vocab/vocab_cross_entropy.hpp"
#include "reference/vocab/vocab_embedding.hpp"

namespace shardcheck::check {

namespace {

// `t` [n, V] widened to [n, V_pad] along `dim` with exact zeros: the padding's gradient (value
// 0, bound 0: any nonzero value there fails).
Tensor<reference::hp> zero_padded(const Tensor<reference::hp>& t, std::size_t dim,
                                  std::size_t padded) {
  Shape shape = t.shape();
  const std::size_t real = shape[dim];
  shape[dim] = padded;
  Tensor<reference::hp> out(shape);
  const std::size_t outer = dim == 0 ? 1 : shape[0], inner = dim == 0 ? shape[1] : 1;
  for (std::size_t o = 0; o < outer; ++o) {
    for (std::size_t i = 0; i < real * inner; ++i) {
      out[o * padded * inner + i] = t[o * real * inner + i];
    }
  }
  return out;
}

ExpectedTensor zero_padded(const ExpectedTensor& x, std::size_t dim, std::size_t padded) {
  return {zero_padded(x.value, dim, padded), zero_padded(x.bound, dim, padded)};
}

}  // namespace

// The reference sees the real vocabulary only (the first V rows of w, the first V columns of
// the logits): the dense model the padded one must equal, whose bounds are derived for V
// (reference/vocab/vocab_cross_entropy.hpp). The padding's gradient is then exactly 0.
template <class T>
VocabExpected expected(const VocabCase& c, const VocabData<T>& d) {
  using reference::hp;
  VocabExpected e;
  const auto arith = reference::arithmetic_of<T>();
  const std::size_t real = c.real_vocab();
  if (c.op == VocabOp::embedding) {
    e.y.value = reference::embedding<hp>(c.ids, reference::to_hp<hp>(rows(d.w, 0, real)));
    e.y.bound = Tensor<hp>(e.y.value.shape());  // zeros
    auto g = reference::embedding_backward<hp>(c.ids, reference::to_hp<hp>(d.dy), real,
                                               c.embedding.padding_idx, arith);
    e.dw = zero_padded({std::move(g.dw), std::move(g.bound)}, 0, c.vocab);
    return e;
  }
  const CrossEntropyOptions& opt = c.ce;  // the loss's options, without the split
  auto r = reference::cross_entropy<hp>(opt, reference::to_hp<hp>(slice(d.logits, 1, {0, real})),
                                        c.ids, reference::to_hp<hp>(d.dloss), arith);
  e.loss = {std::move(r.loss), std::move(r.loss_bound)};
  e.dlogits = zero_padded({std::move(r.grad), std::move(r.grad_bound)}, 1, c.vocab);
  return e;
}

SHARDCHECK_INSTANTIATE_EXPECTED(VocabCase, VocabData, VocabExpected)

}  // namespace shardcheck::check
