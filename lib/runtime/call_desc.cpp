#include "runtime/call_desc.hpp"

#include "runtime/counts.hpp"
#include "runtime/errors.hpp"
#include "runtime/format_list.hpp"

#include <sstream>

namespace shardcheck {

std::string format_counts(std::span<const std::size_t> counts) { return format_list(counts); }

std::string CallDesc::describe() const {
  std::ostringstream os;
  os << name(op) << '(' << name(dtype);
  switch (op) {
    case Collective::barrier: break;
    case Collective::broadcast: os << ", count=" << count << ", root=" << root; break;
    case Collective::reduce:
      os << ", count=" << count << ", op=" << name(reduce_op) << ", root=" << root;
      break;
    case Collective::all_reduce:
      os << ", count=" << count << ", op=" << name(reduce_op) << ", algorithm=" << name(algorithm);
      break;
    case Collective::all_gather: os << ", counts=" << format_counts(counts); break;
    case Collective::reduce_scatter:
      os << ", counts=" << format_counts(counts) << ", op=" << name(reduce_op)
         << ", algorithm=" << name(algorithm);
      break;
    case Collective::all_to_all:
      os << ", send_counts=" << format_counts(counts) << ", recv_counts=" << format_counts(counts2);
      break;
    case Collective::gather:
    case Collective::scatter:
      os << ", counts=" << format_counts(counts) << ", root=" << root;
      break;
    case Collective::ring_shift:
      os << ", shift=" << shift << ", send=" << send_count << ", recv=" << recv_count;
      break;
    case Collective::send:
    case Collective::recv: os << ", count=" << count; break;
  }
  os << ')';
  return os.str();
}

std::string Caller::who(int group_rank) const {
  const int w = (*members_)[static_cast<std::size_t>(group_rank)];
  if (w == group_rank) return "rank " + std::to_string(group_rank);
  return "rank " + std::to_string(group_rank) + " (world rank " + std::to_string(w) + ")";
}

void Caller::usage(std::string_view op, const std::string& problem) const {
  throw UsageError(who(rank_) + " of group " + format_group(*members_) + ", " + std::string(op) +
                   ": " + problem);
}

namespace {

[[noreturn]] void mismatch(const Caller& caller, const GroupCalls& group,
                           const std::string& detail) {
  std::string msg = "collective mismatch at step " + std::to_string(group.step) + " on group " +
                    format_group(caller.members()) + ": " + detail + "\n";
  for (int k = 0; k < caller.size(); ++k) {
    msg += "  " + caller.who(k) + ": " + group.calls[static_cast<std::size_t>(k)].describe() + "\n";
  }
  msg +=
      "Every rank of a group must call the same collective with the same element type, counts, "
      "root, reduce op and algorithm at the same step.";
  throw CollectiveMismatch(msg);
}

}  // namespace

void check_agreement(const Caller& caller, const GroupCalls& group) {
  const auto& calls = group.calls;
  const CallDesc& a = calls[0];
  for (const auto& b : calls) {
    if (b.op != a.op) mismatch(caller, group, "different collectives");
    if (b.dtype != a.dtype) mismatch(caller, group, "different element types");
    if (b.reduce_op != a.reduce_op) mismatch(caller, group, "different reduce ops");
    if (b.algorithm != a.algorithm) mismatch(caller, group, "different algorithms");
    if (b.root != a.root) mismatch(caller, group, "different roots");
    if (b.shift != a.shift) mismatch(caller, group, "different shifts");
    if (b.count != a.count) mismatch(caller, group, "different counts");
    if (b.counts != a.counts && a.op != Collective::all_to_all) {
      mismatch(caller, group, "different per-rank counts");
    }
  }
  const int p = caller.size();
  if (a.op == Collective::all_to_all) {
    for (int s = 0; s < p; ++s) {
      for (int d = 0; d < p; ++d) {
        const auto sent = calls[static_cast<std::size_t>(s)].counts[static_cast<std::size_t>(d)];
        const auto got = calls[static_cast<std::size_t>(d)].counts2[static_cast<std::size_t>(s)];
        if (sent != got) {
          mismatch(caller, group,
                   caller.who(s) + " sends " + std::to_string(sent) + " elements to " +
                       caller.who(d) + ", which expects " + std::to_string(got));
        }
      }
    }
  }
  if (a.op == Collective::ring_shift) {
    for (int r = 0; r < p; ++r) {
      const int src = wrap_rank(r - a.shift, p);
      const auto expect = calls[static_cast<std::size_t>(src)].send_count;
      const auto got = calls[static_cast<std::size_t>(r)].recv_count;
      if (expect != got) {
        mismatch(caller, group,
                 caller.who(r) + " receives " + std::to_string(got) + " elements from " +
                     caller.who(src) + ", which sends " + std::to_string(expect));
      }
    }
  }
}

std::string message_mismatch(const Caller& caller, std::uint64_t seq, int src,
                             const MessageDesc& sent, const MessageDesc& expects) {
  if (sent.dtype == expects.dtype && sent.count == expects.count && sent.tag == expects.tag) {
    return {};
  }
  return "send/recv mismatch on group " + format_group(caller.members()) + ", message " +
         std::to_string(seq) + " from " + caller.who(src) + " to " + caller.who(caller.rank()) +
         ": the sender sent " + std::to_string(sent.count) + " x " + std::string(name(sent.dtype)) +
         " with tag " + std::to_string(sent.tag) + ", the receiver expects " +
         std::to_string(expects.count) + " x " + std::string(name(expects.dtype)) + " with tag " +
         std::to_string(expects.tag) +
         ". Matching send and recv calls must agree on element type, count and tag.";
}

}  // namespace shardcheck
