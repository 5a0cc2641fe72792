// Collective traffic: the bytes a collective moves per rank with the ring algorithms (nccl-tests
// PERFORMANCE.md bus-bandwidth factors, the same the runtime's ledger records when the buffer
// splits evenly), the aggregate network bytes (per rank x ranks), and per-layer counts. The
// factors and the exact per-rank formulas are the runtime's, runtime/wire_bytes.hpp (all_reduce
// 2(n-1)/n · S per rank; all_gather, reduce_scatter, all_to_all (n-1)/n · S; broadcast, reduce
// S); this file only applies them to the layers and ops.
//
// Per transformer layer, forward + backward (Shoeybi et al. 2019, Megatron-LM; Korthikanti et
// al. 2022 §4.2.2): tensor parallelism alone does 4 all_reduces of the s·b·h activations (2
// forward, 2 backward); with sequence parallelism 4 all_gathers and 4 reduce_scatters of the
// same tensors, the same bytes. Context-parallel ring attention sends each rank's K and V
// chunk, 2·b·(s/cp)·g·d elements, at each of cp − 1 forward steps. Vocabulary-parallel
// cross-entropy does 3 all_reduces of one float32 per token (max, sum of exp, target logit).
//
// Per op and per rank, exactly (the second half of this header): the ordered list of ledger
// entries (collective, bytes sent, bytes received) each op of lib/ops records on one rank, as a
// function of its configuration, shapes, splits (uneven and empty pieces included), element
// type and group size. The calls are the op's spec's (lib/ops/<family>/<family>_spec.hpp, the one
// place each op's collectives are declared; the suites' traffic property reads the same list),
// and each call's bytes the ledger's exact formulas, wire::all_reduce, wire::all_gather,
// wire::reduce_scatter and wire::ring_shift of runtime/wire_bytes.hpp. The budget suite
// (properties/budget/) runs every op and finds exactly these entries in every rank's ledger.
#pragma once

#include "layout/split_policy.hpp"
#include "ops/attention/attention_spec.hpp"
#include "runtime/dtype.hpp"
#include "runtime/ledger.hpp"

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace shardcheck {
struct ColumnParallelConfig;
struct RowParallelConfig;
struct SequenceParallelNormConfig;
struct VocabEmbeddingConfig;
struct VocabCrossEntropyConfig;
struct AttentionConfig;
struct ContextParallelConfig;
struct HeadParallelConfig;
struct MlpConfig;
}  // namespace shardcheck

