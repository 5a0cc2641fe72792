// redistribute: turn a rank's piece under placements `from` into its piece under `to`, on an
// n-D device mesh (PyTorch DTensor's redistribute). The planner declares its plan (steps,
// collectives, bytes this rank sends and receives) before anything runs, so a check can hold
// the ledger to it.
//
// Per mesh dimension, the transitions and their collectives (along that dimension's group):
//   S(d) -> R        all_gather (uneven pieces go through exactly: no padding)
//   P(op) -> R       all_reduce(op)
//   P(op) -> S(d)    reduce_scatter(op) with the target split's counts
//   R -> S(d)        local slice, no communication
//   S(a) -> S(b)     all_to_all when that dimension is the only one changing and no other mesh
//                    dimension shards a or b; otherwise all_gather, then a local slice
//   R -> P(sum)      the rank at coordinate 0 keeps the value, every other rank holds zeros
//                    (exact; "every rank holds value/P" would round). R -> P(avg|max|min):
//                    every rank keeps the value (their reduction is the value itself).
//   P(a) -> P(b)     an error unless a == b (no conversion between reductions is exact)
//   S(d) -> P(op)    an error (a shard is not a term of a reduction)
// Order, for nested shards: let k be the first mesh dimension whose placement changes. Every
// Shard at mesh dimensions >= k is gathered first, from the last mesh dimension to k (the
// innermost cut is undone first), then the dimensions >= k are rebuilt from k to the last, so
// each new cut splits the piece the earlier dimensions left, as local_piece() defines.
// Mesh dimensions of size 1 need no communication and get no step.
#pragma once

#include "layout/device_mesh.hpp"
#include "layout/placement.hpp"
#include "layout/sharding.hpp"
#include "runtime/communicator.hpp"
#include "runtime/dtype.hpp"
#include "runtime/errors.hpp"
#include "tensor/tensor.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace shardcheck {

struct RedistributeStep {
  enum class Kind : std::uint8_t {
    all_gather,
    all_reduce,
    reduce_scatter,
    all_to_all,
    local_slice,
    keep_on_first,  // R -> P(sum): coordinate 0 keeps the value, the others zero
  };
  Kind kind = Kind::local_slice;
  std::size_t mesh_dim = 0;
  Placement from = Placement::replicate();  // this mesh dimension's placement before the step
  Placement to = Placement::replicate();    // and after it
  Shape before;                             // this rank's local shape before the step
  Shape after;                              // and after it
  // all_gather, reduce_scatter: the elements of every member's piece, in group order (the
  // counts the collective is called with).
  std::vector<std::size_t> counts;
  std::uint64_t sent_bytes = 0;  // as the ledger records them for this rank
  std::uint64_t received_bytes = 0;

  bool is_collective() const { return kind != Kind::local_slice && kind != Kind::keep_on_first; }
  // "tp: S(0) -> R all_gather [2, 8] -> [5, 8], sent 48 B, received 72 B"
  std::string to_string(const DeviceMesh& mesh) const;
};

std::string_view name(RedistributeStep::Kind k);

struct RedistributePlan {
  std::vector<RedistributeStep> steps;
  std::uint64_t sent_bytes() const;
  std::uint64_t received_bytes() const;
  std::string to_string(const DeviceMesh& mesh) const;  // one step per line
};

// The plan of the rank at mesh coordinates `coords`.
// @throws UsageError for an impossible transition (S -> P, P(a) -> P(b)), a placement count
//         that is not mesh.ndim(), or a Shard of a dimension the tensor lacks; the message
//         names the layouts, the mesh dimension and what to do instead.
RedistributePlan plan_redistribute(const Shape& global, DType dtype, const DeviceMesh& mesh,
                                   const std::vector<Placement>& from,
                                   const std::vector<Placement>& to,
                                   const std::vector<int>& coords);

