// A tracker of live activation bytes, per rank: what the library's ops allocate for their
// collectives and free before returning (the temporary peaks), and what a caller keeps for the
// backward. Compared, byte for byte, with the library's own model (budget/library_activations.hpp).
//
// What the ops note (the "collective buffers"; docs/budget.md lists every site):
//   - gather receive buffers and their reordered copies (all_gather of x or dy along tokens under
//     sequence parallelism, the [rows, cols] blocks of all_gather_last_axis, the all-gathered K/V
//     of all-gather context parallelism);
//   - full-size partials whose only use is to be reduce_scattered (the sequence-parallel dx of the
//     column-parallel backward, y of the row-parallel forward, the embedding's partial rows, the
//     all-gather CP backward's dK/dV and their per-rank reordering);
//   - the ring's K/V (and dK/dV) chunk buffers, held and received;
//   - packed all_reduce buffers that are not the op's result (the norm's [dgamma | dbeta], the
//     cross-entropy's sums, the head-parallel layer's gradient packs).
// Not noted: results returned to the caller (they are the caller's, and what it keeps is
// recorded with keep()), in-place all_reduces of a result, and the kernels' own working memory.
//
// Ranks are OpenMP threads: the active tracker is thread_local, so each rank installs its own
// (LiveBytesScope) and the ops' notes go to the tracker of the rank that runs them. With no
// tracker installed a note is one thread_local load and a branch.
#pragma once

#include <algorithm>
#include <cstdint>

namespace shardcheck::budget {

class LiveBytes {
 public:
  void on_alloc(std::uint64_t bytes) noexcept {
    live_ += bytes;
    peak_ = std::max(peak_, live_);
    ++allocations_;
  }
  void on_free(std::uint64_t bytes) noexcept { live_ -= bytes; }

  // What the caller keeps for the backward: the bytes of each buffer it will pass to it.
  void keep_bytes(std::uint64_t bytes) noexcept { kept_ += bytes; }
  template <class Buffer>  // Tensor<T>, std::vector<T>, std::span<T>: size() and data()
  void keep(const Buffer& b) noexcept {
    kept_ += static_cast<std::uint64_t>(b.size()) * sizeof(*b.data());
  }

  std::uint64_t live() const noexcept { return live_; }  // noted and not yet freed
  std::uint64_t peak() const noexcept { return peak_; }  // the most live at once
  std::uint64_t kept() const noexcept { return kept_; }
  std::uint64_t allocations() const noexcept { return allocations_; }

 private:
  std::uint64_t live_ = 0, peak_ = 0, kept_ = 0, allocations_ = 0;
};

namespace live_bytes_detail {
inline thread_local LiveBytes* current = nullptr;  // this rank's (thread's) active tracker
}  // namespace live_bytes_detail

inline LiveBytes* active_tracker() noexcept { return live_bytes_detail::current; }

inline void note_alloc(std::uint64_t bytes) noexcept {
  if (LiveBytes* t = live_bytes_detail::current) t->on_alloc(bytes);
}
inline void note_free(std::uint64_t bytes) noexcept {
  if (LiveBytes* t = live_bytes_detail::current) t->on_free(bytes);
}

// Installs `t` as this thread's (rank's) tracker for the scope's lifetime, then restores the
// previous one (scopes nest).
class LiveBytesScope {
 public:
  explicit LiveBytesScope(LiveBytes& t) noexcept : prev_(live_bytes_detail::current) {
    live_bytes_detail::current = &t;
  }
  ~LiveBytesScope() { live_bytes_detail::current = prev_; }
  LiveBytesScope(const LiveBytesScope&) = delete;
  LiveBytesScope& operator=(const LiveBytesScope&) = delete;
  LiveBytesScope(LiveBytesScope&&) = delete;
  LiveBytesScope& operator=(LiveBytesScope&&) = delete;

 private:
  LiveBytes* prev_;
};

// One buffer's bytes, noted while this object lives: construct it right after the buffer is
// allocated, declared after it (so it is destroyed first). Moving mirrors moving the buffer:
// `held = std::move(next_held)` beside `buf = std::move(next)` frees the old bytes and takes the
// new ones. The tracker is the one active at construction (notes never cross trackers).
class HeldBytes {
 public:
  HeldBytes() noexcept = default;
  explicit HeldBytes(std::uint64_t bytes) noexcept
      : tracker_(live_bytes_detail::current), bytes_(bytes) {
    if (tracker_ != nullptr) tracker_->on_alloc(bytes_);
  }
  template <class Buffer>
  static HeldBytes of(const Buffer& b) noexcept {
    return HeldBytes(static_cast<std::uint64_t>(b.size()) * sizeof(*b.data()));
  }
  HeldBytes(HeldBytes&& o) noexcept : tracker_(o.tracker_), bytes_(o.bytes_) {
    o.tracker_ = nullptr;
    o.bytes_ = 0;
  }
  HeldBytes& operator=(HeldBytes&& o) noexcept {
    if (this != &o) {
      release();
      tracker_ = o.tracker_;
      bytes_ = o.bytes_;
      o.tracker_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  HeldBytes(const HeldBytes&) = delete;
  HeldBytes& operator=(const HeldBytes&) = delete;
  ~HeldBytes() { release(); }

  void release() noexcept {
    if (tracker_ != nullptr) tracker_->on_free(bytes_);
    tracker_ = nullptr;
    bytes_ = 0;
  }
  std::uint64_t bytes() const noexcept { return bytes_; }

 private:
  LiveBytes* tracker_ = nullptr;
  std::uint64_t bytes_ = 0;
};

}  // namespace shardcheck::budget
