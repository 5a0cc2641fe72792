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

}  // namespace shardcheck::check
