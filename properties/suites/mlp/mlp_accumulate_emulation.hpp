// An MLP under a declared accumulator (docs/mlp.md, "A declared accumulator"), emulated
// independently of lib/ops/mlp for the tests of its bound: every dot and sum of the projections
// accumulated in A in index order (each product rounded to A, each partial sum rounded to A; A =
// bfloat16 is 16-bit accumulation, as torch's CPU matmuls of small bfloat16 operands do), each
// rank's part of a split dot rounded to T and the parts summed in T in rank order, the biases
// added once in T after; the activation and its gradient evaluated in float (lib/ops/mlp's
// formulas) and rounded once to T. Float holds every bfloat16 product exactly, and a float
// addition rounded to bfloat16 is one rounding (24 ≥ 2·8 + 2 bits: Figueroa, SIGNUM Newsl. 1995).
#pragma once

#include "ops/mlp/mlp.hpp"
#include "tensor/tensor.hpp"

#include <cstddef>
#include <span>
#include <vector>

namespace shardcheck::mlp_emulation {

template <class T>
struct EmulatedMlp {
  Tensor<T> y, dx, dw_up, db_up, dw_down, db_down;  // fused up as [gate; up]; biases' empty
};

// Σ_k a(k)·b(k) in A, in index order, rounded to T.
template <class A, class T, class Fa, class Fb>
T dot_in(std::size_t n, Fa a, Fb b) {
  A acc(0.0F);
  for (std::size_t k = 0; k < n; ++k) {
    const A p(static_cast<float>(a(k)) * static_cast<float>(b(k)));
    acc = A(static_cast<float>(acc) + static_cast<float>(p));
  }
  return T(static_cast<float>(acc));
}

template <class T>
T add_in(T a, T b) {
  return T(static_cast<float>(a) + static_cast<float>(b));
}

// x [n, H], w_up [k·F, H] ([w_gate; w_up] for swiglu), b_up [k·F], w_down [H, F], b_down [H]
// (biases empty without bias), dy [n, H]; `ffn_parts` the ranks' shares of F in rank order.
template <class A, class T>
EmulatedMlp<T> emulate_mlp(const Tensor<T>& x, const Tensor<T>& w_up, const Tensor<T>& b_up,
                           const Tensor<T>& w_down, const Tensor<T>& b_down, const Tensor<T>& dy,
                           Activation act, std::span<const std::size_t> ffn_parts) {
  const std::size_t n = x.dim(0), hid = x.dim(1), f = w_down.dim(1), kf = w_up.dim(0);
  const bool swiglu = act == Activation::swiglu, bias = !b_up.empty();
  auto value = [act](float z) {
    return act == Activation::gelu        ? gelu(z)
           : act == Activation::gelu_tanh ? gelu_tanh(z)
                                          : silu(z);
  };
  auto grad = [act](float z) {
    return act == Activation::gelu        ? gelu_grad(z)
           : act == Activation::gelu_tanh ? gelu_tanh_grad(z)
                                          : silu_grad(z);
  };
  const auto F = [](T v) { return static_cast<float>(v); };
  Tensor<T> h({n, kf}), a({n, f});
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t c = 0; c < kf; ++c) {
      h(t, c) = dot_in<A, T>(
          hid, [&](std::size_t i) { return x(t, i); }, [&](std::size_t i) { return w_up(c, i); });
      if (bias) h(t, c) = add_in(h(t, c), b_up[c]);
    }
    for (std::size_t j = 0; j < f; ++j) {
      a(t, j) = swiglu ? T(value(F(h(t, j))) * F(h(t, f + j))) : T(value(F(h(t, j))));
    }
  }
  EmulatedMlp<T> out;
  // A dot over the ffn axis, rank r's columns cols(r, q) for q < its length `len(r)`, each part
  // rounded to T and the parts summed in T in rank order.
  const auto over_ranks = [&](auto len, auto term) {
    T sum(0.0F);
    bool first = true;
    for (std::size_t r = 0, off = 0; r < ffn_parts.size(); off += ffn_parts[r], ++r) {
      if (ffn_parts[r] == 0) continue;
      const T part = dot_in<A, T>(
          len(r), [&](std::size_t q) { return term(off, r, q).first; },
          [&](std::size_t q) { return term(off, r, q).second; });
      sum = first ? part : add_in(sum, part);
      first = false;
    }
    return sum;
  };
  out.y = Tensor<T>({n, hid});
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t o = 0; o < hid; ++o) {
      out.y(t, o) = over_ranks([&](std::size_t r) { return ffn_parts[r]; },
                               [&](std::size_t off, std::size_t, std::size_t q) {
                                 return std::pair{a(t, off + q), w_down(o, off + q)};
                               });
      if (bias) out.y(t, o) = add_in(out.y(t, o), b_down[o]);
    }
  }
  // The backward: da = dy·w_down, dh elementwise in float, dx over the ranks' fused columns
  // (rank r's gate columns, then its up columns), the weight and bias gradients over tokens.
  Tensor<T> da({n, f}), dh({n, kf});
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t j = 0; j < f; ++j) {
      da(t, j) = dot_in<A, T>(
          hid, [&](std::size_t o) { return dy(t, o); },
          [&](std::size_t o) { return w_down(o, j); });
      const float g = F(h(t, j));
      if (swiglu) {
        dh(t, j) = T(F(da(t, j)) * F(h(t, f + j)) * grad(g));
        dh(t, f + j) = T(F(da(t, j)) * value(g));
      } else {
        dh(t, j) = T(grad(g) * F(da(t, j)));
      }
    }
  }
  const std::size_t k = swiglu ? 2 : 1;
  out.dx = Tensor<T>({n, hid});
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t i = 0; i < hid; ++i) {
      out.dx(t, i) = over_ranks([&](std::size_t r) { return k * ffn_parts[r]; },
                                [&](std::size_t off, std::size_t r, std::size_t q) {
                                  const std::size_t c =
                                      (q / ffn_parts[r]) * f + off + q % ffn_parts[r];
                                  return std::pair{dh(t, c), w_up(c, i)};
                                });
    }
  }
  // The sums over tokens: dw[r, c] = Σ_t g(t, r)·in(t, c) and db[r] = Σ_t g(t, r).
  const T one(1.0F);
  const auto over_tokens = [&](std::size_t rows, std::size_t cols, auto g, auto in, Tensor<T>& dw,
                               Tensor<T>& db) {
    dw = Tensor<T>({rows, cols});
    if (bias) db = Tensor<T>({rows});
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < cols; ++c) {
        dw(r, c) = dot_in<A, T>(
            n, [&](std::size_t t) { return g(t, r); }, [&](std::size_t t) { return in(t, c); });
      }
      if (bias) {
        db[r] = dot_in<A, T>(
            n, [&](std::size_t t) { return g(t, r); }, [&](std::size_t) { return one; });
      }
    }
  };
  over_tokens(
      kf, hid, [&](std::size_t t, std::size_t c) { return dh(t, c); },
      [&](std::size_t t, std::size_t i) { return x(t, i); }, out.dw_up, out.db_up);
  over_tokens(
      hid, f, [&](std::size_t t, std::size_t o) { return dy(t, o); },
      [&](std::size_t t, std::size_t j) { return a(t, j); }, out.dw_down, out.db_down);
  return out;
}

}  // namespace shardcheck::mlp_emulation
