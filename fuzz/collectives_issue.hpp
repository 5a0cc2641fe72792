// One rank's side of a decoded program on the library's Communicator, as both of its runners do
// it: the harness (collectives_exec.cpp) and the MPI backend's equivalence test
// (properties/mpi/program_exec.cpp). Opening the program's groups, and issuing one call on
// buffers already sized for it.
#pragma once

#include "collectives_program.hpp"

#include "runtime/communicator.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace shardcheck::fuzz {

// The rank's communicator of each group of `prog`: [0] is `world`, [i] the one world rank
// world.world_rank() gets by calling group() on its parent's with the group's list, in program
// order, as every member does (nullptr where the rank is not a member). `owned` keeps the
// created ones. Under Deviation::usage_group the deviant names a rank twice in the list of
// prog.bad_group, which group() must refuse.
inline std::vector<Communicator*> open_groups(const Program& prog, Communicator& world,
                                              std::vector<std::unique_ptr<Communicator>>& owned) {
  const int w = world.world_rank();
  std::vector<Communicator*> comms(prog.groups.size(), nullptr);
  comms[0] = &world;
  for (std::size_t i = 1; i < prog.groups.size(); ++i) {
    const Group& g = prog.groups[i];
    Communicator* parent = comms[static_cast<std::size_t>(g.parent)];
    if (parent == nullptr || rank_in(g, w) < 0) continue;
    std::vector<int> list = g.ranks_in_parent;
    if (prog.deviation == Deviation::usage_group && static_cast<int>(i) == prog.bad_group &&
        w == prog.deviant) {
      list.push_back(list.front());  // a rank named twice: group() must refuse it
    }
    owned.push_back(parent->group(list));
    comms[i] = owned.back().get();
  }
  return comms;
}

// A byte buffer as the elements of T it holds.
template <Element T>
std::span<T> typed(std::vector<std::byte>& v) {
  return {reinterpret_cast<T*>(v.data()), v.size() / sizeof(T)};
}

// Issues call s on c out of place (s.in_place is not looked at): `send` is the send buffer (the
// broadcast's buffer), `recv` the receive buffer. send_recv: the sender sends to `dst` (s.dst,
// unless the caller means another), every other rank of the call receives from s.src.
template <Element T>
void issue(Communicator& c, const Call& s, std::span<T> send, std::span<T> recv, int dst) {
  const auto ur = static_cast<std::size_t>(c.rank());
  switch (s.kind) {
    case Kind::barrier: c.barrier(); break;
    case Kind::broadcast: c.broadcast(send, s.root); break;
    case Kind::reduce: c.reduce<T>(send, recv, s.op, s.root); break;
    case Kind::all_reduce: c.all_reduce<T>(send, recv, s.op, s.algo); break;
    case Kind::all_gather: c.all_gather<T>(send, recv, s.counts); break;
    case Kind::reduce_scatter: c.reduce_scatter<T>(send, recv, s.counts, s.op, s.algo); break;
    case Kind::all_to_all: {
      std::vector<std::size_t> col;
      for (const auto& row : s.matrix) col.push_back(row[ur]);
      c.all_to_all<T>(send, s.matrix[ur], recv, col);
      break;
    }
    case Kind::gather: c.gather<T>(send, recv, s.counts, s.root); break;
    case Kind::scatter: c.scatter<T>(send, recv, s.counts, s.root); break;
    case Kind::ring_shift: c.ring_shift<T>(send, recv, s.shift); break;
    case Kind::send_recv:
      if (c.rank() == s.src) c.send<T>(send, dst, s.tag);
      else c.recv<T>(recv, s.src, s.tag);
      break;
  }
}

}  // namespace shardcheck::fuzz
