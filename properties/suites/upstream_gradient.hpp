// How a family's case on disk gives its upstream gradient (docs/case-format.md): an optional
// input. Shared by the families' read_tensors (suites/<family>/<family>_compare.cpp).
#pragma once

#include "compare/compare.hpp"
#include "tensor/tensor.hpp"

#include <initializer_list>
#include <utility>

namespace shardcheck::check {

// Reads the optional upstream gradient `input` (dy, dout, dloss) into t. Without it t becomes
// zeros of `shape`, so the run still has an upstream gradient, and no gradient is judged: a case
// that gives any of the gradient outputs `grads` without it is refused by
// CaseReader::require_input_for, which names the missing input and the output that needs it.
template <class T>
void read_upstream_gradient(CaseReader& r, const char* input, Tensor<T>& t, Shape shape,
                            std::initializer_list<const char*> grads) {
  if (r.input(input, t, false)) return;
  for (const char* g : grads) {
    if (r.has_output(g)) r.require_input_for(input, g);
  }
  t = Tensor<T>(std::move(shape));
}

}  // namespace shardcheck::check
