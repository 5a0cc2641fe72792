// libFuzzer harness for the split policies (lib/layout/split_policy.hpp): chunk, balanced and
// explicit sizes, on any n (0 to SIZE_MAX), any parts (−128..127) and any explicit sizes
// (wrong count, wrong sum, sums that wrap around size_t); layout in split_policy_input.hpp.
//
// Invariant. split(policy, n, parts) and split_sizes(...) either
//   - return parts pieces that tile [0, n) exactly: offset 0 = 0, offset k+1 = offset k + size
//     k with no wrap-around, the last piece ends at n, the sizes (summed without wrap-around)
//     are n and equal split_sizes'; chunk gives min(ceil(n/P), what is left) in order, balanced
//     n/P + (k < n mod P), explicit the sizes given; or
//   - throw UsageError naming n and the number of parts, exactly when parts < 1 or the explicit
//     sizes are not parts sizes whose true (unwrapped) sum is n.
// Any other exception, a wrong answer or a sanitizer report prints the problem and aborts.
#include "harness_support.hpp"
#include "split_policy_input.hpp"

#include "runtime/errors.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace shardcheck::fuzz {
namespace {

[[noreturn]] void violation(const SplitInput& in, const std::string& what) {
  report_violation("split_policy",
                   "split(" + in.policy.to_string() + ", n=" + std::to_string(in.n) +
                       ", parts=" + std::to_string(in.parts) + ")\n",
                   what);
}

// Whether the policy can tile n over parts, from the contract alone.
bool valid(const SplitInput& in) {
  if (in.parts < 1) return false;
  if (in.policy.kind() != SplitPolicy::Kind::explicit_sizes) return true;
  const auto& s = in.policy.sizes();
  if (s.size() != static_cast<std::size_t>(in.parts)) return false;
  std::size_t sum = 0;
  for (std::size_t v : s) {
    if (__builtin_add_overflow(sum, v, &sum)) return false;
  }
  return sum == in.n;
}

// The size of piece k as the header defines it.
std::size_t expected_size(const SplitInput& in, std::size_t k, std::size_t left) {
  const auto p = static_cast<std::size_t>(in.parts);
  switch (in.policy.kind()) {
    case SplitPolicy::Kind::chunk: {
      const std::size_t c = in.n / p + (in.n % p != 0 ? 1 : 0);  // ceil without overflow
      return c < left ? c : left;
    }
    case SplitPolicy::Kind::balanced: return in.n / p + (k < in.n % p ? 1 : 0);
    case SplitPolicy::Kind::explicit_sizes: return in.policy.sizes()[k];
  }
  return 0;
}

void check(const SplitInput& in) {
  std::vector<Piece> pieces;
  std::vector<std::size_t> sizes;
  try {
    pieces = split(in.policy, in.n, in.parts);
    sizes = split_sizes(in.policy, in.n, in.parts);
  } catch (const UsageError& e) {
    if (valid(in)) violation(in, std::string("refused a valid split: ") + e.what());
    const std::string m = e.what();
    if (m.find(std::to_string(in.n)) == std::string::npos ||
        m.find(std::to_string(in.parts)) == std::string::npos) {
      violation(in, "the refusal does not name n and the number of parts: " + m);
    }
    return;
  } catch (const std::exception& e) {
    violation(in, std::string("threw something other than UsageError: ") + e.what());
  }
  if (!valid(in)) violation(in, "accepted a split the contract refuses");
  const auto p = static_cast<std::size_t>(in.parts);
  if (pieces.size() != p || sizes.size() != p) {
    violation(in, std::to_string(pieces.size()) + " pieces and " + std::to_string(sizes.size()) +
                      " sizes for " + std::to_string(p) + " parts");
  }
  std::size_t end = 0;
  for (std::size_t k = 0; k < p; ++k) {
    const std::string at = "piece " + std::to_string(k) + ": ";
    if (pieces[k].offset != end) {
      violation(
          in, at + "offset " + std::to_string(pieces[k].offset) + ", want " + std::to_string(end));
    }
    if (pieces[k].size != sizes[k]) violation(in, at + "split and split_sizes disagree");
    const std::size_t want = expected_size(in, k, in.n - end);
    if (pieces[k].size != want) {
      violation(in,
                at + "size " + std::to_string(pieces[k].size) + ", want " + std::to_string(want));
    }
    if (__builtin_add_overflow(end, pieces[k].size, &end)) violation(in, at + "ends past SIZE_MAX");
    if (end > in.n) violation(in, at + "ends at " + std::to_string(end) + ", past n");
  }
  if (end != in.n) violation(in, "the pieces end at " + std::to_string(end) + ", not n");
}

}  // namespace
}  // namespace shardcheck::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  shardcheck::fuzz::check(shardcheck::fuzz::decode_split_input({data, size}));
  return 0;
}
