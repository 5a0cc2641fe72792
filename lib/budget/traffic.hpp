// Collective traffic: the bytes a collective moves per rank with the ring algorithms (nccl-tests
// PERFORMANCE.md bus-bandwidth factors, the same the runtime's ledger records when the buffer
// splits evenly), the aggregate network bytes (per rank x ranks), and per-layer counts.
//
//   all_reduce                          2(n-1)/n · S per rank
//   all_gather, reduce_scatter,
//   all_to_all                          (n-1)/n · S per rank        (S = the full buffer)
//   broadcast, reduce                   S (the chain: every rank but one sends S)
//
// Per transformer layer, forward + backward (Shoeybi et al. 2019, Megatron-LM; Korthikanti et
// al. 2022 §4.2.2): tensor parallelism alone does 4 all_reduces of the s·b·h activations (2
// forward, 2 backward); with sequence parallelism 4 all_gathers and 4 reduce_scatters of the
// same tensors, the same bytes. Context-parallel ring attention sends each rank's K and V
// chunk, 2·b·(s/cp)·g·d elements, at each of cp − 1 forward steps. Vocabulary-parallel
// cross-entropy does 3 all_reduces of one float32 per token (max, sum of exp, target logit).
#pragma once

#include "runtime/ledger.hpp"

#include <cstdint>

namespace shardcheck::budget {

struct Bytes {
  double per_rank = 0;   // sent by one rank (= received, for these ring factors)
  double aggregate = 0;  // over all n ranks: per_rank · n
};

// One collective over n ranks on a full buffer of S bytes.
// @throws UsageError for a collective without a ring factor (send, recv, ...) or n < 1.
Bytes collective_bytes(Collective op, int n, double S);

struct LayerTraffic {
  int all_reduces = 0;
  int all_gathers = 0;
  int reduce_scatters = 0;
  Bytes bytes;  // all of them
};

// A transformer layer's tensor-parallel collectives, forward + backward, on s·b·h activations
// of `element_bytes` each.
LayerTraffic tensor_parallel_layer_traffic(double s, double b, double h, int tp,
                                           bool sequence_parallel, double element_bytes);

// Ring attention over cp ranks: bytes one rank sends per step (its K and V chunk) and over the
// cp − 1 forward steps. g key/value heads of dimension d.
double cp_ring_step_bytes(double b, double s, int cp, double g, double d, double element_bytes);
double cp_ring_forward_bytes(double b, double s, int cp, double g, double d, double element_bytes);

// Vocabulary-parallel cross-entropy over tp ranks: 3 all_reduces of `tokens` float32 values.
Bytes vocab_cross_entropy_bytes(double tokens, int tp);

}  // namespace shardcheck::budget
