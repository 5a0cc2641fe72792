// The attention suite's mutant catalog: realistic bugs of partitioned attention, each a
// registered implementation that the suite must catch. They are built from the library's own
// pieces (the block kernel, the merge, the projections) with one thing done wrong, so each
// differs from a correct implementation in exactly the way its description says.
#pragma once

namespace shardcheck::check {

void register_attention_mutants();

}  // namespace shardcheck::check
