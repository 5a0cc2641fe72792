// The mlp suite. Step 1 of docs/adding-an-op.md: the op and its unit tests only; the suite's
// family description comes with step 3.
#include "suites/mlp/mlp_suite.hpp"

namespace shardcheck::check {

void register_mlp_suite() {}

}  // namespace shardcheck::check
