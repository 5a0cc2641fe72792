#include "attention/attention_suite.hpp"
#include "engine/suite.hpp"
#include "linear/linear_suite.hpp"
#include "merge/merge_suite.hpp"
#include "norm/norm_suite.hpp"
#include "vocab/vocab_suite.hpp"

namespace shardcheck::check {

void register_builtin_suites() {
  register_linear_suite();
  register_norm_suite();
  register_softmax_merge_suite();
  register_vocab_suite();
  register_attention_suite();
}

}  // namespace shardcheck::check
