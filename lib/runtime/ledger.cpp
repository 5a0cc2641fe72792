#include "runtime/ledger.hpp"

#include "runtime/format_list.hpp"

#include <sstream>

namespace shardcheck {

std::string format_group(const std::vector<int>& world_ranks) { return format_list(world_ranks); }

std::string LedgerEntry::to_string() const {
  std::ostringstream os;
  os << "step " << step << ' ' << name(op) << ' ' << name(algorithm) << ' ' << name(dtype) << " x"
     << count << ' ' << (group ? format_group(*group) : "[]");
  if (op == Collective::reduce || op == Collective::all_reduce ||
      op == Collective::reduce_scatter) {
    os << " op=" << name(reduce_op);
  }
  if (peer >= 0) os << " peer=" << peer;
  os << " sent " << bytes_sent << " recv " << bytes_recv;
  return os.str();
}

std::uint64_t Ledger::bytes_sent() const noexcept {
  std::uint64_t total = 0;
  for (const auto& e : entries_) total += e.bytes_sent;
  return total;
}

std::uint64_t Ledger::bytes_recv() const noexcept {
  std::uint64_t total = 0;
  for (const auto& e : entries_) total += e.bytes_recv;
  return total;
}

std::uint64_t Ledger::bytes_sent(Collective op) const noexcept {
  std::uint64_t total = 0;
  for (const auto& e : entries_) {
    if (e.op == op) total += e.bytes_sent;
  }
  return total;
}

std::uint64_t Ledger::bytes_recv(Collective op) const noexcept {
  std::uint64_t total = 0;
  for (const auto& e : entries_) {
    if (e.op == op) total += e.bytes_recv;
  }
  return total;
}

std::size_t Ledger::calls(Collective op) const noexcept {
  std::size_t n = 0;
  for (const auto& e : entries_) n += e.op == op ? 1 : 0;
  return n;
}

std::string Ledger::to_string() const {
  std::string s;
  for (const auto& e : entries_) {
    s += e.to_string();
    s += '\n';
  }
  return s;
}

}  // namespace shardcheck
