#include "program_exec.hpp"

#include <algorithm>
#include <cstring>
#include <span>

namespace shardcheck::mpi_testing {
namespace {

using fuzz::Kind;

template <Element T>
std::span<T> typed(std::vector<std::byte>& v) {
  return {reinterpret_cast<T*>(v.data()), v.size() / sizeof(T)};
}

template <Element T>
void call(Communicator& c, const fuzz::Call& s, std::vector<std::byte>& a,
          std::vector<std::byte>& b) {
  const auto ur = static_cast<std::size_t>(c.rank());
  const std::span<T> A = typed<T>(a), B = typed<T>(b);
  switch (s.kind) {
    case Kind::barrier: c.barrier(); break;
    case Kind::broadcast: c.broadcast(A, s.root); break;
    case Kind::reduce: c.reduce<T>(A, B, s.op, s.root); break;
    case Kind::all_reduce:
      if (s.in_place) {
        std::copy(A.begin(), A.end(), B.begin());
        c.all_reduce(B, s.op, s.algo);
      } else {
        c.all_reduce<T>(A, B, s.op, s.algo);
      }
      break;
    case Kind::all_gather: c.all_gather<T>(A, B, s.counts); break;
    case Kind::reduce_scatter: c.reduce_scatter<T>(A, B, s.counts, s.op, s.algo); break;
    case Kind::all_to_all: {
      std::vector<std::size_t> col;
      for (const auto& row : s.matrix) col.push_back(row[ur]);
      c.all_to_all<T>(A, s.matrix[ur], B, col);
      break;
    }
    case Kind::gather: c.gather<T>(A, B, s.counts, s.root); break;
    case Kind::scatter: c.scatter<T>(A, B, s.counts, s.root); break;
    case Kind::ring_shift: c.ring_shift<T>(A, B, s.shift); break;
    case Kind::send_recv:
      if (c.rank() == s.src) c.send<T>(A, s.dst, s.tag);
      else c.recv<T>(B, s.src, s.tag);
      break;
  }
}

}  // namespace

RankBytes execute_rank(const fuzz::Program& prog, Communicator& world) {
  const int w = world.world_rank();
  // Every rank creates every group it belongs to, in program order (as the harness does).
  std::vector<std::unique_ptr<Communicator>> groups(prog.groups.size());
  std::vector<Communicator*> comm(prog.groups.size(), nullptr);
  comm[0] = &world;
  for (std::size_t g = 1; g < prog.groups.size(); ++g) {
    const auto& grp = prog.groups[g];
    Communicator* parent = comm[static_cast<std::size_t>(grp.parent)];
    if (parent == nullptr || fuzz::rank_in(grp, w) < 0) continue;
    groups[g] = parent->group(grp.ranks_in_parent);
    comm[g] = groups[g].get();
  }
  RankBytes out;
  for (const auto& act : prog.actions[static_cast<std::size_t>(w)]) {
    const fuzz::Call& s = act.spec;
    Communicator& c = *comm[static_cast<std::size_t>(s.group)];
    const int r = c.rank();
    const int p = c.size();
    const std::size_t e = size_of(s.dtype);
    const auto& input =
        prog.inputs[static_cast<std::size_t>(act.call)][static_cast<std::size_t>(r)];
    std::vector<std::byte> a(fuzz::send_count(s, r, p) * e, std::byte{0x3C});
    std::memcpy(a.data(), input.data(), std::min(a.size(), input.size()));
    std::vector<std::byte> b(fuzz::recv_count(s, r, p) * e, std::byte{0xA5});
    visit_dtype(s.dtype, [&](auto t) { call<decltype(t)>(c, s, a, b); });
    a.insert(a.end(), b.begin(), b.end());
    out.push_back(std::move(a));
  }
  return out;
}

std::string ledger_text(const Ledger& l) {
  std::string s;
  for (const auto& e : l.entries()) {
    s += e.to_string() + " op=" + std::string(name(e.reduce_op)) +
         " peer=" + std::to_string(e.peer) + " step=" + std::to_string(e.step) + "\n";
  }
  return s;
}

}  // namespace shardcheck::mpi_testing
