#include "layout/split_policy.hpp"

#include "runtime/errors.hpp"

#include <string>

namespace shardcheck {
namespace {

std::string join(const std::vector<std::size_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i != 0) s += ',';
    s += std::to_string(v[i]);
  }
  return s;
}

}  // namespace

std::string SplitPolicy::to_string() const {
  switch (kind_) {
    case Kind::chunk: return "chunk";
    case Kind::balanced: return "balanced";
    case Kind::explicit_sizes: return "explicit[" + join(sizes_) + "]";
  }
  return "?";
}

std::vector<std::size_t> split_sizes(const SplitPolicy& policy, std::size_t n, int parts) {
  if (parts < 1) {
    throw UsageError("split: cannot split a dimension of " + std::to_string(n) + " into " +
                     std::to_string(parts) + " parts; the number of ranks must be at least 1");
  }
  const auto p = static_cast<std::size_t>(parts);
  std::vector<std::size_t> sizes(p, 0);
  switch (policy.kind()) {
    case SplitPolicy::Kind::chunk: {
      // torch.chunk: ceil(n/p) each, the last non-empty piece takes the rest, then empties.
      // (n + p - 1) / p would wrap for n near SIZE_MAX (found by fuzz/split_policy_fuzz).
      const std::size_t c = n / p + (n % p != 0 ? 1 : 0);
      std::size_t left = n;
      for (std::size_t k = 0; k < p; ++k) {
        sizes[k] = std::min(c, left);
        left -= sizes[k];
      }
      break;
    }
    case SplitPolicy::Kind::balanced:
      for (std::size_t k = 0; k < p; ++k) sizes[k] = n / p + (k < n % p ? 1 : 0);
      break;
    case SplitPolicy::Kind::explicit_sizes: {
      const auto& given = policy.sizes();
      // A sum that wraps around size_t must not pass for n (found by fuzz/split_policy_fuzz:
      // [SIZE_MAX, 2] "tiled" n = 1).
      std::size_t total = 0;
      bool wrapped = false;
      for (const std::size_t s : given)
        wrapped = __builtin_add_overflow(total, s, &total) || wrapped;
      if (given.size() != p || wrapped || total != n) {
        throw UsageError(
            "split: explicit sizes [" + join(given) + "] (" + std::to_string(given.size()) +
            " sizes, sum " + (wrapped ? std::string("beyond SIZE_MAX") : std::to_string(total)) +
            ") do not tile a dimension of " + std::to_string(n) + " over " + std::to_string(parts) +
            " ranks; give one non-negative size per rank "
            "adding up to " +
            std::to_string(n));
      }
      sizes = given;
      break;
    }
  }
  return sizes;
}

std::vector<Piece> split(const SplitPolicy& policy, std::size_t n, int parts) {
  const auto sizes = split_sizes(policy, n, parts);
  std::vector<Piece> pieces(sizes.size());
  std::size_t offset = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    pieces[k] = {offset, sizes[k]};
    offset += sizes[k];
  }
  return pieces;
}

}  // namespace shardcheck
