#include "engine/tensor_check.hpp"

#include "engine/format_number.hpp"

#include <string>

namespace shardcheck::check {
namespace {

std::string where(const TensorCheck& c) {
  std::string s = c.name + format_shape(c.worst_index);
  if (c.worst_rank >= 0) {
    s += ", owned by rank " + std::to_string(c.worst_rank) + " (" + c.placement + " over " +
         std::to_string(c.parts) + " ranks), " + std::to_string(c.worst_boundary_distance) +
         " element" + (c.worst_boundary_distance == 1 ? "" : "s") + " from its shard boundary";
  } else {
    s += " (" + c.placement + ": held by every rank)";
  }
  return s;
}

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

}  // namespace

void ErrorProfile::reset(const Shape& shape, const Placement& placement, int parts) {
  *this = ErrorProfile{};
  if (numel(shape) == 0) return;
  const std::size_t a = placement.is_shard() ? placement.dim() : 0;
  axis = placement.is_shard() ? static_cast<int>(a) : -1;
  length = shape.empty() ? 1 : shape.at(a);
  inner_ = 1;
  for (std::size_t d = a + 1; d < shape.size(); ++d) inner_ *= shape[d];
  rest = numel(shape) / length;
  row_block = ceil_div(length, rest == 1 ? kMaxCells : kMaxRows);
  rows = ceil_div(length, row_block);
  col_block = ceil_div(rest, kMaxCells / rows);
  cols = ceil_div(rest, col_block);
  error.assign(rows * cols, 0.0);
  ratio.assign(rows * cols, 0.0);
  if (placement.is_shard()) {
    const auto pieces = split(placement.policy(), length, parts);
    for (std::size_t r = 1; r < pieces.size(); ++r) boundaries.push_back(pieces[r].offset);
  }
}

std::string TensorCheck::summary() const {
  std::string s = name + " " + format_shape(shape) + " " + placement + ": ";
  if (!problem.empty()) return s + problem;
  s += "max err " + format_number(max_abs_err) + ", " + format_number(max_ratio) +
       " of the bound, " + format_number(max_ulp) + " ulp";
  if (special_mismatches != 0)
    s += ", " + std::to_string(special_mismatches) + " NaN/Inf mismatches";
  if (over_bound != 0) s += ", " + std::to_string(over_bound) + " elements over the bound";
  s += fixed_tolerance_pass() ? "; assert_close: pass" : "; assert_close: FAIL";
  return s;
}

std::string TensorCheck::explain() const {
  if (!problem.empty()) return name + ": " + problem + "\n";
  std::string s;
  if (!divergent_ranks.empty()) {
    s += name + " is replicated (" + placement + ") but ranks";
    for (const int r : divergent_ranks) s += " " + std::to_string(r);
    s += " hold different bits from rank 0 (a replicated result must be identical on every "
         "rank).\n";
  }
  if (special_mismatches != 0 || over_bound != 0) {
    s += name + ": worst element " + where(*this) + ": got " + format_number(worst_actual) +
         ", exact " + format_number(worst_exact) + ", error " +
         format_number(std::fabs(worst_actual - worst_exact)) + " > bound " +
         format_number(worst_bound) + " (" +
         (std::isinf(max_ratio) ? std::string("NaN/Inf where the reference has none, or the "
                                              "reverse")
                                : format_number(max_ratio) + "x the bound") +
         "); " + std::to_string(over_bound) + " of " + std::to_string(numel(shape)) +
         " elements fail. A fixed assert_close tolerance would say: " +
         (fixed_tolerance_pass() ? "pass" : "fail") + ".\n";
  }
  return s;
}

}  // namespace shardcheck::check
