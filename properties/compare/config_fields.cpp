#include "compare/config_fields.hpp"

#include <vector>

namespace shardcheck::check {

SplitPolicy split_or(cases::Fields& config, const std::string& key, const SplitPolicy& fallback) {
  if (!config.has(key)) return fallback;
  cases::Fields f = config.object(key);
  const std::string kind = f.choice("kind", {"chunk", "balanced", "explicit"});
  SplitPolicy p = fallback;
  if (kind == "chunk") p = SplitPolicy::chunk();
  else if (kind == "balanced") p = SplitPolicy::balanced();
  else p = SplitPolicy::explicit_sizes(f.sizes("sizes"));
  f.done();
  return p;
}

std::optional<std::int64_t> field_or(cases::Fields& config, const std::string& key,
                                     std::optional<std::int64_t> fallback) {
  if (!config.has(key)) return fallback;
  if (config.raw(key).is_null()) return std::nullopt;
  return config.integer(key);
}

std::optional<std::size_t> field_or(cases::Fields& config, const std::string& key,
                                    std::optional<std::size_t> fallback) {
  if (!config.has(key)) return fallback;
  if (config.raw(key).is_null()) return std::nullopt;
  return config.size(key);
}

}  // namespace shardcheck::check
