// The fuzz harness's little language: a program of collective calls over groups of ranks,
// decoded from libFuzzer's bytes, and what each rank does when it runs it.
//
// Why a decoder of our own instead of FuzzedDataProvider: every structural choice is one byte
// read from the front (byte % n), so a mutation of one byte changes one decision, the seed
// corpus can be written by recording the bytes a generator feeds the decoder, and values are
// raw bit patterns (FuzzedDataProvider::ConsumeFloatingPoint never yields NaN, Inf or
// subnormals; docs/building.md). Missing bytes read as 0, so every byte string is a valid program.
//
// Layout (each item one byte unless said otherwise):
//   P-1 (mod 8) | extra groups (mod 4) | per group: parent, whole?, size, members (picks) |
//   calls-1 (mod 8) | per call: group, kind, dtype, value mode, kind-specific fields |
//   deviation, its call, its rank, aux, aux2 | element values (raw bits or one-byte codes)
// Bounds keep one input cheap: P <= 8, <= 4 groups, <= 8 calls, <= 64 elements per buffer.
#pragma once

#include "runtime/dtype.hpp"
#include "runtime/ledger.hpp"
#include "runtime/reduce_op.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardcheck::fuzz {

inline constexpr int max_world = 8;
inline constexpr int max_extra_groups = 3;
inline constexpr int max_calls = 8;
inline constexpr std::size_t max_elements = 64;

// What a program step calls. send_recv is one point-to-point message: `src` sends, `dst`
// receives; the other members of the group do nothing for it.
enum class Kind : std::uint8_t {
  barrier,
  broadcast,
  reduce,
  all_reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  gather,
  scatter,
  ring_shift,
  send_recv,
};
inline constexpr int kind_count = 11;
// What a rank's ledger records for a call of kind k: the collective of the same name, and for
// send_recv a send on the sender (`sender`) and a recv on the receiver.
Collective collective_of(Kind k, bool sender = false) noexcept;
// The kind's name: its collective's (ledger.hpp), "send_recv" for the message.
std::string_view name(Kind k) noexcept;

// How a call's element values come from the bytes. raw: the element's own bit pattern
// (NaN payloads, Inf, subnormals, -0); small: integers in [-4, 4] (sums stay exact, so the
// reduction order is visible only through avg and overflow-free paths); special: a table of
// edge values per type (zeros, extremes, NaN, Inf, smallest subnormal, ...); mixed: one byte
// per element picks one of the other three.
enum class Values : std::uint8_t { raw, small, special, mixed };

// An ordered subset of a parent group, created with parent.group(ranks_in_parent).
struct Group {
  int parent = -1;                   // index of the parent group; -1 for the world (group 0)
  std::vector<int> ranks_in_parent;  // the argument of Communicator::group
  std::vector<int> members;          // world ranks, in group order
};

// The group rank of world rank w in g, or -1 when w is not a member.
inline int rank_in(const Group& g, int w) {
  const auto it = std::find(g.members.begin(), g.members.end(), w);
  return it == g.members.end() ? -1 : static_cast<int>(it - g.members.begin());
}

// a mod p in [0, p), also for negative a (ring steps).
inline int mod(int a, int p) { return ((a % p) + p) % p; }

// One call as one rank issues it. Fields a kind does not use keep their defaults.
// Counts are per group rank; matrix[s][d] is what group rank s sends to group rank d.
struct Call {
  Kind kind = Kind::barrier;
  int group = 0;
  DType dtype = DType::float32;
  Values values = Values::raw;
  ReduceOp op = ReduceOp::sum;
  Algorithm algo = Algorithm::ring;
  bool in_place = false;
  int root = 0;
  std::size_t count = 0;                         // broadcast, reduce, all_reduce, send_recv
  std::vector<std::size_t> counts;               // all_gather, reduce_scatter, gather, scatter;
                                                 // ring_shift: each rank's send count
  std::vector<std::vector<std::size_t>> matrix;  // all_to_all
  int shift = 0;                                 // ring_shift
  int src = 0, dst = 0, tag = 0;                 // send_recv (group ranks)
};

// A program is matched (deviation::none) or carries exactly one deviation, so the error it
// must raise can be predicted (outcome.hpp).
enum class Deviation : std::uint8_t {
  none,
  kind,          // one rank calls another collective               -> CollectiveMismatch
  count,         // one rank passes other counts (or shift)         -> CollectiveMismatch
  root,          // one rank names another root                     -> CollectiveMismatch
  dtype,         // one rank uses another element type              -> CollectiveMismatch
  reduce_op,     // one rank uses another reduce op                 -> CollectiveMismatch
  algorithm,     // one rank uses the other all_reduce algorithm    -> CollectiveMismatch
  tag,           // the receiver expects another tag                -> CollectiveMismatch
  early_return,  // one rank returns before the call                -> DeadlockError (or none)
  throws,        // one rank throws before the call                 -> that exception
  usage_local,   // one rank's buffers contradict its own counts    -> UsageError
  usage_all,     // every member passes an invalid root/op/counts   -> UsageError
  wrong_group,   // one rank makes the call on another of its groups-> mismatch or deadlock
  usage_group,   // one rank passes group() a list naming a rank twice -> UsageError
};
inline constexpr int deviation_count = 14;
std::string_view name(Deviation d) noexcept;

// A buffer-size fault of usage_local, applied by the executor to one rank's buffers.
enum class Fault : std::uint8_t {
  none,
  longer_send,  // send has one element more than the counts say
  longer_recv,  // recv has one element more than the counts say
  bad_peer,     // send_recv: the sender names a destination outside the group
};

// One rank's step of the program: the call as this rank issues it.
struct Action {
  int call = 0;  // index in Program::calls
  Call spec;     // equals Program::calls[call] unless this rank deviates
  Fault fault = Fault::none;
  bool stop = false;   // return from the rank function instead (early_return)
  bool raise = false;  // throw InjectedFault instead (throws)
};

struct Program {
  int world = 1;
  std::vector<Group> groups;  // groups[0] is the world
  std::vector<Call> calls;    // as the matched program calls them
  Deviation deviation = Deviation::none;
  int deviant_call = 0;
  int deviant = -1;            // world rank of the deviating rank (-1: every member, usage_all)
  int bad_group = -1;          // usage_group: the group the deviant creates with a bad list
  std::string deviation_text;  // what the deviant does, for messages

  // What world rank w executes, in order: every call whose group holds w (send_recv: only
  // its two ends), with the deviation applied.
  std::vector<std::vector<Action>> actions;

  // The element values, drawn after the structure: per call, per group rank, its input.
  // Bytes per element as the call's dtype; what a rank sends (or, for broadcast, its buffer
  // before the call). Deviant buffers that differ in size are filled by the executor.
  std::vector<std::vector<std::vector<std::byte>>> inputs;
};

// The thrown-by-the-program exception of Deviation::throws.
struct InjectedFault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Decodes any byte string into a valid program (missing bytes read as 0).
Program decode(std::span<const std::uint8_t> bytes);

// A readable listing of the program, for failure messages.
std::string describe(const Program& p);
std::string describe(const Call& c, const Group& g);

// Elements of the send (or broadcast) buffer of group rank r of p for this call, as issued.
std::size_t send_count(const Call& c, int r, int p);
// Elements of the receive buffer of group rank r (0 where the call has none on this rank).
std::size_t recv_count(const Call& c, int r, int p);

}  // namespace shardcheck::fuzz
