// The dense linear op (ops/linear/linear.hpp), its gradients and the splits of its parameters.
// The column- and row-parallel layers are in linear_parallel.cpp.
//
// Arithmetic decisions the header leaves to the implementation:
//   - The bias add in 16-bit types is float(a) + float(b) rounded once to T, which is what
//     Eigen's bfloat16/half operator+ does. It is the correctly rounded sum: float's 24 bits are
//     at least 2p + 2 for bfloat16 (p = 8) and float16 (p = 11), so rounding to float and then to
//     T never double-rounds an addition (Figueroa, "When is double rounding innocuous?",
//     SIGNUM Newsletter 30(3), 1995).
//   - Every element of dx, dW and db is one sum in acc_t<T>, rounded once: dx_ti = Σ_j dy_tj W_ji
//     (j ascending), dW_ji = Σ_t dy_tj x_ti (t ascending), db_j = Σ_t dy_tj (t ascending, for
//     either kernel). Kernel::fast changes the order of dx and dW (linear_kernels.hpp).
//   - A bias b with no elements means "no bias" (b empty or [out] in the header).
#include "ops/linear/linear.hpp"

#include "ops/linear/linear_internal.hpp"
#include "ops/linear/linear_kernels.hpp"

#include <string>
#include <vector>

namespace shardcheck {
namespace linear_detail {
namespace {

// ---------------------------------------------------------------- arithmetic

template <class T>
T add_in(T a, T b) {
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    return a + b;
  } else {
    return static_cast<T>(static_cast<float>(a) + static_cast<float>(b));
  }
}

// A [rows, cols] operand in acc_t<T>, optionally transposed. Converting 16-bit values to float
// is exact; for float and double the untransposed operand is used in place.
template <class T>
class AccOperand {
 public:
  using A = acc_t<T>;
  AccOperand(const T* data, std::size_t rows, std::size_t cols, bool transpose) {
    if constexpr (std::is_same_v<T, A>) {
      if (!transpose) {
        ptr_ = data;
        return;
      }
    }
    own_.resize(rows * cols);
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = 0; j < cols; ++j) {
        own_[transpose ? j * rows + i : i * cols + j] = static_cast<A>(data[i * cols + j]);
      }
    }
    ptr_ = own_.data();
  }
  const A* data() const noexcept { return ptr_; }

 private:
  std::vector<A> own_;
  const A* ptr_ = nullptr;
};

// C [m, n] = A·Bᵀ, A [m, k], B [n, k] in acc_t<T>.
template <class T>
Tensor<T> abt(Kernel kernel, const AccOperand<T>& a, const AccOperand<T>& b, std::size_t m,
              std::size_t n, std::size_t k) {
  Tensor<T> c(Shape{m, n});
  if (kernel == Kernel::deterministic) {
    kernels::abt_deterministic(a.data(), b.data(), m, n, k, c.data());
  } else {
    kernels::abt_fast(a.data(), b.data(), m, n, k, c.data());
  }
  return c;
}

void require_rank(const std::string& where, int parts, int rank) {
  if (parts < 1) {
    throw UsageError(where + "cannot split over " + std::to_string(parts) +
                     " parts; the number of ranks must be at least 1");
  }
  if (rank < 0 || rank >= parts) {
    throw UsageError(where + "rank " + std::to_string(rank) + " is outside [0, " +
                     std::to_string(parts) + "); pass 0 <= rank < parts");
  }
}

// Rank's piece of the 2-D tensor t (`name`, laid out as `layout`) along axis 0 (its rows) or 1
// (its columns), whose extent is the dimension `dim`: the split helpers' common part.
template <class T>
Tensor<T> split_matrix(const char* fn, const char* name, const Tensor<T>& t, const char* layout,
                       std::size_t axis, const char* dim, const SplitPolicy& policy, int parts,
                       int rank) {
  const std::string where = std::string(fn) + ": ";
  require_2d(where, name, t, layout);
  require_rank(where, parts, rank);
  const auto ps =
      pieces(where,
             "the " + std::string(dim) + " = " + str(t.dim(axis)) +
                 (axis == 0 ? " rows of " : " columns of ") + name + " " + format_shape(t.shape()),
             policy, t.dim(axis), parts);
  const Piece& piece = ps[static_cast<std::size_t>(rank)];
  return axis == 0 ? take_rows(t, piece) : take_cols(t, piece);
}

}  // namespace

template <class T>
void add_bias(Tensor<T>& y, const Tensor<T>& b) {
  if (b.empty()) return;
  for (std::size_t t = 0; t < y.dim(0); ++t) {
    for (std::size_t j = 0; j < y.dim(1); ++j) y(t, j) = add_in(y(t, j), b[j]);
  }
}

template <class T>
Tensor<T> forward_core(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b, Kernel kernel) {
  const std::size_t tokens = x.dim(0), in = x.dim(1), out = w.dim(0);
  const AccOperand<T> xa(x.data(), tokens, in, false);
  const AccOperand<T> wa(w.data(), out, in, false);
  Tensor<T> y = abt<T>(kernel, xa, wa, tokens, out, in);
  add_bias(y, b);
  return y;
}