namespace shardcheck::budget {

struct Bytes {
  double per_rank = 0;   // sent by one rank (= received, for these ring factors)
  double aggregate = 0;  // over all n ranks: per_rank · n
};

// One collective over n ranks on a full buffer of S bytes: wire::bus_bytes per rank.
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

// ================================================================ per op, per rank, exact

// Bytes of one element of T and of its accumulator acc_t<T> (runtime/dtype.hpp): float64 8/8,
// float32 4/4, bfloat16 and float16 2/4.
struct ElementBytes {
  std::uint64_t value = 4;
  std::uint64_t acc = 4;
  friend bool operator==(const ElementBytes&, const ElementBytes&) = default;
};
// @throws UsageError for an integer type.
ElementBytes element_bytes(DType t);

// One ledger entry as this calculator predicts it.
struct LedgerCall {
  Collective op = Collective::barrier;
  std::uint64_t sent = 0;
  std::uint64_t recv = 0;
  friend bool operator==(const LedgerCall&, const LedgerCall&) = default;
  std::string to_string() const;  // "all_gather sent 96 recv 80"
};

struct OpTraffic {
  std::vector<LedgerCall> forward, backward;
};

// The runtime's exact per-rank bytes for one call (wire_bytes.hpp); counts in elements. r is
// taken mod p; ring_shift_call is the shift by one the ops use.
LedgerCall all_reduce_call(std::uint64_t elements, std::uint64_t element_bytes, int p, int r,
                           Algorithm algo = Algorithm::ring);
LedgerCall all_gather_call(std::span<const std::size_t> counts, std::uint64_t element_bytes, int r);
LedgerCall reduce_scatter_call(std::span<const std::size_t> counts, std::uint64_t element_bytes,
                               int r, Algorithm algo = Algorithm::ring);
LedgerCall ring_shift_call(std::uint64_t send_elements, std::uint64_t recv_elements,
                           std::uint64_t element_bytes, int p);

// Calls, bytes sent and received per collective, as Ledger::calls/bytes_sent/bytes_recv(op).
struct CollectiveTotals {
  std::size_t calls = 0;
  std::uint64_t sent = 0, recv = 0;
  friend bool operator==(const CollectiveTotals&, const CollectiveTotals&) = default;
};
std::map<Collective, CollectiveTotals> totals(const std::vector<LedgerCall>& calls);
std::map<Collective, CollectiveTotals> totals(const Ledger& ledger);

// The ops of lib/ops on rank r of a group of p (their configurations as the ops take them; the
// global shapes the op's comments name). Every rank of the group must pass the same values.
// column_parallel_linear: x [tokens, in] (its token shard with sequence_parallel_input), W [out,
// in].
OpTraffic column_parallel_traffic(const ColumnParallelConfig& cfg, std::size_t tokens,
                                  std::size_t in, std::size_t out, int p, int r, ElementBytes e);
// row_parallel_linear: x [tokens, in] (its in_split columns with input_is_parallel), W [out, in].
OpTraffic row_parallel_traffic(const RowParallelConfig& cfg, std::size_t tokens, std::size_t in,
                               std::size_t out, int p, int r, ElementBytes e);
// sequence_parallel_norm over cfg.tokens tokens of `hidden` features.
OpTraffic sp_norm_traffic(const SequenceParallelNormConfig& cfg, std::size_t hidden, int p, int r,
                          ElementBytes e);
// Megatron's sequence-parallel block (properties/suites/norm/norm_impl.hpp): SP norm,
// column-parallel [ffn, hidden] with sequence-parallel input, row-parallel [hidden, ffn] with
// sequence-parallel output, no biases, every collective with norm.reduce_algorithm. Forward: norm,
// column, row; backward: row, column, norm.
OpTraffic sp_block_traffic(const SequenceParallelNormConfig& norm, std::size_t hidden,
                           std::size_t ffn, const SplitPolicy& ffn_split, int p, int r,
                           ElementBytes e);
// vocab_parallel_embedding: `tokens` ids, table [V, hidden].
OpTraffic vocab_embedding_traffic(const VocabEmbeddingConfig& cfg, std::size_t tokens,
                                  std::size_t hidden, int p, int r, ElementBytes e);
// vocab_parallel_cross_entropy over `tokens` tokens: all_reduce(max) of tokens and
// all_reduce(sum) of 2·tokens (3·tokens with label smoothing) accumulators.
OpTraffic vocab_cross_entropy_traffic(const VocabCrossEntropyConfig& cfg, std::size_t tokens, int p,
                                      int r, ElementBytes e);
// context_parallel_attention with cfg's (local) q_heads, kv_heads, head_dim and `batch`
// sequences. Ring: step s sends the chunk of rank (r − s) mod p and receives the next one's,
// 2·batch·L_j·g·d elements (uneven L_j by the layout), cp − 1 times forward; backward the same
// K/V shifts and cp shifts of dK/dV in acc_t<T>. All-gather: 2 all_gathers of T forward; 2
// all_gathers of T and 2 reduce_scatters (ring) of acc_t<T> backward.
OpTraffic cp_attention_traffic(const AttentionConfig& cfg, const ContextParallelConfig& cc,
                               std::size_t batch, int p, int r, ElementBytes e);
// attention_layer on tp rank tp_rank of tp and cp rank cp_rank of cp (cp = 1 without
// cfg.context_parallel). Forward: the CP core (on a rank with query heads), all_reduce of y over
// tp. Backward: the CP core, all_reduce of dx over tp, the kv group's all_reduce of dWk, dbk,
// dWv, dbv (g < tp), the cp group's all_reduce of every parameter gradient but dbo, packed,
// then with biases its all_reduce of dbo alone (cp > 1).
OpTraffic head_layer_traffic(const HeadParallelConfig& cfg, std::size_t batch, int tp, int tp_rank,
                             int cp, int cp_rank, ElementBytes e);

// parallel_mlp (ops/mlp/mlp.hpp, Megatron's ParallelMLP): x [tokens, hidden], F =
// cfg.ffn_features. Forward: fc1's calls (all_gather of x with sequence_parallel), then fc2's
// (reduce_scatter of y with sequence_parallel, else all_reduce of y). Backward: fc2's
// (all_gather of dy with sequence_parallel), then fc1's (all_gather of x again and reduce_scatter
// of dx with sequence_parallel, else all_reduce of dx). The activation moves nothing.
OpTraffic parallel_mlp_traffic(const MlpConfig& cfg, std::size_t tokens, std::size_t hidden,
                               bool has_bias, int p, int r, ElementBytes e);

// The lengths L_j of the cp ranks' pieces of the sequence (ops/attention/attention_spec.hpp).
using shardcheck::cp_lengths;

}  // namespace shardcheck::budget
