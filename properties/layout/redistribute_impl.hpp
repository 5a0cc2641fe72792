// redistribute implementations the layout properties run against: the library's and catalogs
// of realistic bugs (mutants) that the properties must kill.
//
// A mutant is the library's planner and step executor with one realistic mistake: an edit of
// the plan (a step dropped, reordered, or with the wrong counts, op or split policy) or a
// replacement for one kind of step (padding left in an uneven gather, a gather along the wrong
// axis, a slice indexed by the world rank instead of the mesh coordinate, a reduction carried
// out in a lower precision than the element type).
//   redistribute_mutants()   float64, killed by redistribute_props.cpp (exact integer values)
//   reduction_mutants<T>()   float64, float32, bfloat16, float16: reductions in rounding
//                            arithmetic, killed by redistribute_bounds_props.cpp's bounds
#pragma once

#include "layout/device_mesh.hpp"
#include "layout/placement.hpp"
#include "layout/redistribute.hpp"
#include "tensor/tensor.hpp"

#include <functional>
#include <string>
#include <vector>

namespace shardcheck::layout_test {

template <class T>
struct BasicRedistributeImpl {
  std::string name;         // "shardcheck" or "mutant:<bug>"
  std::string description;  // the bug, in words
  // Runs on every rank of the mesh: this rank's piece under `from` -> its piece under `to`.
  std::function<Tensor<T>(const MeshGroups&, const Tensor<T>& local, const Shape& global,
                          const std::vector<Placement>& from, const std::vector<Placement>& to)>
      run;
};
using RedistributeImpl = BasicRedistributeImpl<double>;

template <class T>
BasicRedistributeImpl<T> library_redistribute_of() {
  BasicRedistributeImpl<T> impl;
  impl.name = "shardcheck";
  impl.description = "the library's redistribute (lib/layout/redistribute.hpp)";
  impl.run = [](const MeshGroups& groups, const Tensor<T>& local, const Shape& global,
                const std::vector<Placement>& from, const std::vector<Placement>& to) {
    return redistribute(groups, local, global, from, to);
  };
  return impl;
}

RedistributeImpl library_redistribute();
std::vector<RedistributeImpl> redistribute_mutants();
// Instantiated in redistribute_mutants.cpp for double, float, bfloat16 and float16.
template <class T>
std::vector<BasicRedistributeImpl<T>> reduction_mutants();

}  // namespace shardcheck::layout_test
