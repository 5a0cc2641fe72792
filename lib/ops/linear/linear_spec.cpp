#include "ops/linear/linear_spec.hpp"

namespace shardcheck {

using spec::Elem;
using spec::Pass;
using spec::Role;

namespace {

// x, w, b, y and their gradients, each gradient placed as its tensor.
void add_tensors(spec::OpSpec& s, std::size_t tokens, std::size_t in, std::size_t out,
                 bool has_bias, const Placement& x, const Placement& w, const Placement& b,
                 const Placement& y) {
  s.tensors = {spec::tensor("x", Role::input, {tokens, in}, {x}),
               spec::tensor("w", Role::parameter, {out, in}, {w})};
  if (has_bias) s.tensors.push_back(spec::tensor("b", Role::parameter, {out}, {b}));
  s.tensors.push_back(spec::tensor("y", Role::output, {tokens, out}, {y}));
  s.tensors.push_back(spec::tensor("dy", Role::grad_output, {tokens, out}, {y}));
  s.tensors.push_back(spec::tensor("dx", Role::grad_input, {tokens, in}, {x}));
  s.tensors.push_back(spec::tensor("dw", Role::grad_input, {out, in}, {w}));
  if (has_bias) s.tensors.push_back(spec::tensor("db", Role::grad_input, {out}, {b}));
  s.kept = {"x"};
}

// Each rank's buffers (the same on every rank: the gathered and full tensors are global).
// Forward: with SP the all_gathered x, and with gather_output the blocks of y's
// all_gather_last_axis while the gathered x is still live. Backward with SP: x gathered again
// and the full dx that is reduce_scattered (without SP dx is all_reduced in place: the result).
spec::RankBuffers column_buffers(const ColumnParallelConfig& cfg, std::size_t tokens,
                                 std::size_t in, std::size_t out) {
  const bool sp = cfg.sequence_parallel_input;
  const spec::BufferSpec gathered{"all_gathered x [tokens, in]", Elem::value, tokens * in, "tp",
                                  Collective::all_gather};
  spec::RankBuffers b;
  spec::Moment fwd;
  if (sp) fwd.push_back(gathered);
  if (cfg.gather_output) {
    fwd.push_back({"all_gather_last_axis blocks of y [tokens, out]", Elem::value, tokens * out,
                   "tp", Collective::all_gather});
  }
  spec::add_moment(b.forward, std::move(fwd));
  if (sp) {
    b.backward.push_back({gathered,
                          {"full dx [tokens, in] (reduce_scatter input)", Elem::value, tokens * in,
                           "tp", Collective::reduce_scatter}});
  }
  return b;
}

// Forward with SP output: the full partial y that is reduce_scattered (without, y is
// all_reduced in place). Backward: with SP the all_gathered dy, and without input_is_parallel
// the blocks of dx's all_gather_last_axis as well.
spec::RankBuffers row_buffers(const RowParallelConfig& cfg, std::size_t tokens, std::size_t in,
                              std::size_t out) {
  spec::RankBuffers b;
  spec::Moment bwd;
  if (cfg.sequence_parallel_output) {
    b.forward.push_back({{"full partial y [tokens, out] (reduce_scatter input)", Elem::value,
                          tokens * out, "tp", Collective::reduce_scatter}});
    bwd.push_back(
        {"all_gathered dy [tokens, out]", Elem::value, tokens * out, "tp", Collective::all_gather});
  }
  if (!cfg.input_is_parallel) {
    bwd.push_back({"all_gather_last_axis blocks of dx [tokens, in]", Elem::value, tokens * in, "tp",
                   Collective::all_gather});
  }
  spec::add_moment(b.backward, std::move(bwd));
  return b;
}

}  // namespace

spec::OpSpec column_parallel_linear_spec(const ColumnParallelConfig& cfg, std::size_t tokens,
                                         std::size_t in, std::size_t out, bool has_bias, int p) {
  auto s = spec::op_spec("column_parallel_linear", "linear", to_json(cfg),
                         {{"tokens", tokens}, {"in", in}, {"out", out}},
                         {{"tp", static_cast<std::size_t>(p)}});
  const auto x =
      cfg.sequence_parallel_input ? Placement::shard(0, cfg.token_split) : Placement::replicate();
  const auto w = Placement::shard(0, cfg.out_split);
  add_tensors(s, tokens, in, out, has_bias, x, w, w,
              cfg.gather_output ? Placement::replicate() : Placement::shard(1, cfg.out_split));
  const auto x_pieces = spec::pieces_times(cfg.token_split, tokens, p, in);
  const auto algo = cfg.all_reduce_algorithm;
  for (int r = 0; r < p; ++r) {
    spec::RankCalls c;
    if (cfg.sequence_parallel_input) {
      c.push_back(spec::all_gather_spec(Pass::forward, "x", "tp", Elem::value, x_pieces, r));
    }
    if (cfg.gather_output) {
      c.push_back(spec::all_gather_spec(Pass::forward, "y", "tp", Elem::value,
                                        spec::pieces_times(cfg.out_split, out, p, tokens), r));
    }
    if (cfg.sequence_parallel_input) {
      c.push_back(spec::all_gather_spec(Pass::backward, "x", "tp", Elem::value, x_pieces, r));
      c.push_back(
          spec::reduce_scatter_spec(Pass::backward, "dx", "tp", Elem::value, x_pieces, r, algo));
    } else {
      c.push_back(
          spec::all_reduce_spec(Pass::backward, "dx", "tp", Elem::value, tokens * in, p, r, algo));
    }
    s.calls.push_back(std::move(c));
  }
  s.buffers.assign(static_cast<std::size_t>(p), column_buffers(cfg, tokens, in, out));
  return s;
}

spec::OpSpec row_parallel_linear_spec(const RowParallelConfig& cfg, std::size_t tokens,
                                      std::size_t in, std::size_t out, bool has_bias, int p) {
  auto s = spec::op_spec("row_parallel_linear", "linear", to_json(cfg),
                         {{"tokens", tokens}, {"in", in}, {"out", out}},
                         {{"tp", static_cast<std::size_t>(p)}});
  const auto w = Placement::shard(1, cfg.in_split);
  add_tensors(
      s, tokens, in, out, has_bias, cfg.input_is_parallel ? w : Placement::replicate(), w,
      Placement::replicate(),
      cfg.sequence_parallel_output ? Placement::shard(0, cfg.token_split) : Placement::replicate());
  const auto y_pieces = spec::pieces_times(cfg.token_split, tokens, p, out);
  const auto algo = cfg.reduce_algorithm;
  for (int r = 0; r < p; ++r) {
    spec::RankCalls c;
    if (cfg.sequence_parallel_output) {
      c.push_back(
          spec::reduce_scatter_spec(Pass::forward, "y", "tp", Elem::value, y_pieces, r, algo));
      c.push_back(spec::all_gather_spec(Pass::backward, "dy", "tp", Elem::value, y_pieces, r));
    } else {
      c.push_back(
          spec::all_reduce_spec(Pass::forward, "y", "tp", Elem::value, tokens * out, p, r, algo));
    }
    if (!cfg.input_is_parallel) {
      c.push_back(spec::all_gather_spec(Pass::backward, "dx", "tp", Elem::value,
                                        spec::pieces_times(cfg.in_split, in, p, tokens), r));
    }
    s.calls.push_back(std::move(c));
  }
  s.buffers.assign(static_cast<std::size_t>(p), row_buffers(cfg, tokens, in, out));
  return s;
}

std::vector<spec::OpSpec> linear_example_specs() {
  ColumnParallelConfig col;
  col.out_features = 5;
  col.tokens = 7;
  col.out_split = SplitPolicy::explicit_sizes({2, 0, 3});
  col.gather_output = true;
  col.sequence_parallel_input = true;
  RowParallelConfig row;
  row.in_split = SplitPolicy::explicit_sizes({2, 0, 3});
  row.sequence_parallel_output = true;
  return {column_parallel_linear_spec(col, 7, 4, 5, true, 3),
          row_parallel_linear_spec(row, 7, 5, 4, true, 3)};
}

}  // namespace shardcheck
