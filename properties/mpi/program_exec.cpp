#include "program_exec.hpp"

#include "collectives_issue.hpp"

#include <algorithm>
#include <cstring>
#include <span>

namespace shardcheck::mpi_testing {
namespace {

using fuzz::Kind;

// The call on c: all_reduce in place on b (a copied into it first) when the program says so,
// every other call out of place.
template <Element T>
void call(Communicator& c, const fuzz::Call& s, std::vector<std::byte>& a,
          std::vector<std::byte>& b) {
  const std::span<T> A = fuzz::typed<T>(a), B = fuzz::typed<T>(b);
  if (s.kind == Kind::all_reduce && s.in_place) {
    std::copy(A.begin(), A.end(), B.begin());
    c.all_reduce(B, s.op, s.algo);
  } else {
    fuzz::issue<T>(c, s, A, B, s.dst);
  }
}

}  // namespace

RankBytes execute_rank(const fuzz::Program& prog, Communicator& world) {
  const int w = world.world_rank();
  // The program's groups, opened as the harness opens them (fuzz/collectives_issue.hpp).
  std::vector<std::unique_ptr<Communicator>> groups;
  const std::vector<Communicator*> comm = fuzz::open_groups(prog, world, groups);
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