template <class T>
LinearGrads<T> backward_core(const Tensor<T>& x, const Tensor<T>& w, bool has_bias,
                             const Tensor<T>& dy, Kernel kernel) {
  const std::size_t tokens = x.dim(0), in = x.dim(1), out = w.dim(0);
  LinearGrads<T> g;
  {
    const AccOperand<T> dya(dy.data(), tokens, out, false);
    const AccOperand<T> wt(w.data(), out, in, true);  // [in, out]
    g.dx = abt<T>(kernel, dya, wt, tokens, in, out);
  }
  const AccOperand<T> dyt(dy.data(), tokens, out, true);  // [out, tokens]
  {
    const AccOperand<T> xt(x.data(), tokens, in, true);  // [in, tokens]
    g.dw = abt<T>(kernel, dyt, xt, out, in, tokens);
  }
  if (has_bias) {
    g.db = Tensor<T>(Shape{out});
    kernels::row_sums(dyt.data(), out, tokens, g.db.data());
  }
  return g;
}

}  // namespace linear_detail

using namespace linear_detail;  // NOLINT(google-build-using-namespace): this file's own helpers

// ================================================================ dense

template <class T>
Tensor<T> linear(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b, Kernel kernel) {
  const std::string where = "linear: ";
  require_2d(where, "x", x, "[tokens, in]");
  require_2d(where, "w", w, "[out, in]");
  require_same_in(where, "w", w, "x", x, "[out, in]");
  require_bias(where, "b", b, "w", w, "out");
  return forward_core(x, w, b, kernel);
}

template <class T>
LinearGrads<T> linear_backward(const Tensor<T>& x, const Tensor<T>& w, bool has_bias,
                               const Tensor<T>& dy, Kernel kernel) {
  const std::string where = "linear_backward: ";
  require_2d(where, "x", x, "[tokens, in]");
  require_2d(where, "w", w, "[out, in]");
  require_2d(where, "dy", dy, "[tokens, out]");
  require_same_in(where, "w", w, "x", x, "[out, in]");
  if (dy.dim(0) != x.dim(0) || dy.dim(1) != w.dim(0)) {
    throw UsageError(where + "dy is " + format_shape(dy.shape()) + " but x is " +
                     format_shape(x.shape()) + " and w is " + format_shape(w.shape()) +
                     "; dy must be [tokens, out] = [" + str(x.dim(0)) + ", " + str(w.dim(0)) + "]");
  }
  return backward_core(x, w, has_bias, dy, kernel);
}

// ================================================================ splits

template <class T>
Tensor<T> split_weight_by_output_features(const Tensor<T>& w, const SplitPolicy& policy, int parts,
                                          int rank) {
  return split_matrix("split_weight_by_output_features", "w", w, "[out, in]", 0, "out", policy,
                      parts, rank);
}

template <class T>
Tensor<T> split_weight_by_input_features(const Tensor<T>& w, const SplitPolicy& policy, int parts,
                                         int rank) {
  return split_matrix("split_weight_by_input_features", "w", w, "[out, in]", 1, "in", policy, parts,
                      rank);
}

template <class T>
Tensor<T> split_bias(const Tensor<T>& b, const SplitPolicy& policy, int parts, int rank) {
  const std::string where = "split_bias: ";
  require_rank(where, parts, rank);
  if (b.empty()) return Tensor<T>();
  if (b.ndim() != 1) {
    throw UsageError(where + "b must be empty (no bias) or 1-D [out] but is " +
                     format_shape(b.shape()));
  }
  const auto ps =
      pieces(where, "the out = " + str(b.dim(0)) + " elements of b", policy, b.dim(0), parts);
  return take_rows(b, ps[static_cast<std::size_t>(rank)]);
}

template <class T>
Tensor<T> split_input_by_features(const Tensor<T>& x, const SplitPolicy& policy, int parts,
                                  int rank) {
  return split_matrix("split_input_by_features", "x", x, "[tokens, in]", 1, "in", policy, parts,
                      rank);
}

template <class T>
Tensor<T> split_by_tokens(const Tensor<T>& x, const SplitPolicy& policy, int parts, int rank) {
  const std::string where = "split_by_tokens: ";
  if (x.ndim() < 1) {
    throw UsageError(where + "x must have a token axis [tokens, ...] but is " +
                     format_shape(x.shape()));
  }
  require_rank(where, parts, rank);
  const auto ps = pieces(where, "the " + str(x.dim(0)) + " tokens of x " + format_shape(x.shape()),
                         policy, x.dim(0), parts);
  return take_rows(x, ps[static_cast<std::size_t>(rank)]);
}

// ================================================================ instantiations

#define SHARDCHECK_INSTANTIATE(T)                                                                  \
  template Tensor<T> linear<T>(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, Kernel);      \
  template LinearGrads<T> linear_backward<T>(const Tensor<T>&, const Tensor<T>&, bool,             \
                                             const Tensor<T>&, Kernel);                            \
  template Tensor<T> split_weight_by_output_features<T>(const Tensor<T>&, const SplitPolicy&, int, \
                                                        int);                                      \
  template Tensor<T> split_weight_by_input_features<T>(const Tensor<T>&, const SplitPolicy&, int,  \
                                                       int);                                       \
  template Tensor<T> split_bias<T>(const Tensor<T>&, const SplitPolicy&, int, int);                \
  template Tensor<T> split_input_by_features<T>(const Tensor<T>&, const SplitPolicy&, int, int);   \
  template Tensor<T> split_by_tokens<T>(const Tensor<T>&, const SplitPolicy&, int, int);           \
  template Tensor<T> linear_detail::forward_core<T>(const Tensor<T>&, const Tensor<T>&,            \
                                                    const Tensor<T>&, Kernel);                     \
  template LinearGrads<T> linear_detail::backward_core<T>(const Tensor<T>&, const Tensor<T>&,      \
                                                          bool, const Tensor<T>&, Kernel);         \
  template void linear_detail::add_bias<T>(Tensor<T>&, const Tensor<T>&);

SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck
