#include "ops/mlp/mlp_spec.hpp"

#include "ops/linear/linear_spec.hpp"

namespace shardcheck {

using spec::Role;

spec::OpSpec parallel_mlp_spec(const MlpConfig& cfg, std::size_t tokens, std::size_t hidden,
                               bool has_bias, int p) {
  const std::size_t F = cfg.ffn_features;
  const bool gate = cfg.activation == Activation::swiglu;
  // fc1's spec is over one ffn projection: the fused [k·F, H] moves no weight, only x and dx.
  const auto fc1 = column_parallel_linear_spec(fc1_config(cfg), tokens, hidden, F, false, p);
  const auto fc2 = row_parallel_linear_spec(fc2_config(cfg), tokens, F, hidden, false, p);
  auto s = spec::op_spec("parallel_mlp", "mlp", to_json(cfg),
                         {{"tokens", tokens}, {"hidden", hidden}, {"ffn", F}},
                         {{"tp", static_cast<std::size_t>(p)}}, {"x", "h"});
  const auto tok = fc1.tensor("x").placements;
  const auto rows = Placement::shard(0, cfg.ffn_split);
  const auto rep = Placement::replicate();
  const std::string fused = gate ? "fused on each rank as [w_gate_r; w_up_r] (split_fused_up)" : "";
  auto add = [&](const std::string& n, Role role, std::vector<std::size_t> shape,
                 std::vector<Placement> pl, std::string layout = "") {
    s.tensors.push_back(spec::tensor(n, role, std::move(shape), std::move(pl), std::move(layout)));
  };
  // The parameters (prefix "", Role::parameter) or their gradients ("d", Role::grad_input): the
  // same shapes and placements.
  auto add_parameters = [&](const std::string& prefix, Role role) {
    if (gate) add(prefix + "w_gate", role, {F, hidden}, {rows}, fused);
    add(prefix + "w_up", role, {F, hidden}, {rows}, fused);
    if (has_bias && gate) add(prefix + "b_gate", role, {F}, {rows}, fused);
    if (has_bias) add(prefix + "b_up", role, {F}, {rows}, fused);
    add(prefix + "w_down", role, {hidden, F}, {Placement::shard(1, cfg.ffn_split)});
    if (has_bias) add(prefix + "b_down", role, {hidden}, {rep});
  };
  add("x", Role::input, {tokens, hidden}, tok);
  add_parameters("", Role::parameter);
  add("y", Role::output, {tokens, hidden}, tok);
  add("dy", Role::grad_output, {tokens, hidden}, tok);
  add("dx", Role::grad_input, {tokens, hidden}, tok);
  // Saved: fc1's output h [tokens, k·F] before the activation, all tokens (fc1 gathered them)
  // and the rank's features (for swiglu its gate and up halves side by side, [tokens, 2·F_r]).
  {
    std::vector<std::size_t> h_cols = split_sizes(cfg.ffn_split, F, p);
    for (auto& n : h_cols) n *= gate ? 2 : 1;
    add("h", Role::saved, {tokens, (gate ? 2 : 1) * F},
        {Placement::shard(1, SplitPolicy::explicit_sizes(h_cols))},
        gate ? "each rank's [gate_r | up_r] side by side" : "");
  }
  add_parameters("d", Role::grad_input);
  // fc1's x, y, dx are x, h, dx of the MLP; fc2's x and dx are a and da.
  const std::vector<spec::Rename> fc1_names{{"y", "h"}};
  const std::vector<spec::Rename> fc2_names{{"dx", "da"}};
  for (int r = 0; r < p; ++r) {
    s.calls.push_back(spec::chain_calls(fc1, fc1_names, fc2, fc2_names, r));
    // fc1's buffers are of x and dx, which the fused [k·F_r, hidden] weight does not change.
    s.buffers.push_back(spec::chain_buffers(fc1, "fc1", fc2, "fc2", r));
  }
  return s;
}

std::vector<spec::OpSpec> mlp_example_specs() {
  MlpConfig cfg;
  cfg.activation = Activation::swiglu;
  cfg.ffn_features = 6;
  cfg.ffn_split = SplitPolicy::explicit_sizes({4, 0, 2});
  cfg.tokens = 5;
  cfg.sequence_parallel = true;
  return {parallel_mlp_spec(cfg, 5, 3, true, 3)};
}

}  // namespace shardcheck
