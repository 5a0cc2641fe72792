// What the members of one group share in the OpenMP-thread backend: a barrier, the calls and
// buffer slots through which ranks publish what they called (compared by the shared layer,
// call_desc.hpp) and where their buffers are, and the point-to-point channels.
#pragma once

#include "runtime/call_desc.hpp"
#include "runtime/dtype.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardcheck::omp {

// Where one rank's buffers are for the current step, published with its call. Cache-line
// aligned: each rank writes its own slot at every step while the others read theirs.
struct alignas(64) Slot {
  const void* send = nullptr;
  void* recv = nullptr;
};

// One direction of a point-to-point link (src -> dst). The sender publishes and bumps
// `posted`; the receiver claims the message, copies (or records a mismatch) and bumps `consumed`.
struct Channel {
  alignas(64) std::atomic<std::uint64_t> posted{0};
  alignas(64) std::atomic<std::uint64_t> consumed{0};
  const void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::float32;
  int tag = 0;
  std::string error;  // set by the receiver on a mismatch, read by the sender
  // Who owns the posted message: 0 open, 1 claimed by the receiver (it reads `data`), 2
  // retracted by a sender that gave up waiting (the receiver must not read `data`).
  static constexpr int open = 0, claimed = 1, retracted = 2;
  std::atomic<int> claim{open};
};

struct GroupState {
  explicit GroupState(const std::vector<int>& world_members)
      : members(std::make_shared<const std::vector<int>>(world_members)),
        size(static_cast<int>(world_members.size())),
        channels(world_members.size() * world_members.size()) {
    for (auto& c : calls) c.resize(world_members.size());
    for (auto& s : slots) s.resize(world_members.size());
  }

  std::shared_ptr<const std::vector<int>> members;  // world ranks, group order
  const int size;

  // Central counting barrier in one word: generation << 32 | abandoned << 31 | arrived. The
  // last arrival turns (g, size - 1) into (g + 1, 0) with one CAS. A rank that gives up waiting
  // (timeout, a failed peer) sets `abandoned` with a CAS that fails if the generation moved on,
  // so "completed" and "abandoned" exclude each other: a late rank never enters a collective
  // whose peers have unwound, and a rank never unwinds from a collective that completed while
  // peers may still read its buffers.
  static constexpr std::uint64_t barrier_gen_shift = 32;
  static constexpr std::uint64_t barrier_abandoned = std::uint64_t{1} << 31;
  static constexpr std::uint64_t barrier_count_mask = barrier_abandoned - 1;
  alignas(64) std::atomic<std::uint64_t> barrier{0};

  // calls[step % 2][group rank] and slots[step % 2][group rank]: what each rank called and
  // where its buffers are. Two sets, so a fast rank publishing step k+1 never overwrites what
  // a slow rank still reads for step k (it cannot reach step k+2 before the slow rank has
  // arrived at step k+1). The calls are contiguous: the shared layer reads them as a span.
  std::vector<CallDesc> calls[2];
  std::vector<Slot> slots[2];

  std::vector<Channel> channels;  // [src * size + dst]
  Channel& channel(int src, int dst) {
    return channels[static_cast<std::size_t>(src) * static_cast<std::size_t>(size) +
                    static_cast<std::size_t>(dst)];
  }
};

}  // namespace shardcheck::omp
