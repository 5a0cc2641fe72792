// A rank's workspace: it hands out the collective buffers an op needs and counts their live
// bytes itself, so that op code asks it for buffers and never counts bytes.
//
// The collective buffers (docs/budget.md lists every site): gather receive buffers and their
// reordered copies; full-size partials whose only use is to be reduce_scattered; the ring's K/V
// (and dK/dV) chunk buffers, held and received; packed all_reduce buffers that are not the op's
// result. An op takes one with `buffer<T>(n)` (a new std::vector<T> of n elements) or gives the
// workspace one it made with `hold(b)` (the result of a gather, a partial about to be
// reduce_scattered); either way it gets a Held<Buffer>, which owns the buffer and keeps its
// bytes counted while it lives. Results returned to the caller, in-place all_reduces of a result
// and the kernels' working memory are not the workspace's.
//
// Ranks are OpenMP threads: a rank's workspace counts into the LiveByteCount its thread
// installed (Workspace::CountingScope; budget/live_bytes.hpp names them LiveBytes and
// LiveBytesScope and compares the count with the library's model). With none installed a
// buffer costs one thread_local load and a branch more than the bare std::vector.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace shardcheck {

// Live bytes of one rank: what its ops' workspaces hold now, the most held at once, how many
// buffers they took, and what the caller keeps for the backward (keep()).
class LiveByteCount {
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

  std::uint64_t live() const noexcept { return live_; }  // held and not yet freed
  std::uint64_t peak() const noexcept { return peak_; }  // the most live at once
  std::uint64_t kept() const noexcept { return kept_; }
  std::uint64_t allocations() const noexcept { return allocations_; }

 private:
  std::uint64_t live_ = 0, peak_ = 0, kept_ = 0, allocations_ = 0;
};

namespace workspace_detail {
inline thread_local LiveByteCount* current = nullptr;  // this rank's (thread's) count
}  // namespace workspace_detail

// Bytes counted while this object lives, in the count active at construction (counts never
// cross ranks). Moving it moves the bytes: `a = std::move(b)` frees a's and takes b's.
class CountedBytes {
 public:
  CountedBytes() noexcept = default;
  explicit CountedBytes(std::uint64_t bytes) noexcept
      : CountedBytes(workspace_detail::current, bytes) {}
  CountedBytes(LiveByteCount* count, std::uint64_t bytes) noexcept : count_(count), bytes_(bytes) {
    if (count_ != nullptr) count_->on_alloc(bytes_);
  }
  template <class Buffer>
  static CountedBytes of(LiveByteCount* count, const Buffer& b) noexcept {
    return CountedBytes(count, static_cast<std::uint64_t>(b.size()) * sizeof(*b.data()));
  }
  CountedBytes(CountedBytes&& o) noexcept
      : count_(std::exchange(o.count_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  CountedBytes& operator=(CountedBytes&& o) noexcept {
    if (this != &o) {
      release();
      count_ = std::exchange(o.count_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  CountedBytes(const CountedBytes&) = delete;
  CountedBytes& operator=(const CountedBytes&) = delete;
  ~CountedBytes() { release(); }

  void release() noexcept {
    if (count_ != nullptr) count_->on_free(bytes_);
    count_ = nullptr;
    bytes_ = 0;
  }
  std::uint64_t bytes() const noexcept { return bytes_; }

 private:
  LiveByteCount* count_ = nullptr;
  std::uint64_t bytes_ = 0;
};

// A collective buffer from the workspace: the buffer and its counted bytes, freed together.
// Moving it moves both (the ring's `kv = std::move(next)` frees the old chunk's bytes and takes
// the received one's).
template <class Buffer>
class Held {
 public:
  Held() = default;
  Buffer& operator*() noexcept { return buf_; }
  const Buffer& operator*() const noexcept { return buf_; }
  Buffer* operator->() noexcept { return &buf_; }
  const Buffer* operator->() const noexcept { return &buf_; }

 private:
  friend class Workspace;
  Held(Buffer b, LiveByteCount* count)
      : buf_(std::move(b)), bytes_(CountedBytes::of(count, buf_)) {}
  Buffer buf_;
  CountedBytes bytes_;  // after buf_: uncounted before the buffer is freed
};

class Workspace {
 public:
  // The workspace of the rank (thread) that calls it: it counts into the rank's count.
  static Workspace of_this_rank() noexcept { return Workspace(workspace_detail::current); }

  // A new buffer of n value-initialized elements.
  template <class T>
  Held<std::vector<T>> buffer(std::size_t n) const {
    return Held<std::vector<T>>(std::vector<T>(n), count_);
  }
  // The bytes of a tensor a caller keeps from its forward for its backward, counted as live
  // while the returned object lives (a multi-op step that holds its saved activations counts
  // them this way, beside its ops' collective buffers: ops/model/model_step.hpp).
  template <class Buffer>
  CountedBytes keep(const Buffer& b) const {
    return CountedBytes::of(count_, b);
  }
  // A buffer the op made (a gather's result, a partial to reduce_scatter), held from now on.
  template <class Buffer>
  Held<Buffer> hold(Buffer b) const {
    return Held<Buffer>(std::move(b), count_);
  }

  // Installs `count` as this rank's (thread's) count for the scope's lifetime, then restores
  // the previous one (scopes nest).
  class CountingScope {
   public:
    explicit CountingScope(LiveByteCount& count) noexcept : prev_(workspace_detail::current) {
      workspace_detail::current = &count;
    }
    ~CountingScope() { workspace_detail::current = prev_; }
    CountingScope(const CountingScope&) = delete;
    CountingScope& operator=(const CountingScope&) = delete;
    CountingScope(CountingScope&&) = delete;
    CountingScope& operator=(CountingScope&&) = delete;

   private:
    LiveByteCount* prev_;
  };

 private:
  explicit Workspace(LiveByteCount* count) noexcept : count_(count) {}
  LiveByteCount* count_;  // nullptr: nothing is counted
};

}  // namespace shardcheck
