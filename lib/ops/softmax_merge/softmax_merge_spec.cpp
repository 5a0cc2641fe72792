#include "ops/softmax_merge/softmax_merge_spec.hpp"

namespace shardcheck {

spec::OpSpec softmax_merge_spec(std::size_t parts, std::size_t rows, std::size_t width) {
  using spec::Role;
  const std::vector<Placement> rep{Placement::replicate()};
  auto s = spec::op_spec("softmax_merge", "softmax_merge", "{}",
                         {{"parts", parts}, {"rows", rows}, {"width", width}}, {});
  s.tensors = {spec::tensor("out_parts", Role::input, {parts, rows, width}, rep),
               spec::tensor("lse_parts", Role::input, {parts, rows}, rep),
               spec::tensor("out", Role::output, {rows, width}, rep),
               spec::tensor("lse", Role::output, {rows}, rep)};
  s.calls.resize(1);  // one rank, no collective and so no collective buffer
  s.buffers.resize(1);
  return s;
}

std::vector<spec::OpSpec> softmax_merge_example_specs() { return {softmax_merge_spec(3, 4, 2)}; }

}  // namespace shardcheck
