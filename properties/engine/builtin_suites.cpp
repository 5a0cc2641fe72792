#include "engine/suite.hpp"
#include "linear/linear_suite.hpp"

namespace shardcheck::check {

void register_builtin_suites() { register_linear_suite(); }

}  // namespace shardcheck::check