namespace detail {

// Copies the block of shape `block` at `src_off` in a row-major tensor of shape `src_shape`
// to `dst_off` in one of shape `dst_shape`.
template <class T>
void copy_block(const T* src, const Shape& src_shape, const Shape& src_off, T* dst,
                const Shape& dst_shape, const Shape& dst_off, const Shape& block) {
  const std::size_t nd = block.size();
  const std::size_t n = numel(block);
  if (n == 0) return;
  if (nd == 0) {
    *dst = *src;
    return;
  }
  const std::size_t row = block[nd - 1];
  Shape idx(nd, 0);
  for (std::size_t k = 0; k < n; k += row) {
    std::size_t rest = k;
    for (std::size_t d = nd; d-- > 0;) {
      idx[d] = rest % block[d];
      rest /= block[d];
    }
    std::size_t s = 0;
    std::size_t t = 0;
    for (std::size_t d = 0; d < nd; ++d) {
      s = s * src_shape[d] + src_off[d] + idx[d];
      t = t * dst_shape[d] + dst_off[d] + idx[d];
    }
    std::copy(src + s, src + s + row, dst + t);
  }
}

// Calls slice(j, offset, block) for each slice j < shape[d] along dimension d: `offset` is where
// the slice starts in the tensor (0 but j along d), `block` its shape (`shape` with 1 along d).
// In the d-major buffer slice j is contiguous: a row-major `block` at j * numel(block).
template <class Slice>
void for_each_slice_along(const Shape& shape, std::size_t d, const Slice& slice) {
  Shape block = shape;
  block[d] = 1;
  for (std::size_t j = 0; j < shape[d]; ++j) {
    Shape offset(shape.size(), 0);
    offset[d] = j;
    slice(j, offset, block);
  }
}

// Moves tensor dimension d of `x` to the front (so pieces along d are contiguous), and back.
template <class T>
std::vector<T> to_d_major(const Tensor<T>& x, std::size_t d) {
  const Shape& s = x.shape();
  std::vector<T> out(x.size());
  if (out.empty()) return out;
  for_each_slice_along(s, d, [&](std::size_t j, const Shape& offset, const Shape& block) {
    copy_block(x.data(), s, offset, out.data() + j * numel(block), block, Shape(s.size(), 0),
               block);
  });
  return out;
}

template <class T>
Tensor<T> from_d_major(std::span<const T> buf, const Shape& shape, std::size_t d) {
  Tensor<T> out(shape);
  if (out.empty()) return out;
  for_each_slice_along(shape, d, [&](std::size_t j, const Shape& offset, const Shape& block) {
    copy_block(buf.data() + j * numel(block), block, Shape(shape.size(), 0), out.data(), shape,
               offset, block);
  });
  return out;
}

inline ReduceOp partial_op(const Placement& p) { return p.reduce_op(); }

// The product of every dimension but d.
inline std::size_t numel_except(const Shape& s, std::size_t d) {
  std::size_t n = 1;
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (k != d) n *= s[k];
  }
  return n;
}

}  // namespace detail

