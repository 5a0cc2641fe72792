// describe(): the readable listing of a decoded program that every failure message prints.
#include "collectives_program.hpp"

#include "runtime/format_list.hpp"

#include <sstream>

namespace shardcheck::fuzz {

std::string describe(const Call& c, const Group& g) {
  std::ostringstream os;
  os << name(c.kind) << " on g" << c.group << format_list(g.members);
  if (c.kind == Kind::barrier) return os.str();
  os << ' ' << name(c.dtype);
  switch (c.kind) {
    case Kind::broadcast: os << " count=" << c.count << " root=" << c.root; break;
    case Kind::reduce:
      os << " count=" << c.count << " root=" << c.root << " op=" << name(c.op);
      break;
    case Kind::all_reduce:
      os << " count=" << c.count << " op=" << name(c.op) << ' ' << name(c.algo);
      break;
    case Kind::all_gather: os << " counts=" << format_list(c.counts); break;
    case Kind::reduce_scatter:
      os << " counts=" << format_list(c.counts) << " op=" << name(c.op) << ' ' << name(c.algo);
      break;
    case Kind::all_to_all:
      os << " matrix=";
      for (const auto& row : c.matrix) os << format_list(row);
      break;
    case Kind::gather:
    case Kind::scatter: os << " counts=" << format_list(c.counts) << " root=" << c.root; break;
    case Kind::ring_shift:
      os << " shift=" << c.shift << " send_counts=" << format_list(c.counts);
      break;
    case Kind::send_recv:
      os << " " << c.src << "->" << c.dst << " tag=" << c.tag << " count=" << c.count;
      break;
    case Kind::barrier: break;
  }
  if (c.in_place) os << " in_place";
  constexpr const char* modes[] = {"raw", "small", "special", "mixed"};
  os << " values=" << modes[static_cast<int>(c.values)];
  return os.str();
}

std::string describe(const Program& p) {
  std::ostringstream os;
  os << "P=" << p.world << '\n';
  for (std::size_t i = 1; i < p.groups.size(); ++i) {
    const Group& g = p.groups[i];
    os << "  g" << i << " = g" << g.parent << ".group(" << format_list(g.ranks_in_parent)
       << ")  world ranks " << format_list(g.members) << '\n';
  }
  for (std::size_t i = 0; i < p.calls.size(); ++i) {
    const Call& c = p.calls[i];
    os << "  #" << i << ' ' << describe(c, p.groups[static_cast<std::size_t>(c.group)]) << '\n';
  }
  os << "  deviation: " << name(p.deviation);
  if (p.deviation != Deviation::none) os << ": " << p.deviation_text;
  os << '\n';
  return os.str();
}

}  // namespace shardcheck::fuzz
