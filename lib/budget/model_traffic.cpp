#include "budget/model_traffic.hpp"

#include "ops/model/model_spec.hpp"

namespace shardcheck::budget {

std::map<std::string, CollectiveTotals> model_step_traffic(const ModelConfig& cfg,
                                                           const ModelParallelConfig& par,
                                                           std::size_t sequences,
                                                           std::size_t seq_len, int world_rank,
                                                           ElementBytes e) {
  std::map<std::string, CollectiveTotals> out;
  for (const spec::CallSpec& c : model_train_step_calls(cfg, par, sequences, seq_len, world_rank)) {
    const auto b = c.bytes(c.elem == spec::Elem::value ? e.value : e.acc);
    CollectiveTotals& t = out[c.group];
    ++t.calls;
    t.sent += b.sent;
    t.recv += b.recv;
  }
  return out;
}

}  // namespace shardcheck::budget