// One step of a plan on this rank: `g` is the rank's group along step.mesh_dim, `x` its piece
// before the step (shape step.before); returns its piece after (shape step.after).
// @throws UsageError naming the rank, the step and both shapes when x is not step.before (a
// piece of another shape would be read out of bounds; found by a redistribute mutant that
// slices the wrong piece, which crashed the next step).
template <Element T>
Tensor<T> execute_step(Communicator& g, const RedistributeStep& step, Tensor<T> x) {
  using Kind = RedistributeStep::Kind;
  const int p = g.size();
  if (x.shape() != step.before) {
    throw UsageError("execute_step on rank " + std::to_string(g.rank()) + " of " +
                     std::to_string(p) + " (" + std::string(name(step.kind)) + " along mesh dim " +
                     std::to_string(step.mesh_dim) + "): the piece is " + format_shape(x.shape()) +
                     " but the step takes " + format_shape(step.before) +
                     "; pass the piece the plan's previous step returned (step.before)");
  }
  switch (step.kind) {
    case Kind::all_gather: {
      const std::size_t d = step.from.dim();
      const auto send = detail::to_d_major(x, d);
      std::vector<T> recv(numel(step.after));
      g.all_gather(std::span<const T>(send), std::span<T>(recv), step.counts);
      return detail::from_d_major(std::span<const T>(recv), step.after, d);
    }
    case Kind::all_reduce: {
      g.all_reduce(x.span(), detail::partial_op(step.from));
      return x;
    }
    case Kind::reduce_scatter: {
      const std::size_t d = step.to.dim();
      const auto send = detail::to_d_major(x, d);
      std::vector<T> recv(numel(step.after));
      g.reduce_scatter(std::span<const T>(send), std::span<T>(recv), step.counts,
                       detail::partial_op(step.from));
      return detail::from_d_major(std::span<const T>(recv), step.after, d);
    }
    case Kind::local_slice: {
      const std::size_t d = step.to.dim();
      const auto cuts = split(step.to.policy(), step.before[d], p);
      Shape off(step.before.size(), 0);
      off[d] = cuts[static_cast<std::size_t>(g.rank())].offset;
      Tensor<T> y(step.after);
      detail::copy_block(x.data(), step.before, off, y.data(), step.after,
                         Shape(step.after.size(), 0), step.after);
      return y;
    }
    case Kind::keep_on_first: {
      if (g.rank() != 0) x = Tensor<T>(x.shape());
      return x;
    }
    case Kind::all_to_all: {
      const std::size_t a = step.from.dim();
      const std::size_t b = step.to.dim();
      // The parent piece along a is the gathered size; along b it is the current size.
      Shape parent = step.before;
      parent[a] = step.after[a];
      const auto a_cuts = split(step.from.policy(), parent[a], p);
      const auto b_cuts = split(step.to.policy(), parent[b], p);
      std::vector<T> send;
      std::vector<std::size_t> send_counts, recv_counts;
      for (int m = 0; m < p; ++m) {
        Shape blk = step.before;
        blk[b] = b_cuts[static_cast<std::size_t>(m)].size;
        Shape off(blk.size(), 0);
        off[b] = b_cuts[static_cast<std::size_t>(m)].offset;
        const std::size_t start = send.size();
        send.resize(start + numel(blk));
        detail::copy_block(x.data(), step.before, off, send.data() + start, blk,
                           Shape(blk.size(), 0), blk);
        send_counts.push_back(numel(blk));
        Shape rblk = step.after;
        rblk[a] = a_cuts[static_cast<std::size_t>(m)].size;
        recv_counts.push_back(numel(rblk));
      }
      std::vector<T> recv(numel(step.after));
      g.all_to_all(std::span<const T>(send), send_counts, std::span<T>(recv), recv_counts);
      Tensor<T> y(step.after);
      std::size_t start = 0;
      for (int s = 0; s < p; ++s) {
        Shape rblk = step.after;
        rblk[a] = a_cuts[static_cast<std::size_t>(s)].size;
        Shape off(rblk.size(), 0);
        off[a] = a_cuts[static_cast<std::size_t>(s)].offset;
        detail::copy_block(recv.data() + start, rblk, Shape(rblk.size(), 0), y.data(), step.after,
                           off, rblk);
        start += numel(rblk);
      }
      return y;
    }
  }
  return x;
}

// Runs the plan on this rank: `local` is its piece under `from`; returns its piece under `to`.
// Every rank of the mesh calls it with the same arguments but its own piece.
// @throws UsageError as plan_redistribute, or when `local` does not have the piece's shape.
template <Element T>
Tensor<T> redistribute(const MeshGroups& groups, const Tensor<T>& local, const Shape& global,
                       const std::vector<Placement>& from, const std::vector<Placement>& to) {
  const DeviceMesh& mesh = groups.mesh();
  const auto& coords = groups.coordinates();
  // plan_redistribute's errors (which also validate both layouts) name this rank too.
  RedistributePlan plan;
  try {
    plan = plan_redistribute(global, dtype_of<T>, mesh, from, to, coords);
  } catch (const UsageError& e) {
    throw UsageError("rank " + std::to_string(groups.world().rank()) + ": " + e.what());
  }
  const Shape expect = local_piece(global, mesh, from, coords).shape;
  if (local.shape() != expect) {
    throw UsageError("redistribute " + format_placements(from) + " -> " + format_placements(to) +
                     " on mesh " + mesh.to_string() + ": rank " +
                     std::to_string(groups.world().rank()) + " holds " +
                     format_shape(local.shape()) + " but its piece of " + format_shape(global) +
                     " under " + format_placements(from) + " is " + format_shape(expect));
  }
  Tensor<T> x = local;
  for (const auto& step : plan.steps)
    x = execute_step(groups.along(step.mesh_dim), step, std::move(x));
  return x;
}

}  // namespace shardcheck
