// redistribute implementations the layout properties run against: the library's and a catalog
// of realistic bugs (mutants) that the properties must kill (redistribute_props.cpp).
//
// A mutant is the library's planner and step executor with one realistic mistake: an edit of
// the plan (a step dropped, reordered, or with the wrong counts, op or split policy) or a
// replacement for one kind of step (padding left in an uneven gather, a gather along the wrong
// axis, a slice indexed by the world rank instead of the mesh coordinate).
#pragma once

#include "layout/device_mesh.hpp"
#include "layout/placement.hpp"
#include "layout/redistribute.hpp"
#include "tensor/tensor.hpp"

#include <functional>
#include <string>
#include <vector>

namespace shardcheck::layout_test {

struct RedistributeImpl {
  std::string name;         // "shardcheck" or "mutant:<bug>"
  std::string description;  // the bug, in words
  // Runs on every rank of the mesh: this rank's piece under `from` -> its piece under `to`.
  std::function<Tensor<double>(const MeshGroups&, const Tensor<double>& local, const Shape& global,
                               const std::vector<Placement>& from,
                               const std::vector<Placement>& to)>
      run;
};

RedistributeImpl library_redistribute();
std::vector<RedistributeImpl> redistribute_mutants();

}  // namespace shardcheck::layout_test
