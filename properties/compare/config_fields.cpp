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

Algorithm algorithm_or(cases::Fields& config, const std::string& key, Algorithm fallback) {
  return named_or(config, key,
                  {Algorithm::ring, Algorithm::sequential, Algorithm::chain, Algorithm::direct,
                   Algorithm::none},
                  fallback);
}

Kernel kernel_or(cases::Fields& config, const std::string& key, Kernel fallback) {
  if (!config.has(key)) return fallback;
  return config.choice(key, {"deterministic", "fast"}) == "fast" ? Kernel::fast
                                                                 : Kernel::deterministic;
}

}  // namespace shardcheck::check
