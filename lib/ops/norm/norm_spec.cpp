#include "ops/norm/norm_spec.hpp"

#include "ops/linear/linear_spec.hpp"

namespace shardcheck {

using spec::Elem;
using spec::Pass;
using spec::Role;

namespace {

// The norm's tensors and, per rank, its backward all_reduce.
spec::OpSpec norm_part(const SequenceParallelNormConfig& cfg, std::size_t hidden, int p) {
  const bool beta = has_beta(cfg.norm.kind);
  const auto tok = Placement::shard(0, cfg.token_split);
  const auto rep = Placement::replicate();
  const std::size_t tokens = cfg.tokens;
  auto s = spec::op_spec("sequence_parallel_norm", "norm", to_json(cfg),
                         {{"tokens", tokens}, {"hidden", hidden}},
                         {{"tp", static_cast<std::size_t>(p)}}, {"x"});
  s.tensors = {spec::tensor("x", Role::input, {tokens, hidden}, {tok}),
               spec::tensor("gamma", Role::parameter, {hidden}, {rep})};
  if (beta) s.tensors.push_back(spec::tensor("beta", Role::parameter, {hidden}, {rep}));
  s.tensors.push_back(spec::tensor("y", Role::output, {tokens, hidden}, {tok}));
  s.tensors.push_back(spec::tensor("dy", Role::grad_output, {tokens, hidden}, {tok}));
  s.tensors.push_back(spec::tensor("dx", Role::grad_input, {tokens, hidden}, {tok}));
  s.tensors.push_back(spec::tensor("dgamma", Role::grad_input, {hidden}, {rep}));
  if (beta) s.tensors.push_back(spec::tensor("dbeta", Role::grad_input, {hidden}, {rep}));
  for (int r = 0; r < p; ++r) {
    s.calls.push_back(
        {spec::all_reduce_spec(Pass::backward, beta ? "dgamma,dbeta" : "dgamma", "tp", Elem::value,
                               beta ? 2 * hidden : hidden, p, r, cfg.reduce_algorithm)});
  }
  // Every rank's one buffer, in the backward: the packed parameter gradients it all_reduces.
  const spec::BufferSpec grads{beta ? "[dgamma | dbeta] all_reduce buffer [2·hidden]"
                                    : "[dgamma] all_reduce buffer [hidden]",
                               Elem::value, (beta ? 2 : 1) * hidden, "tp", Collective::all_reduce};
  s.buffers.assign(static_cast<std::size_t>(p), spec::one_buffer(Pass::backward, grads));
  return s;
}

}  // namespace

spec::OpSpec sequence_parallel_norm_spec(const SequenceParallelNormConfig& cfg, std::size_t hidden,
                                         int p) {
  return norm_part(cfg, hidden, p);
}

spec::OpSpec sp_block_spec(const SequenceParallelNormConfig& norm, std::size_t hidden,
                           std::size_t ffn, const SplitPolicy& ffn_split, int p) {
  const auto n = norm_part(norm, hidden, p);
  const auto col = column_parallel_linear_spec(sp_block_column_config(norm, ffn, ffn_split),
                                               norm.tokens, hidden, ffn, false, p);
  const auto row = row_parallel_linear_spec(sp_block_row_config(norm, ffn_split), norm.tokens, ffn,
                                            hidden, false, p);
  auto s = spec::op_spec("megatron_sp_block", "norm",
                         spec::JsonObject()
                             .raw("norm", n.config_json)
                             .field("ffn", ffn)
                             .raw("ffn_split", spec::json_split(ffn_split))
                             .raw("column", col.config_json)
                             .raw("row", row.config_json)
                             .str(),
                         {{"tokens", norm.tokens}, {"hidden", hidden}, {"ffn", ffn}}, n.mesh,
                         {"x", "z", "a"});
  // The norm's x, gamma, beta; the linears' weights as w1, w2; the block's y and gradients.
  for (const auto& t : n.tensors) {
    if (t.role == Role::input || t.role == Role::parameter) s.tensors.push_back(t);
  }
  auto w1 = col.tensor("w"), w2 = row.tensor("w");
  w1.name = "w1";
  w2.name = "w2";
  s.tensors.push_back(w1);
  s.tensors.push_back(w2);
  for (const auto& t : n.tensors) {
    if (t.role == Role::output || t.role == Role::grad_output || t.role == Role::grad_input) {
      s.tensors.push_back(t);
    }
  }
  // What the backward keeps besides x: the norm's output z (the column layer's token shard) and
  // the column layer's output a (its ffn features).
  s.tensors.push_back(
      spec::tensor("z", Role::saved, {norm.tokens, hidden}, col.tensor("x").placements));
  s.tensors.push_back(
      spec::tensor("a", Role::saved, {norm.tokens, ffn}, col.tensor("y").placements));
  auto dw1 = col.tensor("dw"), dw2 = row.tensor("dw");
  dw1.name = "dw1";
  dw2.name = "dw2";
  s.tensors.push_back(dw1);
  s.tensors.push_back(dw2);
  // The column-parallel layer's x, y, dx are the block's z, a, dz; the row-parallel's dx is da.
  const std::vector<spec::Rename> col_names{{"x", "z"}, {"y", "a"}, {"dx", "dz"}};
  const std::vector<spec::Rename> row_names{{"dx", "da"}};
  for (int r = 0; r < p; ++r) {
    // The norm makes no forward call: forward column, row; backward row, column, norm.
    auto c = spec::chain_calls(col, col_names, row, row_names, r);
    spec::append_calls(c, n.calls_of(r, Pass::backward));
    s.calls.push_back(std::move(c));
    // Each part frees its buffers before it returns: the moments of norm, column, row.
    const auto& nb = n.buffers[static_cast<std::size_t>(r)];
    const auto linears = spec::chain_buffers(col, "column", row, "row", r);
    spec::RankBuffers b;
    spec::append_moments(b.forward, nb.forward, "norm");
    spec::append_moments(b.forward, linears.forward);
    spec::append_moments(b.backward, linears.backward);
    spec::append_moments(b.backward, nb.backward, "norm");
    s.buffers.push_back(std::move(b));
  }
  return s;
}

std::vector<spec::OpSpec> norm_example_specs() {
  SequenceParallelNormConfig cfg;
  cfg.tokens = 7;
  cfg.token_split = SplitPolicy::explicit_sizes({3, 0, 4});
  return {sequence_parallel_norm_spec(cfg, 4, 3),
          sp_block_spec(cfg, 4, 5, SplitPolicy::balanced(), 3)};
}

}  // namespace shardcheck
