// What the vocab suite expects of a case: the exact values in high precision, each with its
// elementwise a-priori bound for the case's element type (reference/vocab/vocab_embedding.hpp,
// reference/vocab/vocab_cross_entropy.hpp; derivations in docs/vocab.md).
#pragma once

#include "engine/expected.hpp"
#include "suites/vocab/vocab_case.hpp"

namespace shardcheck::check {

struct VocabExpected {
  ExpectedTensor y, dw;          // embedding (y's bound is 0: exact data movement)
  ExpectedTensor loss, dlogits;  // cross_entropy
};

template <class T>
VocabExpected expected(const VocabCase& c, const VocabData<T>& d);

}  // namespace shardcheck::check
