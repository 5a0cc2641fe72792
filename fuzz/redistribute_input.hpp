// redistribute_fuzz's input format: bytes → a redistribution problem on a device mesh. Every byte
// string is valid; missing bytes read as 0.
//
//   byte 0   mesh: 1 + b % 2 dimensions; bytes 1, 2: their sizes 1 + b % 4, the second cut
//            down until the world is at most 8 ranks
//   byte 3   tensor rank 1 + b % 2; bytes 4, 5: its dimensions b % 7 (0 included: uneven and
//            empty pieces are the common case)
//   per mesh dimension, a `from` placement byte, then a `to` placement byte, by b % 8:
//            0-1 Shard(b / 8 % (tensor rank + 1)) under chunk (a dimension one past the tensor's
//            rank must be refused), 2-3 the same under balanced, 4-5 Replicate, 6 Partial(sum),
//            7 Partial(max)
//            (a layout's Partials all take its first Partial's op)
//   then the global tensor's values: int8 each (int64 elements), and the partial terms' offsets
//   (one int8 per element per rank, see redistribute_fuzz.cpp)
#pragma once

#include "split_policy_input.hpp"

#include "layout/device_mesh.hpp"
#include "layout/placement.hpp"
#include "layout/sharding.hpp"
#include "tensor/tensor.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace shardcheck::fuzz {

struct RedistributeInput {
  std::vector<MeshDim> mesh;
  Shape global;
  std::vector<Placement> from, to;
  std::vector<std::uint8_t> rest;  // the value bytes, read by the harness
};

inline Placement placement_of(std::uint8_t b, std::size_t rank) {
  const auto d = static_cast<std::size_t>(b / 8) % (rank + 1);
  switch (b % 8) {
    case 0:
    case 1: return Placement::shard(d);
    case 2:
    case 3: return Placement::shard(d, SplitPolicy::balanced());
    case 4:
    case 5: return Placement::replicate();
    case 6: return Placement::partial(ReduceOp::sum);
    default: return Placement::partial(ReduceOp::max);
  }
}

inline RedistributeInput decode_redistribute_input(std::span<const std::uint8_t> bytes) {
  ByteReader r(bytes);
  RedistributeInput in;
  const std::size_t ndim = 1 + r.byte() % 2;
  const int a = 1 + r.byte() % 4;
  int b = 1 + r.byte() % 4;
  while (a * b > 8) --b;
  in.mesh.push_back({"a", a});
  if (ndim == 2) in.mesh.push_back({"b", b});
  const std::size_t rank = 1 + r.byte() % 2;
  const std::size_t d0 = r.byte() % 7, d1 = r.byte() % 7;
  in.global = rank == 1 ? Shape{d0} : Shape{d0, d1};
  for (std::size_t i = 0; i < ndim; ++i) {
    in.from.push_back(placement_of(r.byte(), rank));
    in.to.push_back(placement_of(r.byte(), rank));
  }
  // One reduction per layout: a later Partial takes the first one's op (mixed ops on one layout
  // are refused by materialize, not a redistribution).
  for (auto* ps : {&in.from, &in.to}) {
    const Placement* first = nullptr;
    for (auto& p : *ps) {
      if (!p.is_partial()) continue;
      if (first == nullptr) first = &p;
      else p = Placement::partial(first->reduce_op());
    }
  }
  for (std::size_t k = 0; k < 8 * 36 + 36; ++k) in.rest.push_back(r.byte());
  return in;
}

inline std::string describe(const RedistributeInput& in) {
  return "mesh " + DeviceMesh(in.mesh).to_string() + ", global " + format_shape(in.global) + ", " +
         format_placements(in.from) + " -> " + format_placements(in.to) + "\n";
}

}  // namespace shardcheck::fuzz
