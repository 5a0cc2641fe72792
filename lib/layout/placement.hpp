// Placements: how a global tensor is laid out over the ranks of one mesh dimension (DTensor's
// vocabulary). A placement is a small value type with ==, printing and free functions.
//
//   Shard(d)     each rank holds a contiguous piece along dimension d, cut by a SplitPolicy
//                (torch.chunk by default, as DTensor's Shard); printed "S(d)"
//   Replicate    every rank holds the whole tensor, bit-identical; printed "R"
//   Partial(op)  every rank holds a full-shape tensor; the global tensor is their reduction by
//                op (sum, avg, max, min); printed "P(sum)"
//
// Identical local shapes do not determine semantics: a [4, 8] piece may be a Shard(0) quarter
// of a [16, 8] tensor or a Partial(sum) term of a [4, 8] one. The placement says which.
#pragma once

#include "layout/split_policy.hpp"
#include "runtime/reduce_op.hpp"

#include <cstddef>
#include <string>

namespace shardcheck {

class Placement {
 public:
  enum class Kind : std::uint8_t { shard, replicate, partial };

  static Placement shard(std::size_t dim, SplitPolicy policy = SplitPolicy::chunk()) {
    return Placement(Kind::shard, dim, std::move(policy), ReduceOp::sum);
  }
  static Placement replicate() {
    return Placement(Kind::replicate, 0, SplitPolicy::chunk(), ReduceOp::sum);
  }
  static Placement partial(ReduceOp op = ReduceOp::sum) {
    return Placement(Kind::partial, 0, SplitPolicy::chunk(), op);
  }

  Kind kind() const noexcept { return kind_; }
  bool is_shard() const noexcept { return kind_ == Kind::shard; }
  bool is_replicate() const noexcept { return kind_ == Kind::replicate; }
  bool is_partial() const noexcept { return kind_ == Kind::partial; }
  std::size_t dim() const noexcept { return dim_; }               // shard only
  const SplitPolicy& policy() const noexcept { return policy_; }  // shard only
  ReduceOp reduce_op() const noexcept { return op_; }             // partial only

  // "S(0)", "S(1)[balanced]", "R", "P(sum)". The split policy is printed only when it is not
  // the default torch.chunk.
  std::string to_string() const {
    switch (kind_) {
      case Kind::shard: {
        std::string s = "S(" + std::to_string(dim_) + ")";
        if (!(policy_ == SplitPolicy::chunk())) s += "[" + policy_.to_string() + "]";
        return s;
      }
      case Kind::replicate: return "R";
      case Kind::partial: return "P(" + std::string(name(op_)) + ")";
    }
    return "?";
  }

  friend bool operator==(const Placement& a, const Placement& b) {
    if (a.kind_ != b.kind_) return false;
    switch (a.kind_) {
      case Kind::shard: return a.dim_ == b.dim_ && a.policy_ == b.policy_;
      case Kind::replicate: return true;
      case Kind::partial: return a.op_ == b.op_;
    }
    return false;
  }

 private:
  Placement(Kind k, std::size_t dim, SplitPolicy policy, ReduceOp op)
      : kind_(k), dim_(dim), policy_(std::move(policy)), op_(op) {}
  Kind kind_;
  std::size_t dim_;
  SplitPolicy policy_;
  ReduceOp op_;
};

}  // namespace shardcheck
